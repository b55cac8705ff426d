// kernels_batch_norm.hpp: the kernels and their launchers.
#include "engines/cudnn/kernels_batch_norm.hpp"

#include "core/cuda/cuda_check.hpp"
#include "engines/cudnn/kernel_support.cuh"

namespace crossbench::cudnn::kernels {
namespace {

constexpr int kBlock = 256;          // threads per block of the passes over the tensor
// Channel vectors per block (16-byte vectors: 64 contiguous bytes of a row, two whole 32-byte sectors). Narrow
// tiles make a block cover many rows (64 per step) of few channels, so the partials are few (one pair per
// 64 x rows-per-thread elements) and each tile's last block merges only its own 16 or 32 channels.
constexpr int kMaxTileVectors = 4;
// Blocks per SM, and the grid one full wave of them: the passes are held to 80 registers per thread
// (__launch_bounds__) so that 3 blocks of 256 threads are resident on every SM (768 threads: with kUnroll
// loads per tensor in flight, 48 to 96 KB per SM). At 8 the grid asked for a wave that the passes' 80 to 128
// registers could not hold: it ran as 2.6 to 4 waves of 2 to 5 blocks per SM. At 4 (64 registers) they spill.
constexpr int kBlocksPerSm = 3;
// Rows per thread at least: one unrolled round of loads (kUnroll). A small tensor (ResNet's layers 3 and 4) then
// spreads over up to a wave of blocks, each thread with a single round of loads in flight (latency-bound); the
// partials stay 1/(64 x 4) of the elements (a 64-row block step): under 2% of the bytes of a 16-bit tensor.
constexpr int kMinRowsPerThread = 4;
constexpr int kUnroll = 4;            // 16-byte loads per tensor a thread has in flight
constexpr int kMergeAhead = 8;        // partials a thread of a tile's last block loads before merging them

// The backward keeps the first design's grid and its separate merge kernel: wide tiles (up to 32 vectors, 512
// contiguous bytes of a row per warp), 8 blocks per SM asked for, at least 8 rows per thread, no register cap.
// The forward's grid (above) made it slower: on an H200 ResNet-50's backward batch-norms took 4.69 -> 5.77 ms
// (tf32) and 2.98 -> 3.51 ms (bf16) with narrow tiles, 3 blocks per SM and 80 registers, while the forward's
// took 3.71 -> 3.48 and 2.59 -> 2.15 (bench/results/2026-12-02/call10, same GPU, same call).
constexpr int kBackwardMaxTileVectors = 32;
// The forward's apply pass reduces nothing, so its tiles need not be narrow: a tile spans a whole row (up to a
// block's 256 vectors) and a block's chunk is one contiguous range of x, the residual and y. With the
// statistics' narrow tiles (4 vectors, 64 bytes of every row) each row's 512 bytes (C = 256, bf16) were read by
// 8 blocks at unrelated times: on an H200, ResNet-50 bf16 at batch 256, the bn_add_relu forward moved 2.7 TB/s
// and bn_relu's 3.0-3.5 against the backward's 3.9 (bench/results/2026-12-03/call37).
constexpr int kApplyMaxTileVectors = kBlock;
constexpr int kBackwardBlocksPerSm = 8;
constexpr int kBackwardMinRowsPerThread = 8;
constexpr int kFinalChannels = 32;  // the backward's merge kernel: channels per block (one 128-byte row of partials)
constexpr int kFinalLanes = 16;     // ... and threads over the chunks per channel

template <typename T>
constexpr int kVector = 16 / static_cast<int>(sizeof(T));  // elements per 16-byte load

// What every pass needs of the grid, on the device.
struct Geometry {
  std::int64_t rows;
  std::int64_t channels;
  std::int64_t vectors_per_row;  // channels / kVector
  std::int64_t rows_per_chunk;
  int tile_vectors;              // a power of two: threads along the channels
  int chunks;
};

Geometry geometry_of(const BatchNormGrid& grid, const BatchNormPassGrid& pass, int vector) {
  return {grid.rows, grid.channels, grid.channels / vector, pass.rows_per_chunk, pass.tile_vectors, pass.chunks};
}

// A thread's place: one channel vector of its block's tile, rows
// row_begin, row_begin + row_step, ... below row_end (its block's chunk).
struct Lane {
  std::int64_t vector;
  bool active;  // the last tile may reach past the row
  int row_lane, row_step;
  std::int64_t row_begin, row_end;
};

__device__ __forceinline__ Lane lane_of(const Geometry& g) {
  Lane l;
  l.vector = static_cast<std::int64_t>(blockIdx.x) * g.tile_vectors + threadIdx.x % g.tile_vectors;
  l.active = l.vector < g.vectors_per_row;
  l.row_lane = static_cast<int>(threadIdx.x) / g.tile_vectors;
  l.row_step = static_cast<int>(blockDim.x) / g.tile_vectors;
  const std::int64_t chunk_begin = static_cast<std::int64_t>(blockIdx.y) * g.rows_per_chunk;
  l.row_begin = chunk_begin + l.row_lane;
  l.row_end = min(g.rows, chunk_begin + g.rows_per_chunk);
  return l;
}

template <typename T>
__device__ __forceinline__ uint4 load_vector(const T* tensor, const Geometry& g, std::int64_t row, std::int64_t vector) {
  return reinterpret_cast<const uint4*>(tensor)[row * g.vectors_per_row + vector];
}

template <typename T>
__device__ __forceinline__ void store_vector(T* tensor, const Geometry& g, std::int64_t row, std::int64_t vector,
                                             uint4 value) {
  reinterpret_cast<uint4*>(tensor)[row * g.vectors_per_row + vector] = value;
}

template <typename T>
__device__ __forceinline__ float element(const uint4& raw, int j) {
  return to_float(reinterpret_cast<const T*>(&raw)[j]);
}

template <typename T>
__device__ __forceinline__ void set_element(uint4& raw, int j, float value) {
  reinterpret_cast<T*>(&raw)[j] = from_float<T>(value);
}

// The forward's arithmetic, written once for the forward and for the
// backward's recomputed mask, with explicitly rounded intrinsics so that
// nvcc cannot contract them differently in the two kernels: the mask is the
// forward's y > 0 bit for bit.
__device__ __forceinline__ float scale_of(float gamma, float inverse_std) { return __fmul_rn(gamma, inverse_std); }
__device__ __forceinline__ float pre_activation(float x, float mean, float scale, float beta) {
  return __fmaf_rn(__fsub_rn(x, mean), scale, beta);
}
// relu keeping NaN, as the engine's relu kernels (a NaN compares false).
__device__ __forceinline__ float relu_of(float v) { return v < 0.0f ? 0.0f : v; }
// Whether the stored relu output of pre-activation v is > 0 (what the unfused relu's backward tests).
template <typename T>
__device__ __forceinline__ bool stored_positive(float v) {
  return to_float(from_float<T>(v)) > 0.0f;
}

// ---- Reductions over the rows ---------------------------------------------------

// Mean and sum of squared deviations of `count` values (Welford; Chan et al.'s merge).
// Aggregates without initialisers (they live in shared memory too): zeroed with {}.
struct Moments {
  float mean, m2, count;
  __device__ __forceinline__ void merge(const Moments& b) {
    if (b.count == 0) return;
    const float n = count + b.count;
    const float delta = b.mean - mean;
    const float weight = b.count / n;
    mean = fmaf(delta, weight, mean);
    m2 = m2 + b.m2 + delta * delta * count * weight;
    count = n;
  }
};

// sum(g) and sum(g xhat) of the backward.
struct Sums {
  float g, gx;
  __device__ __forceinline__ void merge(const Sums& b) {
    g += b.g;
    gx += b.gx;
  }
};

// A block's values of one kind, [element j][thread] (conflict-free), merged over its row lanes.
template <int kV>
struct RowLaneMerge {
  float a[kV * kBlock];
  float b[kV * kBlock];
  float count[kBlock];
};

// Merges the block's row lanes (a fixed tree: deterministic); row lane 0 ends with the block's total.
template <int kV>
__device__ __forceinline__ void merge_row_lanes(Moments (&m)[kV], const Lane& l, int tile_vectors,
                                                RowLaneMerge<kV>& shared) {
  const int t = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int j = 0; j < kV; ++j) {
    shared.a[j * kBlock + t] = m[j].mean;
    shared.b[j * kBlock + t] = m[j].m2;
  }
  shared.count[t] = m[0].count;
  for (int half = l.row_step / 2; half > 0; half /= 2) {
    __syncthreads();
    if (l.row_lane < half) {
      const int other = t + half * tile_vectors;
#pragma unroll
      for (int j = 0; j < kV; ++j) {
        m[j].merge({shared.a[j * kBlock + other], shared.b[j * kBlock + other], shared.count[other]});
        shared.a[j * kBlock + t] = m[j].mean;
        shared.b[j * kBlock + t] = m[j].m2;
      }
      shared.count[t] = m[0].count;
    }
  }
}

template <int kV>
__device__ __forceinline__ void merge_row_lanes(Sums (&s)[kV], const Lane& l, int tile_vectors,
                                                RowLaneMerge<kV>& shared) {
  const int t = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int j = 0; j < kV; ++j) {
    shared.a[j * kBlock + t] = s[j].g;
    shared.b[j * kBlock + t] = s[j].gx;
  }
  for (int half = l.row_step / 2; half > 0; half /= 2) {
    __syncthreads();
    if (l.row_lane < half) {
      const int other = t + half * tile_vectors;
#pragma unroll
      for (int j = 0; j < kV; ++j) {
        s[j].merge({shared.a[j * kBlock + other], shared.b[j * kBlock + other]});
        shared.a[j * kBlock + t] = s[j].g;
        shared.b[j * kBlock + t] = s[j].gx;
      }
    }
  }
}

// ---- The last block of a channel tile merges the chunks ---------------------------------

// Whether this block is the last of its channel tile (blockIdx.x) to finish.
// Every block writes its partials, fences them and draws a ticket; the one
// that draws the last ticket sees every partial of its tile. It sets the
// counter back to 0 (every block of the tile has drawn by then), so the next
// launch or CUDA-graph replay starts from 0 without a memset. All threads of
// the block call it.
__device__ __forceinline__ bool last_of_tile(unsigned* tickets, int chunks) {
  __shared__ bool last;
  __threadfence();  // this thread's partials, device-wide, before the block's ticket
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned ticket = atomicAdd(&tickets[blockIdx.x], 1u);
    last = ticket == static_cast<unsigned>(chunks - 1);
    if (last) tickets[blockIdx.x] = 0;
  }
  __syncthreads();
  if (last) __threadfence();  // the other blocks' partials, after their tickets
  return last;
}

// A partial written by another block of this launch: a volatile load, never served from a stale L1 line
// (ld.volatile; __ldcg's float overload is not declared for every architecture the old toolkits build).
__device__ __forceinline__ float partial_at(const float* partials, const Geometry& g, int chunk, std::int64_t c) {
  return *static_cast<const volatile float*>(partials + chunk * g.channels + c);
}

// The last block's merge of its tile's partials: thread t takes channel
// t % tile_channels of the tile and chunks t / tile_channels, + lanes, ... in
// order, then a fixed tree over the lanes, so the result does not depend on
// which block was last (deterministic). Lane 0 (t < tile_channels) returns
// the channel's total.
template <typename Accumulator, typename Load>
__device__ __forceinline__ Accumulator merge_chunks(const Geometry& g, int tile_channels, std::int64_t channel,
                                                    Load load) {
  __shared__ Accumulator shared[kBlock];
  const int t = static_cast<int>(threadIdx.x);
  const int lanes = kBlock / tile_channels;
  const int lane = t / tile_channels;
  Accumulator total{};
  if (channel < g.channels)
    // kMergeAhead loads in flight before the merges, in the same order: one L2 latency per kMergeAhead chunks,
    // not per chunk (only the last block's merge is left on the critical path once the rest of the grid is done).
    for (int k = lane; k < g.chunks; k += kMergeAhead * lanes) {
      Accumulator loaded[kMergeAhead];
#pragma unroll
      for (int u = 0; u < kMergeAhead; ++u)
        if (k + u * lanes < g.chunks) loaded[u] = load(k + u * lanes);
#pragma unroll
      for (int u = 0; u < kMergeAhead; ++u)
        if (k + u * lanes < g.chunks) total.merge(loaded[u]);
    }
  shared[t] = total;
  for (int half = lanes / 2; half > 0; half /= 2) {
    __syncthreads();
    if (lane < half) {
      total.merge(shared[t + half * tile_channels]);
      shared[t] = total;
    }
  }
  return total;
}

// The channel the last block's thread merges (merge_chunks), of its tile of tile_channels.
__device__ __forceinline__ std::int64_t merged_channel(int tile_channels) {
  return static_cast<std::int64_t>(blockIdx.x) * tile_channels + threadIdx.x % tile_channels;
}

// ---- Forward ------------------------------------------------------------------------

// A thread's moments of its rows. Sums of d = x - K and d^2 about its first
// row's values K, no division per row (Welford's costs one per row); K lies
// within the data's spread, so s2 - s1^2/n cancels little (an fp32 rounding of
// x's offset, as Welford's). Converted to (mean, m2, count) once, for Chan's
// merges across threads and chunks.
template <typename T, int kV>
__device__ __forceinline__ void thread_moments(const T* x, const Geometry& g, const Lane& l, Moments (&m)[kV]) {
  if (!l.active || l.row_begin >= l.row_end) return;  // no rows: count 0
  const uint4 first = load_vector(x, g, l.row_begin, l.vector);
  float shift[kV], s1[kV], s2[kV];
#pragma unroll
  for (int j = 0; j < kV; ++j) {
    shift[j] = element<T>(first, j);
    s1[j] = 0.0f;
    s2[j] = 0.0f;
  }
  for (std::int64_t r = l.row_begin; r < l.row_end; r += kUnroll * l.row_step) {
    uint4 xs[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (r + u * l.row_step < l.row_end) xs[u] = load_vector(x, g, r + u * l.row_step, l.vector);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (r + u * l.row_step >= l.row_end) break;
#pragma unroll
      for (int j = 0; j < kV; ++j) {
        const float d = element<T>(xs[u], j) - shift[j];
        s1[j] += d;
        s2[j] = fmaf(d, d, s2[j]);
      }
    }
  }
  const float count = static_cast<float>((l.row_end - l.row_begin + l.row_step - 1) / l.row_step);
  const float inverse = 1.0f / count;
#pragma unroll
  for (int j = 0; j < kV; ++j) {
    const float mean_shift = s1[j] * inverse;
    m[j] = {shift[j] + mean_shift, fmaxf(0.0f, fmaf(-mean_shift, s1[j], s2[j])), count};
  }
}

// The batch statistics of channel c from its merged moments: saved mean and
// inverse std (biased variance, as the normalisation uses); the running
// statistics (unbiased variance).
__device__ __forceinline__ void finish_statistics(const BatchNormReluForward& a, const Geometry& g, std::int64_t c,
                                                  const Moments& m) {
  const float rows = static_cast<float>(g.rows);
  const float variance = m.m2 / rows;
  a.saved_mean[c] = m.mean;
  a.saved_inverse_std[c] = 1.0f / sqrtf(variance + a.epsilon);
  if (a.factor == 0.0f) return;  // check(): the model is left as it is
  const float unbiased = g.rows > 1 ? m.m2 / (rows - 1.0f) : variance;
  a.running_mean[c] = (1.0f - a.factor) * a.running_mean[c] + a.factor * m.mean;
  a.running_variance[c] = (1.0f - a.factor) * a.running_variance[c] + a.factor * unbiased;
}

// Pass 1: each block's (chunk, channel) moments into partial_mean and
// partial_m2 ([chunk][channel]; the chunk's count is known from the
// geometry); the last block of each channel tile merges the tile's chunks
// into the batch statistics (finish_statistics).
template <typename T>
__global__ void __launch_bounds__(kBlock, kBlocksPerSm)
    statistics_kernel(BatchNormReluForward a, Geometry g, float* partial_mean, float* partial_m2, unsigned* tickets) {
  constexpr int kV = kVector<T>;
  __shared__ RowLaneMerge<kV> shared;
  const Lane l = lane_of(g);
  Moments m[kV] = {};
  thread_moments(static_cast<const T*>(a.x), g, l, m);
  merge_row_lanes(m, l, g.tile_vectors, shared);
  if (l.row_lane == 0 && l.active) {
    const std::int64_t first = static_cast<std::int64_t>(blockIdx.y) * g.channels + l.vector * kV;
#pragma unroll
    for (int j = 0; j < kV; ++j) {
      partial_mean[first + j] = m[j].mean;
      partial_m2[first + j] = m[j].m2;
    }
  }
  if (!last_of_tile(tickets, g.chunks)) return;
  const int tile_channels = g.tile_vectors * kV;
  const std::int64_t c = merged_channel(tile_channels);
  const Moments total = merge_chunks<Moments>(g, tile_channels, c, [&](int k) {
    const std::int64_t rows = min(g.rows_per_chunk, g.rows - k * g.rows_per_chunk);
    return Moments{partial_at(partial_mean, g, k, c), partial_at(partial_m2, g, k, c), static_cast<float>(rows)};
  });
  if (static_cast<int>(threadIdx.x) < tile_channels && c < g.channels) finish_statistics(a, g, c, total);
}

// engine.conv_statistics: pass 1 replaced by the convolution's sums, one thread per channel: the moments
// from Σx and Σx² (fp64 arithmetic on the fp32 sums), finished as pass 1 finishes them; the sums zeroed.
__global__ void statistics_from_sums_kernel(BatchNormReluForward a, Geometry g) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= g.channels) return;
  const double rows = static_cast<double>(g.rows);
  const double mean = static_cast<double>(a.sum[c]) / rows;
  const double variance = fmax(0.0, static_cast<double>(a.sum_of_squares[c]) / rows - mean * mean);
  a.sum[c] = 0.0f;
  a.sum_of_squares[c] = 0.0f;
  finish_statistics(a, g, c, Moments{static_cast<float>(mean), static_cast<float>(variance * rows),
                                     static_cast<float>(rows)});
}

// Pass 2: y = relu(gamma (x - mean) invstd + beta [+ residual]).
template <typename T, bool kResidual>
__global__ void __launch_bounds__(kBlock, kBlocksPerSm) apply_kernel(const T* x, const T* residual, T* y, Geometry g,
                                                       BatchNormReluForward a) {
  constexpr int kV = kVector<T>;
  const Lane l = lane_of(g);
  if (!l.active) return;
  float mean[kV], scale[kV], beta[kV];
#pragma unroll
  for (int j = 0; j < kV; ++j) {
    const std::int64_t c = l.vector * kV + j;
    mean[j] = a.saved_mean[c];
    scale[j] = scale_of(a.gamma[c], a.saved_inverse_std[c]);
    beta[j] = a.beta[c];
  }
  for (std::int64_t r = l.row_begin; r < l.row_end; r += kUnroll * l.row_step) {
    uint4 xs[kUnroll], rs[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (r + u * l.row_step < l.row_end) {
        xs[u] = load_vector(x, g, r + u * l.row_step, l.vector);
        if constexpr (kResidual) rs[u] = load_vector(residual, g, r + u * l.row_step, l.vector);
      }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (r + u * l.row_step >= l.row_end) break;
      uint4 out;
#pragma unroll
      for (int j = 0; j < kV; ++j) {
        float v = pre_activation(element<T>(xs[u], j), mean[j], scale[j], beta[j]);
        if constexpr (kResidual) v = __fadd_rn(v, element<T>(rs[u], j));
        set_element<T>(out, j, relu_of(v));
      }
      store_vector(y, g, r + u * l.row_step, l.vector, out);
    }
  }
}

// channel_sums: blocks of 32 channels x 8 row lanes; each thread sums its channel over its rows (fp64), the
// block's lanes merge in shared memory, and lane 0 adds the block's totals to the outputs.
constexpr int kSumChannels = 32;
constexpr int kSumLanes = 8;

// fp64 atomic add: the hardware's from sm_60 on; a compare-and-swap loop for the older targets the old
// toolkits' builds still compile for (scripts/check-cuda-toolkits: sm_35, sm_50).
__device__ __forceinline__ void add_to(double* at, double value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 600
  auto* word = reinterpret_cast<unsigned long long*>(at);
  unsigned long long seen = *word, assumed = 0;
  do {
    assumed = seen;
    seen = atomicCAS(word, assumed,
                     static_cast<unsigned long long>(__double_as_longlong(__longlong_as_double(static_cast<long long>(assumed)) + value)));
  } while (assumed != seen);
#else
  atomicAdd(at, value);
#endif
}

template <typename T>
__global__ void channel_sums_kernel(const T* x, std::int64_t rows, std::int64_t channels, double* sum,
                                    double* sum_of_squares) {
  __shared__ double shared_sum[kSumLanes][kSumChannels], shared_squares[kSumLanes][kSumChannels];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kSumChannels + threadIdx.x;
  double s = 0, q = 0;
  if (c < channels)
    for (std::int64_t r = static_cast<std::int64_t>(blockIdx.y) * kSumLanes + threadIdx.y; r < rows;
         r += static_cast<std::int64_t>(gridDim.y) * kSumLanes) {
      const double v = to_float(x[r * channels + c]);
      s += v;
      q += v * v;
    }
  shared_sum[threadIdx.y][threadIdx.x] = s;
  shared_squares[threadIdx.y][threadIdx.x] = q;
  __syncthreads();
  if (threadIdx.y != 0 || c >= channels) return;
  for (int lane = 1; lane < kSumLanes; ++lane) {
    s += shared_sum[lane][threadIdx.x];
    q += shared_squares[lane][threadIdx.x];
  }
  add_to(sum + c, s);
  add_to(sum_of_squares + c, q);
}

template <typename T>
void channel_sums_typed(const void* x, std::int64_t rows, std::int64_t channels, double* sum, double* sum_of_squares,
                        cudaStream_t stream) {
  const auto tiles = static_cast<unsigned>((channels + kSumChannels - 1) / kSumChannels);
  const auto row_blocks = static_cast<unsigned>(std::min<std::int64_t>(1024, (rows + 255) / 256));
  channel_sums_kernel<T><<<dim3(tiles, std::max(1u, row_blocks)), dim3(kSumChannels, kSumLanes), 0, stream>>>(
      static_cast<const T*>(x), rows, channels, sum, sum_of_squares);
  check_launch("per-channel sums (the statistics plan's reference)");
}

// ---- Backward -----------------------------------------------------------------------

// Where the relu's mask comes from: the forward's input recomputed (bn_relu:
// no residual), or its stored output y.
enum class Mask { from_x, from_y };

// A thread's per-channel constants of the backward.
template <int kV>
struct ChannelConstants {
  float mean[kV], inverse_std[kV], scale[kV], beta[kV];
  __device__ __forceinline__ void load(const BatchNormReluBackward& a, std::int64_t vector) {
#pragma unroll
    for (int j = 0; j < kV; ++j) {
      const std::int64_t c = vector * kV + j;
      mean[j] = a.saved_mean[c];
      inverse_std[j] = a.saved_inverse_std[c];
      scale[j] = scale_of(a.gamma[c], inverse_std[j]);
      beta[j] = a.beta[c];
    }
  }
};

// g = dy where the forward's relu output is > 0, else 0.
template <typename T, Mask kMask, int kV>
__device__ __forceinline__ float masked(const ChannelConstants<kV>& k, int j, float dy, float x, const uint4& y) {
  bool keep;
  if constexpr (kMask == Mask::from_x)
    keep = stored_positive<T>(relu_of(pre_activation(x, k.mean[j], k.scale[j], k.beta[j])));
  else
    keep = element<T>(y, j) > 0.0f;
  return keep ? dy : 0.0f;
}

// The channel's sums merged: dbeta = sum(g), dgamma = sum(g xhat), and the
// data gradient's per-channel coefficients: mean_g = sum(g) / M,
// slope = sum(g xhat) / M * invstd.
__device__ __forceinline__ void finish_sums(const BatchNormReluBackward& a, const Geometry& g, std::int64_t c,
                                            const Sums& s, float* mean_g, float* slope) {
  a.dbeta[c] = s.g;
  a.dgamma[c] = s.gx;
  const float rows = static_cast<float>(g.rows);
  mean_g[c] = s.g / rows;
  slope[c] = s.gx / rows * a.saved_inverse_std[c];
}

// Pass 1: partial sums of g and g xhat per (chunk, channel); g written as the
// residual's gradient (bn_add_relu), + beta times what is there.
template <typename T, Mask kMask, bool kResidualGradient>
__global__ void __launch_bounds__(kBlock)
    backward_reduce_kernel(BatchNormReluBackward a, Geometry g, float* partial_g, float* partial_gx) {
  constexpr int kV = kVector<T>;
  __shared__ RowLaneMerge<kV> shared;
  const Lane l = lane_of(g);
  const T* x = static_cast<const T*>(a.x);
  const T* y = static_cast<const T*>(a.y);
  const T* dy = static_cast<const T*>(a.dy);
  T* dresidual = static_cast<T*>(a.dresidual);
  Sums s[kV] = {};
  if (l.active) {
    ChannelConstants<kV> k;
    k.load(a, l.vector);
    for (std::int64_t r = l.row_begin; r < l.row_end; r += kUnroll * l.row_step) {
      uint4 xs[kUnroll], ys[kUnroll], dys[kUnroll], previous[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const std::int64_t row = r + u * l.row_step;
        if (row >= l.row_end) continue;
        xs[u] = load_vector(x, g, row, l.vector);
        dys[u] = load_vector(dy, g, row, l.vector);
        if constexpr (kMask == Mask::from_y) ys[u] = load_vector(y, g, row, l.vector);
        if constexpr (kResidualGradient)
          if (a.dresidual_beta != 0.0f) previous[u] = load_vector(dresidual, g, row, l.vector);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const std::int64_t row = r + u * l.row_step;
        if (row >= l.row_end) break;
        uint4 out;
#pragma unroll
        for (int j = 0; j < kV; ++j) {
          const float xv = element<T>(xs[u], j);
          const float gv = masked<T, kMask>(k, j, element<T>(dys[u], j), xv, ys[u]);
          const float xhat = (xv - k.mean[j]) * k.inverse_std[j];
          s[j].g += gv;
          s[j].gx = fmaf(gv, xhat, s[j].gx);
          if constexpr (kResidualGradient)
            set_element<T>(out, j, a.dresidual_beta != 0.0f ? gv + a.dresidual_beta * element<T>(previous[u], j) : gv);
        }
        if constexpr (kResidualGradient) store_vector(dresidual, g, row, l.vector, out);
      }
    }
  }
  merge_row_lanes(s, l, g.tile_vectors, shared);
  if (l.row_lane == 0 && l.active) {
    const std::int64_t first = static_cast<std::int64_t>(blockIdx.y) * g.channels + l.vector * kV;
#pragma unroll
    for (int j = 0; j < kV; ++j) {
      partial_g[first + j] = s[j].g;
      partial_gx[first + j] = s[j].gx;
    }
  }
}

// Pass 2 (one warp row per kFinalChannels channels, kFinalLanes rows of threads over the chunks, in order, then
// a fixed tree: deterministic): the chunks' sums merged, finish_sums.
__global__ void __launch_bounds__(kFinalChannels* kFinalLanes)
    backward_final_kernel(const float* partial_g, const float* partial_gx, Geometry g, BatchNormReluBackward a,
                          float* mean_g, float* slope) {
  __shared__ Sums shared[kFinalLanes][kFinalChannels];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kFinalChannels + threadIdx.x;
  Sums total{};
  if (c < g.channels)
    for (int k = static_cast<int>(threadIdx.y); k < g.chunks; k += kFinalLanes)
      total.merge({partial_g[k * g.channels + c], partial_gx[k * g.channels + c]});
  shared[threadIdx.y][threadIdx.x] = total;
  for (int half = kFinalLanes / 2; half > 0; half /= 2) {
    __syncthreads();
    if (static_cast<int>(threadIdx.y) < half) {
      total.merge(shared[threadIdx.y + half][threadIdx.x]);
      shared[threadIdx.y][threadIdx.x] = total;
    }
  }
  if (threadIdx.y == 0 && c < g.channels) finish_sums(a, g, c, total, mean_g, slope);
}

// Where pass 3 reads g: dy masked as pass 1 did, or pass 1's own output
// (the residual's gradient, when pass 1 wrote it rather than accumulated).
enum class Gradient { mask_from_x, mask_from_y, written };

// Pass 3: dx = gamma invstd (g - mean_g - (x - mean) slope), + beta times what is there.
template <typename T, Gradient kGradient>
__global__ void __launch_bounds__(kBlock) backward_data_kernel(BatchNormReluBackward a, Geometry g,
                                                               const float* mean_g, const float* slope) {
  constexpr int kV = kVector<T>;
  constexpr Mask kMask = kGradient == Gradient::mask_from_x ? Mask::from_x : Mask::from_y;
  const Lane l = lane_of(g);
  if (!l.active) return;
  const T* x = static_cast<const T*>(a.x);
  const T* y = static_cast<const T*>(a.y);
  const T* source = static_cast<const T*>(kGradient == Gradient::written ? a.dresidual : a.dy);
  T* dx = static_cast<T*>(a.dx);
  ChannelConstants<kV> k;
  k.load(a, l.vector);
  float mg[kV], sl[kV];
#pragma unroll
  for (int j = 0; j < kV; ++j) {
    mg[j] = mean_g[l.vector * kV + j];
    sl[j] = slope[l.vector * kV + j];
  }
  for (std::int64_t r = l.row_begin; r < l.row_end; r += kUnroll * l.row_step) {
    uint4 xs[kUnroll], ys[kUnroll], gs[kUnroll], previous[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t row = r + u * l.row_step;
      if (row >= l.row_end) continue;
      xs[u] = load_vector(x, g, row, l.vector);
      gs[u] = load_vector(source, g, row, l.vector);
      if constexpr (kGradient == Gradient::mask_from_y) ys[u] = load_vector(y, g, row, l.vector);
      if (a.dx_beta != 0.0f) previous[u] = load_vector(dx, g, row, l.vector);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t row = r + u * l.row_step;
      if (row >= l.row_end) break;
      uint4 out;
#pragma unroll
      for (int j = 0; j < kV; ++j) {
        const float xv = element<T>(xs[u], j);
        float gv;
        if constexpr (kGradient == Gradient::written)
          gv = element<T>(gs[u], j);
        else
          gv = masked<T, kMask>(k, j, element<T>(gs[u], j), xv, ys[u]);
        float d = k.scale[j] * (gv - fmaf(xv - k.mean[j], sl[j], mg[j]));
        if (a.dx_beta != 0.0f) d += a.dx_beta * element<T>(previous[u], j);
        set_element<T>(out, j, d);
      }
      store_vector(dx, g, row, l.vector, out);
    }
  }
}

// ---- Launchers ----------------------------------------------------------------------

int vector_of(DType type) { return 16 / static_cast<int>(size_of(type)); }

dim3 pass_blocks(const BatchNormPassGrid& pass) {
  return dim3(static_cast<unsigned>(pass.tiles), static_cast<unsigned>(pass.chunks));
}

unsigned* tickets_of(unsigned* tickets, const char* what) {
  if (tickets == nullptr) throw Error(std::string(what) + ": no tickets (batch_norm_tickets counters, zeroed once)");
  return tickets;
}

template <typename T>
void forward_typed(const BatchNormReluForward& a, const BatchNormGrid& grid, float* workspace, cudaStream_t stream) {
  const Geometry g = geometry_of(grid, grid, kVector<T>);
  if (a.sum != nullptr || a.sum_of_squares != nullptr) {
    if (a.sum == nullptr || a.sum_of_squares == nullptr)
      throw Error("fused batch-norm forward: the convolution's statistics need both the sum and the sum of squares");
    const auto blocks = static_cast<unsigned>((grid.channels + kBlock - 1) / kBlock);
    statistics_from_sums_kernel<<<blocks, kBlock, 0, stream>>>(a, g);
    check_launch("batch-norm statistics from the convolution's sums");
  } else {
    float* partial_mean = workspace;
    float* partial_m2 = workspace + grid.chunks * grid.channels;
    unsigned* tickets = tickets_of(a.tickets, "fused batch-norm forward");
    statistics_kernel<T><<<pass_blocks(grid), kBlock, 0, stream>>>(a, g, partial_mean, partial_m2, tickets);
    check_launch("batch-norm statistics");
  }
  const T* x = static_cast<const T*>(a.x);
  T* y = static_cast<T*>(a.y);
  const Geometry apply = geometry_of(grid, grid.apply, kVector<T>);
  if (a.residual != nullptr)
    apply_kernel<T, true><<<pass_blocks(grid.apply), kBlock, 0, stream>>>(x, static_cast<const T*>(a.residual), y,
                                                                          apply, a);
  else
    apply_kernel<T, false><<<pass_blocks(grid.apply), kBlock, 0, stream>>>(x, nullptr, y, apply, a);
  check_launch("batch-norm + relu forward");
}

template <typename T>
void backward_typed(const BatchNormReluBackward& a, const BatchNormGrid& grid, float* workspace, cudaStream_t stream) {
  const BatchNormPassGrid& pass = grid.backward;
  const Geometry g = geometry_of(grid, pass, kVector<T>);
  float* partial_g = workspace;
  float* partial_gx = workspace + pass.chunks * grid.channels;
  float* mean_g = workspace + 2 * pass.chunks * grid.channels;
  float* slope = mean_g + grid.channels;
  const bool from_y = a.y != nullptr;
  if (a.dresidual != nullptr && !from_y)
    throw Error("batch-norm + add + relu backward: the mask must come from y when there is a residual");
  const dim3 blocks = pass_blocks(pass);
  if (a.dresidual != nullptr)
    backward_reduce_kernel<T, Mask::from_y, true><<<blocks, kBlock, 0, stream>>>(a, g, partial_g, partial_gx);
  else if (from_y)
    backward_reduce_kernel<T, Mask::from_y, false><<<blocks, kBlock, 0, stream>>>(a, g, partial_g, partial_gx);
  else
    backward_reduce_kernel<T, Mask::from_x, false><<<blocks, kBlock, 0, stream>>>(a, g, partial_g, partial_gx);
  check_launch("batch-norm + relu backward (reduction)");
  const dim3 final_blocks(static_cast<unsigned>((grid.channels + kFinalChannels - 1) / kFinalChannels));
  backward_final_kernel<<<final_blocks, dim3(kFinalChannels, kFinalLanes), 0, stream>>>(partial_g, partial_gx, g, a,
                                                                                        mean_g, slope);
  check_launch("batch-norm + relu backward (merge)");
  if (a.dx == nullptr) return;
  // Pass 1 wrote g itself as the residual's gradient: reading it back is one tensor less than dy and y.
  if (a.dresidual != nullptr && a.dresidual_beta == 0.0f)
    backward_data_kernel<T, Gradient::written><<<blocks, kBlock, 0, stream>>>(a, g, mean_g, slope);
  else if (from_y)
    backward_data_kernel<T, Gradient::mask_from_y><<<blocks, kBlock, 0, stream>>>(a, g, mean_g, slope);
  else
    backward_data_kernel<T, Gradient::mask_from_x><<<blocks, kBlock, 0, stream>>>(a, g, mean_g, slope);
  check_launch("batch-norm + relu backward (data gradient)");
}

// Channel vectors per block: a power of two up to `most`, no wider than the row.
int tile_vectors_of(std::int64_t vectors, int most) {
  int tile_vectors = 1;
  while (tile_vectors * 2 <= most && tile_vectors * 2 <= vectors) tile_vectors *= 2;
  return tile_vectors;
}

// One pass's grid: `blocks_per_sm` blocks on every SM, but at least `min_rows_per_thread` rows per thread.
BatchNormPassGrid pass_grid(std::int64_t rows, std::int64_t vectors, int multiprocessors, int most_tile_vectors,
                            int blocks_per_sm, int min_rows_per_thread) {
  BatchNormPassGrid pass;
  pass.tile_vectors = tile_vectors_of(vectors, most_tile_vectors);
  pass.tiles = static_cast<int>((vectors + pass.tile_vectors - 1) / pass.tile_vectors);
  const std::int64_t row_step = kBlock / pass.tile_vectors;
  const std::int64_t wanted = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::max(multiprocessors, 1)) *
                                                             blocks_per_sm / pass.tiles);
  const std::int64_t most = std::max<std::int64_t>(1, (rows + row_step * min_rows_per_thread - 1) /
                                                          (row_step * min_rows_per_thread));
  const std::int64_t chunks = std::min(wanted, most);
  pass.rows_per_chunk = ((rows + chunks - 1) / chunks + row_step - 1) / row_step * row_step;
  pass.chunks = static_cast<int>((rows + pass.rows_per_chunk - 1) / pass.rows_per_chunk);
  return pass;
}

}  // namespace

bool batch_norm_relu_supported(std::int64_t channels, DType type) {
  switch (type) {
    case DType::f32:
    case DType::f16:
    case DType::bf16: return channels > 0 && channels % vector_of(type) == 0;
    default: return false;
  }
}

std::size_t BatchNormGrid::workspace_bytes() const {
  // The forward's partials, or the backward's and its two coefficients per channel.
  const std::int64_t floats = std::max<std::int64_t>(2 * static_cast<std::int64_t>(chunks) * channels,
                                                     2 * static_cast<std::int64_t>(backward.chunks) * channels + 2 * channels);
  return static_cast<std::size_t>(floats) * sizeof(float);
}

std::int64_t batch_norm_tickets(std::int64_t channels, DType type) {
  if (!batch_norm_relu_supported(channels, type)) return 0;
  const std::int64_t vectors = channels / vector_of(type);
  const int tile_vectors = tile_vectors_of(vectors, kMaxTileVectors);
  return (vectors + tile_vectors - 1) / tile_vectors;
}

BatchNormGrid batch_norm_grid(std::int64_t rows, std::int64_t channels, DType type, int multiprocessors) {
  if (rows < 1 || !batch_norm_relu_supported(channels, type))
    throw Error("fused batch-norm: " + std::to_string(rows) + " rows of " + std::to_string(channels) + " " +
                name_of(type) + " channels are not whole 16-byte vectors");
  BatchNormGrid grid;
  grid.rows = rows;
  grid.channels = channels;
  const std::int64_t vectors = channels / vector_of(type);
  const BatchNormPassGrid forward =
      pass_grid(rows, vectors, multiprocessors, kMaxTileVectors, kBlocksPerSm, kMinRowsPerThread);
  grid.tile_vectors = forward.tile_vectors;
  grid.tiles = forward.tiles;
  grid.chunks = forward.chunks;
  grid.rows_per_chunk = forward.rows_per_chunk;
  grid.apply = pass_grid(rows, vectors, multiprocessors, kApplyMaxTileVectors, kBlocksPerSm, kMinRowsPerThread);
  grid.backward = pass_grid(rows, vectors, multiprocessors, kBackwardMaxTileVectors, kBackwardBlocksPerSm,
                            kBackwardMinRowsPerThread);
  return grid;
}

void batch_norm_relu_forward(const BatchNormReluForward& args, const BatchNormGrid& grid, void* workspace,
                             cudaStream_t stream) {
  float* w = static_cast<float*>(workspace);
  switch (args.type) {
    case DType::f32: forward_typed<float>(args, grid, w, stream); return;
    case DType::bf16: forward_typed<__nv_bfloat16>(args, grid, w, stream); return;
    case DType::f16: forward_typed<__half>(args, grid, w, stream); return;
    default: throw Error(std::string("fused batch-norm: no kernel for ") + name_of(args.type));
  }
}

void batch_norm_relu_backward(const BatchNormReluBackward& args, const BatchNormGrid& grid, void* workspace,
                              cudaStream_t stream) {
  float* w = static_cast<float*>(workspace);
  switch (args.type) {
    case DType::f32: backward_typed<float>(args, grid, w, stream); return;
    case DType::bf16: backward_typed<__nv_bfloat16>(args, grid, w, stream); return;
    case DType::f16: backward_typed<__half>(args, grid, w, stream); return;
    default: throw Error(std::string("fused batch-norm: no kernel for ") + name_of(args.type));
  }
}

void channel_sums(const void* x, DType type, std::int64_t rows, std::int64_t channels, double* sum,
                  double* sum_of_squares, cudaStream_t stream) {
  if (rows < 1 || channels < 1) throw Error("per-channel sums: an empty tensor");
  CB_CHECK_CUDA(cudaMemsetAsync(sum, 0, static_cast<std::size_t>(channels) * sizeof(double), stream));
  CB_CHECK_CUDA(cudaMemsetAsync(sum_of_squares, 0, static_cast<std::size_t>(channels) * sizeof(double), stream));
  switch (type) {
    case DType::f32: channel_sums_typed<float>(x, rows, channels, sum, sum_of_squares, stream); return;
    case DType::bf16: channel_sums_typed<__nv_bfloat16>(x, rows, channels, sum, sum_of_squares, stream); return;
    case DType::f16: channel_sums_typed<__half>(x, rows, channels, sum, sum_of_squares, stream); return;
    default: throw Error(std::string("per-channel sums: no kernel for ") + name_of(type));
  }
}

}  // namespace crossbench::cudnn::kernels
