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

// dst (rows x padded_length) = src (rows x length), zero-padded on the right.
void pad_rows(const float* src, std::int64_t rows, std::int64_t length, std::int64_t padded_length, float* dst,
              cudaStream_t stream);

// dst (rows x length, packed) = the sum of `matrices` consecutive rows x
// padded_length matrices (their first `length` columns), summed in order.
void sum_padded_matrices(const float* partials, std::int64_t matrices, std::int64_t rows, std::int64_t length,
                         std::int64_t padded_length, float* dst, cudaStream_t stream);

}  // namespace crossbench::cudnn::kernels
