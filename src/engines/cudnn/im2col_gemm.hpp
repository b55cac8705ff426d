// Convolution as explicit GEMMs over im2col columns (fp32 tensors in NCHW:
// the fp32 and tf32 precisions), offered to the measured search
// (layer_convolution.cpp) beside cuDNN's algorithms for the forward and the
// weight gradient. It wins where cuDNN's implicit GEMMs are poor: few input
// channels and a large, strided window, as AlexNet's and OverFeat's first
// layer (11x11, stride 4, 3 channels) — on an H200 with cuDNN 9.19 their tf32
// weight gradient took 1.0 ms and their forward 0.5-0.8 ms at batch 64, where
// the arithmetic is 2.9-14 GFLOP. The price is workspace: the columns hold
// N*P*Q*C*R*S elements (AlexNet's conv1: 281 MB), so the search offers it only
// where they fit the workspace limit. A 1x1, stride-1, unpadded convolution
// needs no columns: each image's input planes are its C x PQ matrix already
// (ResNet's and GoogLeNet's 1x1 convolutions, as direct GEMMs).
//
//   forward:  per image n, Y_n (K x PQ) = W (K x CRS) col_n (CRS x PQ), one
//             strided-batched GEMM; y may be an NCHW slice (contiguous planes).
//   weight gradient: per image n, dW_n (K x CRS) = dY_n (K x PQ) col_n^T, one
//             strided-batched GEMM into the workspace, then dW = the sum over n
//             of dW_n (kernels::sum_padded_matrices). One GEMM over all N*PQ
//             positions would leave the GPU idle: its K x CRS output
//             (AlexNet's conv1: 64 x 363) is a few tiles.
// CRS is padded to a multiple of 4 (zero taps; 16-byte rows: AlexNet's 363
// would make cuBLAS fall back to kernels without vector loads), with a padded
// copy of W for the forward.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>

#include "crossbench/cell.hpp"
#include "engines/cudnn/cublaslt_matmul.hpp"

namespace crossbench::cudnn {

// The compute type of a GEMM on data of `precision`: fp32 CUBLAS_COMPUTE_32F
// (strict on the session's handle, which is in CUBLAS_DEFAULT_MATH), tf32
// CUBLAS_COMPUTE_32F_FAST_TF32, 16-bit data CUBLAS_COMPUTE_32F (fp32 accumulation).
cublasComputeType_t gemm_compute_type(Precision precision);

struct Im2colGemm {
  Precision precision = Precision::fp32;
  std::array<std::int64_t, 4> x_dims{};     // (N, C, H, W)
  std::array<std::int64_t, 4> x_strides{};  // [elements], W's stride 1
  std::array<std::int64_t, 4> y_dims{};     // (N, K, P, Q)
  std::array<std::int64_t, 4> y_strides{};  // [elements] of y and dy: contiguous (P, Q) planes
  int kernel = 1, stride = 1, padding = 0;

  std::int64_t positions() const { return y_dims[2] * y_dims[3]; }                   // P*Q
  std::int64_t taps() const { return x_dims[1] * kernel * kernel; }                  // C*R*S
  bool direct() const { return kernel == 1 && stride == 1 && padding == 0; }  // x is its own column matrix
  // C*R*S rounded up to 4 (a direct convolution's columns are x itself: unpadded).
  std::int64_t padded_taps() const { return direct() ? taps() : (taps() + 3) / 4 * 4; }
  std::int64_t column_bytes() const { return direct() ? 0 : x_dims[0] * padded_taps() * positions() * 4; }
  std::int64_t padded_weight_bytes() const { return padded_taps() == taps() ? 0 : y_dims[1] * padded_taps() * 4; }
  std::size_t forward_workspace_bytes() const {
    return static_cast<std::size_t>(column_bytes() + padded_weight_bytes());
  }
  std::int64_t partial_bytes() const { return x_dims[0] * y_dims[1] * padded_taps() * 4; }  // N weight gradients
  std::size_t weight_gradient_workspace_bytes() const {
    return static_cast<std::size_t>(column_bytes() + partial_bytes());
  }
  // Whether the shapes fit cuBLAS's 32-bit sizes and the layouts are the ones above.
  bool supported() const;
};

// The forward over NHWC tensors (any precision) as one GEMM per chunk of
// images: Y (rows = the chunk's N*P*Q positions, K) = columns (rows x CRS') W'^T,
// CRS' = C*R*S padded to whole 16-byte vectors, W' the filter packed as K x
// CRS' (kernels::pack_filter_taps) at the end of the workspace. NHWC's output
// rows are the GEMM's rows, so nothing is transposed or summed. It is for
// first layers: three input channels stored as eight (graph_builder's
// zero-padded input) and a large window, where cuDNN 9.19's best implicit GEMM
// is poor: on an H200 in bf16, ResNet-50's conv1 (7x7, stride 2) took 1.71 ms
// at batch 256 (35 TFLOP/s) and this 1.40; at batch 64 AlexNet's conv1 (11x11,
// stride 4) 0.252 against 0.204, OverFeat's 0.454 against 0.215
// (bench/results/2026-12-03/call41). `channels` is the real channel count: the
// padding channels are zeros in x and w, so the columns skip them (C*R*S = 147
// where the stored channels would make 392). The search times chunks whose
// columns are about 16 and 40 MiB (an H100's or H200's L2 holds them between
// im2col's write and the GEMM's read) and the largest chunk the workspace
// limit holds; the whole batch won at 64 and 256 images, except AlexNet (18).
struct Im2colGemmNhwc {
  Precision precision = Precision::fp32;
  std::int64_t element_bytes = 4;           // 2 (fp16, bf16) or 4 (fp32 data)
  std::array<std::int64_t, 4> x_dims{};     // (N, C stored, H, W)
  std::array<std::int64_t, 4> x_strides{};  // [elements] (image, 1, row, pixel)
  std::int64_t channels = 0;                // the real input channels (<= x_dims[1])
  std::array<std::int64_t, 4> y_dims{};     // (N, K, P, Q)
  std::array<std::int64_t, 4> y_strides{};  // [elements] (image, 1, row, pixel): pixels may be wider than K (a concat slice)
  int kernel = 1, stride = 1, padding = 0;
  std::int64_t chunk_images = 1;            // images per im2col + GEMM

  std::int64_t positions() const { return y_dims[2] * y_dims[3]; }  // P*Q
  std::int64_t taps() const { return channels * kernel * kernel; }  // C*R*S
  std::int64_t padded_taps() const {
    const std::int64_t vector = 16 / element_bytes;
    return (taps() + vector - 1) / vector * vector;
  }
  std::int64_t column_bytes_per_image() const { return positions() * padded_taps() * element_bytes; }
  // The columns of one chunk, then the packed filter (256-byte aligned).
  std::int64_t column_bytes() const { return (chunk_images * column_bytes_per_image() + 255) / 256 * 256; }
  std::size_t forward_workspace_bytes() const {
    return static_cast<std::size_t>(column_bytes() + y_dims[1] * padded_taps() * element_bytes);
  }
  // The most images whose columns fit `bytes` (at least one), at most the batch.
  std::int64_t images_within(std::int64_t bytes) const;
  // Whether the layouts are NHWC as above and a chunk's GEMM fits cuBLAS's 32-bit sizes.
  bool supported() const;
};

// y = conv(x, w) (no bias) over NHWC; `workspace` holds forward_workspace_bytes().
void im2col_gemm_nhwc_forward(cublasHandle_t blas, const Im2colGemmNhwc& g, const void* x, const void* w, void* y,
                              void* workspace, cudaStream_t stream);

// The chunk GEMM of `g` through cuBLASLt, with the bias (CUBLASLT_EPILOGUE_BIAS),
// the bias and the relu (RELU_BIAS) or nothing (DEFAULT) in its epilogue, for
// an output whose address (and each chunk's) has at least `align_y` bytes of
// alignment and a bias with `align_bias`. Every chunk is the same GEMM, so
// g.chunk_images must divide the batch.
[[nodiscard]] LtGemmShape im2col_nhwc_lt_shape(const Im2colGemmNhwc& g, cublasLtEpilogue_t epilogue, int align_y,
                                               int align_bias);
// The workspace of the cuBLASLt forward: g's (columns and packed filter, 256-byte aligned), then the plan's.
[[nodiscard]] std::size_t im2col_nhwc_lt_workspace_bytes(const Im2colGemmNhwc& g, const LtPlan& plan);
// y = epilogue(conv(x, w) [+ bias]) with `plan` of `matmul` (made from
// im2col_nhwc_lt_shape(g, ...)); `workspace` holds im2col_nhwc_lt_workspace_bytes.
// Returns cuBLASLt's status of the first chunk's GEMM it refused, else
// CUBLAS_STATUS_SUCCESS: the caller checks it (CB_CHECK_CUBLAS) or falls back.
[[nodiscard]] cublasStatus_t im2col_gemm_nhwc_forward_lt(cublasLtHandle_t lt, const LtMatmul& matmul,
                                                         const LtPlan& plan, const Im2colGemmNhwc& g, const void* x,
                                                         const void* w, void* y, const void* bias, void* workspace,
                                                         cudaStream_t stream);

// y = conv(x, w) (no bias) on `stream`, the handle's stream; `workspace` holds
// forward_workspace_bytes(). Throws Error (CB_CHECK_CUBLAS) on failure.
void im2col_gemm_forward(cublasHandle_t blas, const Im2colGemm& g, const float* x, const float* w, float* y,
                         void* workspace, cudaStream_t stream);

// dw = the weight gradient of conv(x, w) for dy; `workspace` holds weight_gradient_workspace_bytes().
void im2col_gemm_weight_gradient(cublasHandle_t blas, const Im2colGemm& g, const float* x, const float* dy, float* dw,
                                 void* workspace, cudaStream_t stream);

}  // namespace crossbench::cudnn
