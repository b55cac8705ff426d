// The CUDA kernels of convolution as explicit GEMMs (im2col_gemm.hpp): im2col,
// row padding and the sum of the weight-gradient partials.
// All run on the caller's stream and are asynchronous; launch errors are
// checked (kernel_support.cuh's check_launch).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>

#include "engines/cudnn/dtype.hpp"

namespace crossbench::cudnn::kernels {

// A square convolution window and its output size.
struct ConvolutionGeometry {
  int kernel, stride, padding;
  std::int64_t out_h, out_w;
};
// im2col of an fp32 NCHW tensor for convolution as explicit GEMMs
// (im2col_gemm.hpp): a matrix of rows of P*Q output positions, one row per
// (image n, filter tap crs = (c, r, s)) in that order, holding
// x[n, c, p*stride - pad + r, q*stride - pad + s] (0 outside the image), each
// image's rows followed by zero rows up to `padded_taps` (>= C*R*S): each
// image's padded_taps x PQ block is contiguous. x: dims (N, C, H, W) with
// element strides `x_strides` (W's stride 1).
void im2col(const float* x, std::array<std::int64_t, 4> dims, std::array<std::int64_t, 4> x_strides,
            ConvolutionGeometry g, std::int64_t padded_taps, float* columns, cudaStream_t stream);

// im2col of an NHWC tensor (any element type: the values are copied, not
// converted) for convolution as one GEMM over output positions
// (im2col_gemm.hpp's Im2colGemmNhwc): row (n - first_image) * P*Q + p*Q + q of
// `columns` holds, at (r*S + s)*C + c, x[n, p*stride - pad + r, q*stride - pad
// + s, c] (0 outside the image) for c < `channels` (the real channels; x may
// store more, zero-padded), then zeros up to `padded_taps` (a multiple of
// 16 / element bytes: rows of 16-byte vectors). x: dims (N, C_stored, H, W),
// element strides (image, 1, row, pixel). Images [first_image, first_image +
// images).
void im2col_nhwc(const void* x, std::int64_t element_bytes, std::array<std::int64_t, 4> dims,
                 std::array<std::int64_t, 4> x_strides, std::int64_t channels, ConvolutionGeometry g,
                 std::int64_t first_image, std::int64_t images, std::int64_t padded_taps, void* columns,
                 cudaStream_t stream);

// The NHWC filter w (K x R x S x C_stored, packed) as a K x padded_taps
// matrix for im2col_nhwc's columns: row k holds w[k, r, s, c] at (r*S + s)*C +
// c for c < `channels`, then zeros.
void pack_filter_taps(const void* w, std::int64_t element_bytes, std::int64_t filters, std::int64_t window_taps,
                      std::int64_t stored_channels, std::int64_t channels, std::int64_t padded_taps, void* packed,
                      cudaStream_t stream);

// dst (rows x padded_length) = src (rows x length), zero-padded on the right.
void pad_rows(const float* src, std::int64_t rows, std::int64_t length, std::int64_t padded_length, float* dst,
              cudaStream_t stream);

// dst (rows x length, packed) = the sum of `matrices` consecutive rows x
// padded_length matrices (their first `length` columns), summed in order.
void sum_padded_matrices(const float* partials, std::int64_t matrices, std::int64_t rows, std::int64_t length,
                         std::int64_t padded_length, float* dst, cudaStream_t stream);

}  // namespace crossbench::cudnn::kernels
