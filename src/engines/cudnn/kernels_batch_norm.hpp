// Training batch-norm fused with its relu (and the residual add between
// them) over packed NHWC tensors, our own kernels (DESIGN.md "Fusion"): the
// kit's bn_relu and bn_add_relu groups, forward and backward, in one
// implementation for fp32 (and tf32 cells), bf16 and fp16. Unfused, the
// engine runs cuDNN's batch-norm, then the add, then the relu: each a pass
// over the activations, forward and backward (issue 24: the ResNets' training
// gap to torch.compile on the H200).
//
// A packed NHWC tensor is a matrix of M = N*H*W rows by C channels. Every
// kernel gives each thread one 16-byte vector of channels (8 16-bit or 4
// fp32 values) for a chunk of rows, so the per-channel parameters stay in
// registers and loads are coalesced along the channels; blocks tile the
// channels and the rows (chunks). Reductions are deterministic, in fp32,
// without atomics on the values: each block merges its rows in shared memory
// and writes one partial per (chunk, channel); the chunks are merged in a
// fixed order.
// - Forward: narrow tiles (4 vectors: 64 contiguous bytes of a row), one wave
//   of 3 blocks of 256 threads per SM; after writing its partials a block
//   draws a ticket from its channel tile's counter, and the tile's last block
//   merges the tile's chunks (whichever block it is) and finishes the
//   statistics, in the same kernel: two launches.
// - Backward: the first design's grid, wide tiles (up to 32 vectors: 512 bytes
//   of a row per warp), 8 blocks per SM asked for, and a separate merge kernel
//   (one thread per channel and chunk lane): three launches. The forward's grid
//   made the backward slower on an H200 (ResNet-50's backward batch-norms 4.69
//   -> 5.77 ms tf32, 2.98 -> 3.51 bf16) while the forward's got faster (3.71 ->
//   3.48, 2.59 -> 2.15): bench/results/2026-12-02/call10.
//
//   forward   statistics (per thread, sums about its first row's values,
//             converted once to Welford's mean and m2; Chan's merge across
//             threads and chunks) → saved mean and inverse std (biased
//             variance), the running statistics updated as PyTorch does;
//             then one pass y = relu(gamma (x - mean) invstd + beta [+ residual]).
//   backward  g = dy where y > 0 (the mask read from y, or for bn_relu
//             recomputed from x bit for bit as the forward computed it);
//             pass 1 reduces partial sums of g (dbeta) and g xhat (dgamma)
//             and writes g as the residual's gradient; pass 2 merges them;
//             pass 3 writes dx = gamma invstd (g - sum(g)/M - xhat sum(g xhat)/M).
//
// The tickets: batch_norm_tickets(C, type) unsigned counters for the forward,
// zeroed once when allocated and never written by anything else (not the
// session's shared workspace, which cuDNN overwrites between our ops); each
// launch leaves them 0 again (the last block resets its tile's), so CUDA-graph
// replays need no memset. Forwards that may run concurrently need separate
// tickets.
//
// Statistics, scale, shift and the gradients of gamma and beta are fp32 for
// every data type (fp32, bf16, fp16), as cuDNN's batch-norm keeps them.
// All run on the caller's stream and are asynchronous; launches are checked.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "engines/cudnn/dtype.hpp"

namespace crossbench::cudnn::kernels {

// Whether the fused kernels take C channels of `type`: a whole number of
// 16-byte vectors per row (every ResNet batch-norm: 64 to 2048 channels).
[[nodiscard]] bool batch_norm_relu_supported(std::int64_t channels, DType type);

// One pass's launch geometry: blocks tile the channels (tile_vectors 16-byte vectors each) and the rows (chunks).
struct BatchNormPassGrid {
  int tile_vectors = 1;  // channel vectors per block (a power of two)
  int tiles = 1;         // blocks along the channels
  int chunks = 1;        // blocks along the rows
  std::int64_t rows_per_chunk = 0;
};

// The launch geometry of one tensor's kernels (see the header comment): the forward's statistics (the base:
// narrow tiles, one wave of 3 blocks per SM), the forward's apply pass (whole rows per tile, the same wave) and
// the backward's (wide tiles, 8 blocks per SM asked for).
struct BatchNormGrid : BatchNormPassGrid {
  std::int64_t rows = 0;      // M = N*H*W
  std::int64_t channels = 0;  // C
  BatchNormPassGrid apply;
  BatchNormPassGrid backward;
  // [bytes] of scratch the kernels need (the larger of the forward's partials and the backward's partials with
  // two coefficients per channel); it may be shared with other ops between launches (the tickets may not).
  [[nodiscard]] std::size_t workspace_bytes() const;
};
// Each pass: enough blocks to fill `multiprocessors` SMs (forward one wave of 3
// per SM, backward 8 per SM asked for), but at least 4 (forward) or 8
// (backward) rows per thread, so the partials stay a few percent of the tensor.
// The apply pass has no partials: its tiles span whole rows (up to 256 vectors), so that a block reads and
// writes one contiguous range of each tensor.
[[nodiscard]] BatchNormGrid batch_norm_grid(std::int64_t rows, std::int64_t channels, DType type,
                                            int multiprocessors);
// The counters one forward launch of C channels of `type` draws tickets from (one per channel
// tile: batch_norm_grid's tiles; 0 where the type or C is not supported). See the header comment.
[[nodiscard]] std::int64_t batch_norm_tickets(std::int64_t channels, DType type);

struct BatchNormReluForward {
  const void* x = nullptr;         // M x C, `type`
  const void* residual = nullptr;  // M x C, `type`, added before the relu (bn_add_relu), or nullptr
  void* y = nullptr;               // M x C, `type` (not x: the backward reads x)
  DType type = DType::f32;
  const float* gamma = nullptr;  // C each
  const float* beta = nullptr;
  float* running_mean = nullptr;
  float* running_variance = nullptr;
  float* saved_mean = nullptr;
  float* saved_inverse_std = nullptr;
  // running = (1 - factor) running + factor batch (unbiased variance); 0: unchanged (check()).
  float factor = 0;
  float epsilon = 1e-5f;
  unsigned int* tickets = nullptr;  // batch_norm_tickets counters, 0 before the launch (and left 0)
  // engine.conv_statistics: the batch's per-channel sum and sum of squares of x, written by the convolution
  // that wrote x (C floats each): the statistics are finalized from them (mean = S/M, biased variance =
  // Q/M - mean², in fp64 from the fp32 sums; what cuDNN's batch-norm finalize does) instead of our pass over
  // x, and both are left 0 (so a plan that adds into them finds 0 in the next step). Null: our pass.
  float* sum = nullptr;
  float* sum_of_squares = nullptr;
};
void batch_norm_relu_forward(const BatchNormReluForward& args, const BatchNormGrid& grid, void* workspace,
                             cudaStream_t stream);

struct BatchNormReluBackward {
  const void* x = nullptr;   // the forward's input
  const void* y = nullptr;   // the forward's output: the relu's mask; nullptr: recomputed from x (no residual)
  const void* dy = nullptr;  // the gradient of y
  DType type = DType::f32;
  const float* gamma = nullptr;
  const float* beta = nullptr;
  const float* saved_mean = nullptr;
  const float* saved_inverse_std = nullptr;
  float* dgamma = nullptr;  // written (not accumulated), as cuDNN's batch-norm backward does
  float* dbeta = nullptr;
  // The residual's gradient: g + beta * previous (beta 0 writes, 1 accumulates), or nullptr. May be dy
  // (written over it: each element is read before it is written, by the same thread).
  void* dresidual = nullptr;
  float dresidual_beta = 0;
  // The input's gradient, + beta * previous likewise, or nullptr (no input gradient needed).
  void* dx = nullptr;
  float dx_beta = 0;
};
void batch_norm_relu_backward(const BatchNormReluBackward& args, const BatchNormGrid& grid, void* workspace,
                              cudaStream_t stream);

// The reference the search holds a statistics plan's sums to (engine.conv_statistics): the per-channel sum
// and sum of squares of a packed NHWC tensor of `rows` x `channels` (`type`: f32, bf16, f16), in fp64 (each
// block's rows in order, the blocks' totals by atomic adds: not bit-reproducible, which a reference for a
// 1e-3 bound need not be). Written, not accumulated.
void channel_sums(const void* x, DType type, std::int64_t rows, std::int64_t channels, double* sum,
                  double* sum_of_squares, cudaStream_t stream);

}  // namespace crossbench::cudnn::kernels
