#include "engines/cudnn/gemm_weight_gradient.hpp"

#include "core/cuda/cudnn_check.hpp"
#include "engines/cudnn/tensor.hpp"

namespace crossbench::cudnn {

// Column-major, as cuBLAS sees the row-major NHWC buffers: X is Cin x R
// (ld = x_row_stride), dY is Cout x R (ld = dy_row_stride), and
// C = X * dY^T is Cin x Cout with ld = Cin: exactly dW row-major Cout x Cin.
void gemm_weight_gradient(cublasHandle_t blas, const GemmWeightGradient& g, const void* x, const void* dy, void* dw) {
  const float one = 1.0f, zero = 0.0f;
  CB_CHECK_CUBLAS(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(g.in_channels),
                               static_cast<int>(g.out_channels), static_cast<int>(g.rows), &one, x, cuda_type(g.type),
                               static_cast<int>(g.x_row_stride), dy, cuda_type(g.type),
                               static_cast<int>(g.dy_row_stride), &zero, dw, cuda_type(g.type),
                               static_cast<int>(g.in_channels), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace crossbench::cudnn
