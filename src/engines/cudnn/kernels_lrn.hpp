// Local response normalisation across channels (the definition of
// layer_pooling.cpp: y = x * (k + alpha / size * sum of x^2 over the window)^-beta,
// the window of channel c being [c - (size - 1) / 2, c + size / 2] clipped to
// the channels), for NHWC, where cuDNN's LRN is slow, and for bf16, which
// cuDNN's LRN refuses.
//
// Two kernels behind each launcher, chosen per call on the host:
// - packed NHWC with whole 16-byte vectors of channels (C a multiple of 8 in
//   16-bit, of 4 in fp32), 16-byte aligned pointers and size - 1 <= that
//   vector width: one thread per (pixel, vector), reading its own vector and
//   its two neighbours (the backward needs +-(size - 1) channels), fp32 math,
//   32-bit index math (the launcher splits larger tensors into whole pixels);
// - anything else (NCHW, strided views, other channel counts): one warp per
//   pixel with the pixel's channels in shared memory.
// Both compute the same sums in the same order. All run on the caller's stream
// and are asynchronous; launch errors are checked (kernel_support.cuh's check_launch).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>

#include "engines/cudnn/dtype.hpp"

namespace crossbench::cudnn::kernels {

struct LrnParameters {
  int size;
  float alpha, beta, k;
};
void lrn_forward(const void* x, void* y, DType type, std::array<std::int64_t, 4> dims,
                 std::array<std::int64_t, 4> strides, LrnParameters p, cudaStream_t stream);
// dx = dy s^-beta - 2 alpha beta / size * x * sum over windows containing c of dy y / s, plus beta_dx * dx.
void lrn_backward(const void* x, const void* y, const void* dy, void* dx, DType type, std::array<std::int64_t, 4> dims,
                  std::array<std::int64_t, 4> strides, LrnParameters p, float beta_dx, cudaStream_t stream);

// Whether lrn_forward and lrn_backward take the vectorised NHWC kernels for
// these tensors (pointers 16-byte aligned): the tests' check of which path ran.
bool lrn_vectorized(DType type, std::array<std::int64_t, 4> dims, std::array<std::int64_t, 4> strides, int size);

}  // namespace crossbench::cudnn::kernels
