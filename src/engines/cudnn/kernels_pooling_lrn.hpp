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
// (first maximum, one byte); backward gives every input element the output
// gradients of the windows whose maximum it was (plus beta * dx): written
// straight per window where windows do not overlap (kernel == stride, no
// padding), else gathered per input. cuDNN's NHWC pooling backward is several
// times slower than this.
//
// relu_mask (training, the kit's conv_bias_relu_pool group): x is a relu's
// output (>= 0), and where a window's maximum is not > 0 (where the relu's
// derivative is 0) the argmax byte is kPoolNoPosition, which no window
// position equals: the backward then writes the relu's input gradient, the
// relu's backward folded in at no extra memory traffic.
struct PoolGeometry {
  int kernel, stride, padding;
};
inline constexpr std::uint8_t kPoolNoPosition = 0xFF;
// Windows of kernel * kernel < 255 positions (the argmax byte; 0xFF is kPoolNoPosition).
inline constexpr bool pool_kernel_supported(int kernel) { return kernel >= 1 && kernel * kernel < kPoolNoPosition; }
// Whether every input position belongs to at most one window (the backward's scatter path).
inline constexpr bool pool_windows_disjoint(PoolGeometry g) { return g.kernel == g.stride && g.padding == 0; }
// Offsets: 32-bit where every tensor has fewer than 2^31 elements (automatic), or 64-bit always (tests).
enum class PoolIndex { automatic, wide };
void max_pool_nhwc_forward(const void* x, void* y, std::uint8_t* argmax, DType type, std::array<std::int64_t, 4> in,
                           std::array<std::int64_t, 4> out, PoolGeometry g, cudaStream_t stream,
                           bool relu_mask = false, PoolIndex index = PoolIndex::automatic);
void max_pool_nhwc_backward(const void* dy, const std::uint8_t* argmax, void* dx, DType type,
                            std::array<std::int64_t, 4> in, std::array<std::int64_t, 4> out, PoolGeometry g, float beta,
                            cudaStream_t stream, PoolIndex index = PoolIndex::automatic);

}  // namespace crossbench::cudnn::kernels
