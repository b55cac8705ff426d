// kernels_pooling_lrn.hpp: the kernels and their launchers.
#include "engines/cudnn/kernels_pooling_lrn.hpp"

#include "engines/cudnn/kernel_support.cuh"

namespace crossbench::cudnn::kernels {
namespace {

// ---- NHWC max pooling -----------------------------------------------------------

// Max pooling, NHWC, vectors of V channels (16 bytes where C and the pointers
// allow, else V = 1). The grid is 2-D: blockIdx.x is one row (image n, row h)
// of the tensor the threads walk, blockIdx.y a tile of kPoolThreads threads
// along that row's (w, channel vector) pairs. The row's image and height come
// from one division per block; a thread divides once (by the vectors per
// pixel), in 32 bits; offsets are 32-bit where every tensor has fewer than
// 2^31 elements (I = int), else 64-bit (I = std::int64_t). (The first flat
// version did six 64-bit divisions per thread, emulated on the GPU: VGG-11's
// pool1 at batch 64 in tf32 ran 0.37 ms forward and 0.85 ms backward on an
// H200, against a memory floor near 0.2 ms each.)
//
// Forward: one thread per (output pixel, vector): the window's maximum (first
// maximum; NaN wins) and its position in the window, one byte. With the relu
// mask the input is a relu's output (>= 0), and where the window's maximum is
// not > 0 (the relu's derivative is 0 there, PyTorch's threshold_backward)
// the byte is kPoolNoPosition, which no backward position equals: backward
// then writes the relu's input gradient directly.
//
// Backward, non-overlapping windows (kernel == stride, no padding: VGG's 2x2
// s2): one thread per (output pixel, vector) writes its window's dx straight
// (dy at the argmax, 0 elsewhere); the last window of a row or column also
// writes the zeros of the inputs no window covers (floor mode). Overlapping
// windows: one thread per (input pixel, vector) gathers the gradients of the
// windows whose maximum it was.
constexpr int kPoolThreads = 128;

template <typename T, int V>
struct alignas(sizeof(T) * V) Lanes {
  T v[V];
};
template <int V>
struct alignas(V) LaneBytes {
  std::uint8_t b[V];
};

struct PoolShape {
  int images, channels, in_h, in_w, out_h, out_w;
};

// A thread's place in the 2-D grid over a tensor of `height` rows and `width`
// pixels a row: the row (blockIdx.x) as image n and row y, and the thread's
// pixel x in it and first channel c; `inside` is false past the row's end.
struct PoolPlace {
  int row, n, y, x, c;
  bool inside;
};
template <int V>
__device__ __forceinline__ PoolPlace pool_place(int height, int width, int channels) {
  const int vectors = channels / V;
  const int item = static_cast<int>(blockIdx.y) * kPoolThreads + static_cast<int>(threadIdx.x);
  PoolPlace p;
  p.inside = item < width * vectors;
  p.row = static_cast<int>(blockIdx.x);
  p.n = p.row / height;
  p.y = p.row - p.n * height;
  p.x = item / vectors;
  p.c = (item - p.x * vectors) * V;
  return p;
}

// Takes input vector `in` at window position `position` into the running maximum:
// the first maximum wins ties, NaN wins over numbers (as cuDNN and PyTorch).
template <typename T, int V>
__device__ __forceinline__ void take_maximum(const Lanes<T, V>& in, int position, float (&best)[V], LaneBytes<V>& where) {
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const float v = to_float(in.v[j]);
    if (v > best[j] || (isnan(v) && !isnan(best[j]))) {
      best[j] = v;
      where.b[j] = static_cast<std::uint8_t>(position);
    }
  }
}

// K > 0: the window is K x K at compile time (GoogLeNet's and ResNet's 3x3, VGG's 2x2):
// every load of the window is issued before the first comparison, so a thread waits for
// its K*K loads once. With the window size known only at run time (K = 0) the loop's
// loads wait one after another: GoogLeNet's 3x3 stride-1 pools ran at ~4x their
// bandwidth floor (bench/results/2026-12-02/call8). Both visit positions in the same
// order (row-major), so they agree bit for bit, argmax included.
template <typename T, int V, typename I, int K>
__global__ void __launch_bounds__(kPoolThreads)
    max_pool_nhwc_forward_kernel(const T* __restrict__ x, T* __restrict__ y, std::uint8_t* __restrict__ argmax,
                                 PoolShape s, PoolGeometry g, bool relu_mask) {
  const PoolPlace at = pool_place<V>(s.out_h, s.out_w, s.channels);
  if (!at.inside) return;
  const int row = at.row, n = at.n, oh = at.y, ow = at.x, c = at.c;  // row: n * out_h + oh
  const int kernel = K > 0 ? K : g.kernel;
  const int h0 = oh * g.stride - g.padding, w0 = ow * g.stride - g.padding;
  const int kh0 = h0 < 0 ? -h0 : 0, kw0 = w0 < 0 ? -w0 : 0;
  const int kh1 = min(kernel, s.in_h - h0), kw1 = min(kernel, s.in_w - w0);
  const I image_row = static_cast<I>(n) * s.in_h + h0;
  float best[V];
  LaneBytes<V> where;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    best[j] = -INFINITY;
    where.b[j] = 0;
  }
  if constexpr (K > 0) {
    Lanes<T, V> window[K * K];
#pragma unroll
    for (int kh = 0; kh < K; ++kh)
#pragma unroll
      for (int kw = 0; kw < K; ++kw)
        if (kh >= kh0 && kh < kh1 && kw >= kw0 && kw < kw1)
          window[kh * K + kw] = *reinterpret_cast<const Lanes<T, V>*>(x + ((image_row + kh) * s.in_w + w0 + kw) * s.channels + c);
#pragma unroll
    for (int kh = 0; kh < K; ++kh)
#pragma unroll
      for (int kw = 0; kw < K; ++kw)
        if (kh >= kh0 && kh < kh1 && kw >= kw0 && kw < kw1) take_maximum<T, V>(window[kh * K + kw], kh * K + kw, best, where);
  } else {
    for (int kh = kh0; kh < kh1; ++kh) {
      const I line = (image_row + kh) * s.in_w + w0;
      for (int kw = kw0; kw < kw1; ++kw)
        take_maximum<T, V>(*reinterpret_cast<const Lanes<T, V>*>(x + (line + kw) * s.channels + c), kh * kernel + kw, best,
                           where);
    }
  }
  const I o = (static_cast<I>(row) * s.out_w + ow) * s.channels + c;
  Lanes<T, V> out;
#pragma unroll
  for (int j = 0; j < V; ++j) out.v[j] = from_float<T>(best[j]);
  *reinterpret_cast<Lanes<T, V>*>(y + o) = out;
  if (argmax == nullptr) return;  // inference
  if (relu_mask) {
#pragma unroll
    for (int j = 0; j < V; ++j)
      if (!(best[j] > 0.0f)) where.b[j] = kPoolNoPosition;
  }
  *reinterpret_cast<LaneBytes<V>*>(argmax + o) = where;
}

// dx of one vector: the sum where the argmax byte names `position`, plus beta * dx.
template <typename T, int V, typename I>
__device__ __forceinline__ void store_pool_gradient(T* dx, I i, const float (&sum)[V], float beta) {
  Lanes<T, V> out;
  if (beta != 0.0f) {
    out = *reinterpret_cast<const Lanes<T, V>*>(dx + i);
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = from_float<T>(sum[j] + beta * to_float(out.v[j]));
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = from_float<T>(sum[j]);
  }
  *reinterpret_cast<Lanes<T, V>*>(dx + i) = out;
}

// Non-overlapping windows (kernel == stride, no padding): a thread per output vector.
template <typename T, int V, typename I>
__device__ __forceinline__ void scatter_window(const T* __restrict__ dy, const std::uint8_t* __restrict__ argmax,
                                               T* __restrict__ dx, const PoolShape& s, int kernel, float beta,
                                               const PoolPlace& at) {
  const int row = at.row, n = at.n, oh = at.y, ow = at.x, c = at.c;  // row: n * out_h + oh
  const I o = (static_cast<I>(row) * s.out_w + ow) * s.channels + c;
  const LaneBytes<V> where = *reinterpret_cast<const LaneBytes<V>*>(argmax + o);
  const Lanes<T, V> gradient = *reinterpret_cast<const Lanes<T, V>*>(dy + o);
  // This window's inputs; the last row's and column's also take the inputs no window covers.
  const int h0 = oh * kernel, w0 = ow * kernel;
  const int h1 = oh == s.out_h - 1 ? s.in_h : min(h0 + kernel, s.in_h);
  const int w1 = ow == s.out_w - 1 ? s.in_w : min(w0 + kernel, s.in_w);
  const I image_row = static_cast<I>(n) * s.in_h;
  for (int h = h0; h < h1; ++h) {
    const I line = (image_row + h) * s.in_w;
    for (int w = w0; w < w1; ++w) {
      // -1 outside the window: no argmax byte (0..255) equals it.
      const int position = h - h0 < kernel && w - w0 < kernel ? (h - h0) * kernel + (w - w0) : -1;
      float sum[V];
#pragma unroll
      for (int j = 0; j < V; ++j) sum[j] = where.b[j] == position ? to_float(gradient.v[j]) : 0.0f;
      store_pool_gradient<T, V, I>(dx, (line + w) * s.channels + c, sum, beta);
    }
  }
}

// Any windows (overlapping, padded, ceil mode): a thread per input vector.
// K > 0: the window is K x K at compile time, so at most K windows per
// dimension hold an input (stride 1; fewer for larger strides): their argmax
// bytes and gradients are all loaded before the first is added, as the
// forward does (the run-time loop, K = 0, waits on each window's loads in
// turn). Both add in the same order (oh, then ow, ascending): bit for bit alike.
template <typename T, int V, typename I, int K>
__device__ __forceinline__ void gather_windows(const T* __restrict__ dy, const std::uint8_t* __restrict__ argmax,
                                               T* __restrict__ dx, const PoolShape& s, const PoolGeometry& g,
                                               float beta, const PoolPlace& at) {
  const int row = at.row, n = at.n, h = at.y, w = at.x, c = at.c;  // row: n * in_h + h
  const int kernel = K > 0 ? K : g.kernel;
  // Windows whose span [o * stride - padding, + kernel) holds h (and w).
  const int hp = h + g.padding, wp = w + g.padding;
  const int oh_lo = hp < kernel ? 0 : (hp - kernel) / g.stride + 1;
  const int ow_lo = wp < kernel ? 0 : (wp - kernel) / g.stride + 1;
  const int oh_hi = min(hp / g.stride, s.out_h - 1), ow_hi = min(wp / g.stride, s.out_w - 1);
  const I image_row = static_cast<I>(n) * s.out_h;
  float sum[V];
#pragma unroll
  for (int j = 0; j < V; ++j) sum[j] = 0;
  if constexpr (K > 0) {
    LaneBytes<V> where[K * K];
    Lanes<T, V> gradient[K * K];
#pragma unroll
    for (int a = 0; a < K; ++a)
#pragma unroll
      for (int b = 0; b < K; ++b)
        if (oh_lo + a <= oh_hi && ow_lo + b <= ow_hi) {
          const I o = ((image_row + oh_lo + a) * s.out_w + ow_lo + b) * s.channels + c;
          where[a * K + b] = *reinterpret_cast<const LaneBytes<V>*>(argmax + o);
          gradient[a * K + b] = *reinterpret_cast<const Lanes<T, V>*>(dy + o);
        }
#pragma unroll
    for (int a = 0; a < K; ++a)
#pragma unroll
      for (int b = 0; b < K; ++b)
        if (oh_lo + a <= oh_hi && ow_lo + b <= ow_hi) {
          const int position = (hp - (oh_lo + a) * g.stride) * K + (wp - (ow_lo + b) * g.stride);
#pragma unroll
          for (int j = 0; j < V; ++j)
            if (where[a * K + b].b[j] == position) sum[j] += to_float(gradient[a * K + b].v[j]);
        }
  } else {
    for (int oh = oh_lo; oh <= oh_hi; ++oh) {
      const I line = (image_row + oh) * s.out_w;
      for (int ow = ow_lo; ow <= ow_hi; ++ow) {
        const I o = (line + ow) * s.channels + c;
        const int position = (hp - oh * g.stride) * kernel + (wp - ow * g.stride);
        const LaneBytes<V> where = *reinterpret_cast<const LaneBytes<V>*>(argmax + o);
        const Lanes<T, V> gradient = *reinterpret_cast<const Lanes<T, V>*>(dy + o);
#pragma unroll
        for (int j = 0; j < V; ++j)
          if (where.b[j] == position) sum[j] += to_float(gradient.v[j]);
      }
    }
  }
  store_pool_gradient<T, V, I>(dx, (static_cast<I>(row) * s.in_w + w) * s.channels + c, sum, beta);
}

// Overlapping windows with a stride of S > 1 and a K x K window known at compile time (ResNet's and
// AlexNet's 3x3 stride 2): a thread per S x S block of inputs (rows by * S .. + S - 1, columns alike) and channel
// vector. The windows that hold any input of the block (at most ceil((K + S - 1) / S) per dimension, 2 for 3x3
// s2) are loaded once, and each of the block's inputs adds those that hold it, in the gather's order (oh, then
// ow, ascending): bit for bit what gather_windows writes. gather_windows, a thread per input, loads the windows
// of each input again: 9 window loads per 2 x 2 inputs at 3x3 s2, where this loads 4, with a quarter of the
// threads. (On an H200, ResNet-50's max pool backward at batch 256, bf16, took 0.73 ms, against a floor near
// 0.15 ms for the bytes it must move: bench/results/2026-12-03/call38.)
template <int K, int S>
constexpr int kBlockWindows = (K + S - 1 + S - 1) / S;  // windows per dimension that hold some input of a block

// The first window (o >= 0) whose span [o * S - padding, + K) reaches input i: ceil((i + padding - K + 1) / S).
template <int K, int S>
__device__ __forceinline__ int first_window(int i, int padding) {
  const int reach = i + padding - K + 1;
  return reach <= 0 ? 0 : (reach + S - 1) / S;
}

template <typename T, int V, typename I, int K, int S>
__global__ void __launch_bounds__(kPoolThreads)
    max_pool_nhwc_backward_block_kernel(const T* __restrict__ dy, const std::uint8_t* __restrict__ argmax,
                                        T* __restrict__ dx, PoolShape s, PoolGeometry g, float beta) {
  constexpr int W = kBlockWindows<K, S>;
  const int block_rows = (s.in_h + S - 1) / S, block_cols = (s.in_w + S - 1) / S;
  const PoolPlace at = pool_place<V>(block_rows, block_cols, s.channels);
  if (!at.inside) return;
  const int n = at.n, c = at.c;
  const int h_begin = at.y * S, w_begin = at.x * S;
  const int h_end = min(h_begin + S, s.in_h), w_end = min(w_begin + S, s.in_w);  // past the block's last input
  const int oh_first = first_window<K, S>(h_begin, g.padding), ow_first = first_window<K, S>(w_begin, g.padding);
  const int oh_last = min((h_end - 1 + g.padding) / S, s.out_h - 1);
  const int ow_last = min((w_end - 1 + g.padding) / S, s.out_w - 1);
  const I image_row = static_cast<I>(n) * s.out_h;
  LaneBytes<V> where[W * W];
  Lanes<T, V> gradient[W * W];
#pragma unroll
  for (int a = 0; a < W; ++a)
#pragma unroll
    for (int b = 0; b < W; ++b)
      if (oh_first + a <= oh_last && ow_first + b <= ow_last) {
        const I o = ((image_row + oh_first + a) * s.out_w + ow_first + b) * s.channels + c;
        where[a * W + b] = *reinterpret_cast<const LaneBytes<V>*>(argmax + o);
        gradient[a * W + b] = *reinterpret_cast<const Lanes<T, V>*>(dy + o);
      }
  const I input_image_row = static_cast<I>(n) * s.in_h;
#pragma unroll
  for (int dh = 0; dh < S; ++dh)
#pragma unroll
    for (int dw = 0; dw < S; ++dw) {
      const int h = h_begin + dh, w = w_begin + dw;
      if (h >= h_end || w >= w_end) continue;
      const int hp = h + g.padding, wp = w + g.padding;
      float sum[V];
#pragma unroll
      for (int j = 0; j < V; ++j) sum[j] = 0;
#pragma unroll
      for (int a = 0; a < W; ++a)
#pragma unroll
        for (int b = 0; b < W; ++b) {
          const int oh = oh_first + a, ow = ow_first + b;
          // Window (oh, ow) holds (h, w) when 0 <= hp - oh * S < K, and alike for w.
          const int kh = hp - oh * S, kw = wp - ow * S;
          if (oh > oh_last || ow > ow_last || kh < 0 || kh >= K || kw < 0 || kw >= K) continue;
          const int position = kh * K + kw;
#pragma unroll
          for (int j = 0; j < V; ++j)
            if (where[a * W + b].b[j] == position) sum[j] += to_float(gradient[a * W + b].v[j]);
        }
      store_pool_gradient<T, V, I>(dx, ((input_image_row + h) * s.in_w + w) * s.channels + c, sum, beta);
    }
}

// The backward: the scatter over output rows where windows are disjoint, else the gather over input rows.
template <typename T, int V, typename I, bool kDisjoint, int K = 0>
__global__ void __launch_bounds__(kPoolThreads)
    max_pool_nhwc_backward_kernel(const T* __restrict__ dy, const std::uint8_t* __restrict__ argmax,
                                  T* __restrict__ dx, PoolShape s, PoolGeometry g, float beta) {
  if constexpr (kDisjoint) {
    const PoolPlace at = pool_place<V>(s.out_h, s.out_w, s.channels);
    if (at.inside) scatter_window<T, V, I>(dy, argmax, dx, s, g.kernel, beta, at);
  } else {
    const PoolPlace at = pool_place<V>(s.in_h, s.in_w, s.channels);
    if (at.inside) gather_windows<T, V, I, K>(dy, argmax, dx, s, g, beta, at);
  }
}

}  // namespace

namespace {
// A 2-D grid: one block row per tensor row (rows of the output, or of the
// input for the gathering backward), kPoolThreads-thread tiles along it.
dim3 pool_grid(std::int64_t rows, std::int64_t items_per_row) {
  if (rows > 0x7fffffffLL) throw Error("max pooling: more than 2^31 - 1 rows of images");
  const std::int64_t tiles = (items_per_row + kPoolThreads - 1) / kPoolThreads;
  if (tiles > 65535) throw Error("max pooling: a row of more than 65535 * 128 channel vectors");
  return dim3(static_cast<unsigned>(rows), static_cast<unsigned>(tiles));
}

PoolShape pool_shape(std::array<std::int64_t, 4> in, std::array<std::int64_t, 4> out) {
  for (std::int64_t d : {in[0], in[1], in[2], in[3], out[2], out[3]})
    if (d > 0x7fffffffLL) throw Error("max pooling: a dimension of 2^31 or more");
  return {static_cast<int>(in[0]), static_cast<int>(in[1]), static_cast<int>(in[2]), static_cast<int>(in[3]),
          static_cast<int>(out[2]), static_cast<int>(out[3])};
}

// 32-bit offsets where every tensor has fewer than 2^31 elements.
bool narrow_indices(const PoolShape& s, PoolIndex index) {
  if (index == PoolIndex::wide) return false;
  const std::int64_t pixels = static_cast<std::int64_t>(s.images) * s.channels;
  return pixels * s.in_h * s.in_w <= 0x7fffffffLL && pixels * s.out_h * s.out_w <= 0x7fffffffLL;
}

template <typename T, int V>
struct PoolForward {
  template <typename I>
  static void launch(const void* x, void* y, std::uint8_t* argmax, PoolShape s, PoolGeometry g, bool relu_mask,
                     cudaStream_t stream) {
    const dim3 grid =
        pool_grid(static_cast<std::int64_t>(s.images) * s.out_h, static_cast<std::int64_t>(s.out_w) * (s.channels / V));
    const auto* in = static_cast<const T*>(x);
    T* out = static_cast<T*>(y);
    switch (g.kernel) {  // the windows of the seed networks at compile time; any other at run time
      case 2: max_pool_nhwc_forward_kernel<T, V, I, 2><<<grid, kPoolThreads, 0, stream>>>(in, out, argmax, s, g, relu_mask); break;
      case 3: max_pool_nhwc_forward_kernel<T, V, I, 3><<<grid, kPoolThreads, 0, stream>>>(in, out, argmax, s, g, relu_mask); break;
      default: max_pool_nhwc_forward_kernel<T, V, I, 0><<<grid, kPoolThreads, 0, stream>>>(in, out, argmax, s, g, relu_mask);
    }
  }
  static void run(const void* x, void* y, std::uint8_t* argmax, PoolShape s, PoolGeometry g, bool relu_mask,
                  PoolIndex index, cudaStream_t stream) {
    if (narrow_indices(s, index)) launch<int>(x, y, argmax, s, g, relu_mask, stream);
    else launch<std::int64_t>(x, y, argmax, s, g, relu_mask, stream);
  }
};

template <typename T, int V>
struct PoolBackward {
  template <typename I>
  static void launch(const void* dy, const std::uint8_t* argmax, void* dx, PoolShape s, PoolGeometry g, float beta,
                     cudaStream_t stream) {
    const auto* gradient = static_cast<const T*>(dy);
    T* target = static_cast<T*>(dx);
    const int vectors = s.channels / V;
    if (pool_windows_disjoint(g)) {
      max_pool_nhwc_backward_kernel<T, V, I, true>
          <<<pool_grid(static_cast<std::int64_t>(s.images) * s.out_h, static_cast<std::int64_t>(s.out_w) * vectors),
             kPoolThreads, 0, stream>>>(gradient, argmax, target, s, g, beta);
    } else {
      if (g.kernel == 3 && g.stride == 2) {  // ResNet's, AlexNet's and GoogLeNet's reductions: a thread per 2 x 2 inputs
        const dim3 blocks = pool_grid(static_cast<std::int64_t>(s.images) * ((s.in_h + 1) / 2),
                                      static_cast<std::int64_t>((s.in_w + 1) / 2) * vectors);
        max_pool_nhwc_backward_block_kernel<T, V, I, 3, 2><<<blocks, kPoolThreads, 0, stream>>>(gradient, argmax, target, s,
                                                                                                g, beta);
        return;
      }
      const dim3 grid = pool_grid(static_cast<std::int64_t>(s.images) * s.in_h, static_cast<std::int64_t>(s.in_w) * vectors);
      if (g.kernel == 3)  // the seed networks' overlapping windows (GoogLeNet's, ResNet's, AlexNet's 3x3) at compile time
        max_pool_nhwc_backward_kernel<T, V, I, false, 3><<<grid, kPoolThreads, 0, stream>>>(gradient, argmax, target, s, g, beta);
      else
        max_pool_nhwc_backward_kernel<T, V, I, false><<<grid, kPoolThreads, 0, stream>>>(gradient, argmax, target, s, g, beta);
    }
  }
  static void run(const void* dy, const std::uint8_t* argmax, void* dx, PoolShape s, PoolGeometry g, float beta,
                  PoolIndex index, cudaStream_t stream) {
    if (narrow_indices(s, index)) launch<int>(dy, argmax, dx, s, g, beta, stream);
    else launch<std::int64_t>(dy, argmax, dx, s, g, beta, stream);
  }
};

// Launcher<T, V>::run(args...) with V = 16 bytes of channels of T where the
// channels and every pointer (the argmax bytes: V-aligned) allow it, else V = 1.
template <template <typename, int> class Launcher, typename... Args>
void dispatch_pool(DType type, std::int64_t channels, bool aligned16, const std::uint8_t* argmax, Args... args) {
  const auto vector_ok = [&](int v) {
    return aligned16 && channels % v == 0 && (argmax == nullptr || reinterpret_cast<std::uintptr_t>(argmax) % v == 0);
  };
  switch (type) {
    case DType::f16:
      if (vector_ok(8)) Launcher<__half, 8>::run(args...);
      else Launcher<__half, 1>::run(args...);
      break;
    case DType::bf16:
      if (vector_ok(8)) Launcher<__nv_bfloat16, 8>::run(args...);
      else Launcher<__nv_bfloat16, 1>::run(args...);
      break;
    case DType::f32:
      if (vector_ok(4)) Launcher<float, 4>::run(args...);
      else Launcher<float, 1>::run(args...);
      break;
    default: throw Error("max pooling: a data type other than fp32, fp16 and bf16");
  }
}

bool aligned16(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  return true;
}
}  // namespace

void max_pool_nhwc_forward(const void* x, void* y, std::uint8_t* argmax, DType type, std::array<std::int64_t, 4> in,
                           std::array<std::int64_t, 4> out, PoolGeometry g, cudaStream_t stream, bool relu_mask,
                           PoolIndex index) {
  if (!pool_kernel_supported(g.kernel)) throw Error("max pooling kernel: a window of 255 or more positions");
  if (in[0] * in[1] * in[2] * in[3] == 0 || out[2] * out[3] == 0) return;  // nothing to pool
  dispatch_pool<PoolForward>(type, in[1], aligned16({x, y}), argmax, x, y, argmax, pool_shape(in, out), g, relu_mask,
                             index, stream);
  check_launch("max_pool_nhwc_forward");
}

void max_pool_nhwc_backward(const void* dy, const std::uint8_t* argmax, void* dx, DType type,
                            std::array<std::int64_t, 4> in, std::array<std::int64_t, 4> out, PoolGeometry g, float beta,
                            cudaStream_t stream, PoolIndex index) {
  if (in[0] * in[1] * in[2] * in[3] == 0 || out[2] * out[3] == 0) return;  // nothing to pool
  dispatch_pool<PoolBackward>(type, in[1], aligned16({dy, dx}), argmax, dy, argmax, dx, pool_shape(in, out), g, beta,
                              index, stream);
  check_launch("max_pool_nhwc_backward");
}

}  // namespace crossbench::cudnn::kernels
