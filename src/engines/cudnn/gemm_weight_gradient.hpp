// The weight gradient of a 1x1, stride-1, unpadded convolution in NHWC as one
// cuBLAS GEMM (layer_convolution.cpp offers it to the measured search): with
// the R = N*H*W pixels as rows, dW (Cout x Cin, row-major: the NHWC filter) =
// dY^T X, computed with CUBLAS_COMPUTE_32F (on the session's handle, which
// allows cuBLAS's reduced-precision split-K reductions for 16-bit outputs, as
// PyTorch's default does).
#pragma once

#include <cublas_v2.h>

#include <cstdint>

#include "engines/cudnn/dtype.hpp"

namespace crossbench::cudnn {

struct GemmWeightGradient {
  DType type;                   // of x, dy and dw
  std::int64_t rows;            // N * H * W
  std::int64_t in_channels;     // Cin
  std::int64_t out_channels;    // Cout
  std::int64_t x_row_stride;    // elements between pixels of x (>= Cin: a channel slice may be wider)
  std::int64_t dy_row_stride;   // elements between pixels of dy (>= Cout)
};

// dw = dy^T x on the handle's stream; throws Error (CB_CHECK_CUBLAS) on failure.
void gemm_weight_gradient(cublasHandle_t blas, const GemmWeightGradient& g, const void* x, const void* dy, void* dw);

}  // namespace crossbench::cudnn
