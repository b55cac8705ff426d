// Pooling CUDA kernels of the cuDNN engine, where cuDNN's are slow (NHWC).
// (The LRN kernels that shared this file are in kernels_lrn.hpp.)
// All run on the caller's stream and are asynchronous; launch errors are
// checked (kernel_support.cuh's check_launch).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>

#include "engines/cudnn/dtype.hpp"

namespace crossbench::cudnn::kernels {

// Max pooling of packed NHWC tensors (dims N, C, H, W of input and output):
// forward writes y and, per output, the window position of its maximum
// (first maximum, one byte); backward gathers, for every input element, the
// output gradients of the windows whose maximum it was (plus beta * dx).
// cuDNN's NHWC pooling backward is several times slower than this.
struct PoolGeometry {
  int kernel, stride, padding;
};
void max_pool_nhwc_forward(const void* x, void* y, std::uint8_t* argmax, DType type, std::array<std::int64_t, 4> in,
                           std::array<std::int64_t, 4> out, PoolGeometry g, cudaStream_t stream);
void max_pool_nhwc_backward(const void* dy, const std::uint8_t* argmax, void* dx, DType type,
                            std::array<std::int64_t, 4> in, std::array<std::int64_t, 4> out, PoolGeometry g, float beta,
                            cudaStream_t stream);

}  // namespace crossbench::cudnn::kernels
