// Pooling and LRN CUDA kernels of the cuDNN engine, where cuDNN's are slow
// (NHWC) or refuse a type (bf16 LRN).
// All run on the caller's stream and are asynchronous; launch errors are
// checked (kernel_support.cuh's check_launch).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>

#include "engines/cudnn/dtype.hpp"

namespace crossbench::cudnn::kernels {

// Local response normalisation across channels (the definition of layer_pooling.cpp),
// one warp per pixel with the pixel's channels in shared memory: coalesced in
// NHWC, where cuDNN's LRN is slow, and for bf16, which cuDNN's LRN refuses.
struct LrnParameters {
  int size;
  float alpha, beta, k;
};
void lrn_forward(const void* x, void* y, DType type, std::array<std::int64_t, 4> dims,
                 std::array<std::int64_t, 4> strides, LrnParameters p, cudaStream_t stream);
// dx = dy s^-beta - 2 alpha beta / size * x * sum over windows containing c of dy y / s, plus beta_dx * dx.
void lrn_backward(const void* x, const void* y, const void* dy, void* dx, DType type, std::array<std::int64_t, 4> dims,
                  std::array<std::int64_t, 4> strides, LrnParameters p, float beta_dx, cudaStream_t stream);

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
