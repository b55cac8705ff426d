// kernels_lrn.hpp: the kernels and their launchers.
#include "engines/cudnn/kernels_lrn.hpp"

#include "engines/cudnn/kernel_support.cuh"

namespace crossbench::cudnn::kernels {
namespace {

// scale^-beta (scale = k + alpha / size * sum >= k > 0): one log2 and one exp2 on the
// special-function units instead of powf's correctly rounded ~50 instructions, which made
// the NHWC kernels compute-bound (bf16: 8 powers per 16-byte vector; call 8 measured
// GoogLeNet's conv2/norm2 at ~3x its bandwidth floor). Relative error ~1e-6, inside the
// fp32 bound of the tests; both kernel families use it, so they still agree bit for bit.
__device__ __forceinline__ float inverse_power(float scale, float beta) { return exp2f(-beta * __log2f(scale)); }

// ---- Packed NHWC: one thread per (pixel, vector of V channels) ------------------------

template <typename T, int V>
struct alignas(sizeof(T) * V) Vector {
  T v[V];
};

// The V channels of `p` from element `at` in fp32, or zeros where `present` is false
// (channels outside the tensor: they add nothing to a window's sum).
template <typename T, int V>
__device__ __forceinline__ void load_vector(const T* p, unsigned at, bool present, float* out) {
  if (present) {
    const Vector<T, V> in = *reinterpret_cast<const Vector<T, V>*>(p + at);
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = to_float(in.v[i]);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = 0.0f;
  }
}

struct NhwcLrnShape {
  unsigned vectors;  // per pixel: channels / V
  unsigned total;    // threads: pixels * vectors
};

// Thread idx owns channels [c0, c0 + V) of its pixel, c0 = idx % vectors * V,
// at element idx * V. Its window sums need channels c0 - before .. c0 + V - 1 + after,
// all within the neighbouring vectors since SIZE - 1 <= V. Summed in ascending
// channel order from 0, as the warp kernel below does.
template <typename T, int V, int SIZE>
__global__ void lrn_forward_nhwc_kernel(const T* __restrict__ x, T* __restrict__ y, NhwcLrnShape s,
                                        LrnParameters p) {
  constexpr int kBefore = (SIZE - 1) / 2, kAfter = SIZE - 1 - kBefore;
  const unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= s.total) return;
  const unsigned vector = idx % s.vectors, at = idx * V;
  float xs[3 * V];  // channels c0 - V .. c0 + 2V - 1
  load_vector<T, V>(x, at - V, kBefore > 0 && vector > 0, xs);
  load_vector<T, V>(x, at, true, xs + V);
  load_vector<T, V>(x, at + V, kAfter > 0 && vector + 1 < s.vectors, xs + 2 * V);
  const float scale_alpha = p.alpha / static_cast<float>(p.size);
  Vector<T, V> out;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    float sum = 0;
#pragma unroll
    for (int j = V + i - kBefore; j <= V + i + kAfter; ++j) sum += xs[j] * xs[j];
    out.v[i] = from_float<T>(xs[V + i] * inverse_power(p.k + scale_alpha * sum, p.beta));
  }
  *reinterpret_cast<Vector<T, V>*>(y + at) = out;
}

// The backward of channel c needs the scales s_j and terms dy_j y_j / s_j of
// the windows j in [c - after, c + before] containing it, and each s_j the
// squares of x over [j - before, j + after]: x over +-(SIZE - 1) channels.
template <typename T, int V, int SIZE>
__global__ void lrn_backward_nhwc_kernel(const T* __restrict__ x, const T* __restrict__ y, const T* __restrict__ dy,
                                         T* dx, NhwcLrnShape s, LrnParameters p, float beta_dx) {
  constexpr int kBefore = (SIZE - 1) / 2, kAfter = SIZE - 1 - kBefore;
  const unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= s.total) return;
  const unsigned vector = idx % s.vectors, at = idx * V;
  const bool has_previous = SIZE > 1 && vector > 0, has_next = SIZE > 1 && vector + 1 < s.vectors;
  float xs[3 * V], ys[3 * V], dys[3 * V];  // channels c0 - V .. c0 + 2V - 1
  load_vector<T, V>(x, at - V, has_previous, xs);
  load_vector<T, V>(x, at, true, xs + V);
  load_vector<T, V>(x, at + V, has_next, xs + 2 * V);
  load_vector<T, V>(y, at - V, has_previous, ys);
  load_vector<T, V>(y, at, true, ys + V);
  load_vector<T, V>(y, at + V, has_next, ys + 2 * V);
  load_vector<T, V>(dy, at - V, has_previous, dys);
  load_vector<T, V>(dy, at, true, dys + V);
  load_vector<T, V>(dy, at + V, has_next, dys + 2 * V);
  const float scale_alpha = p.alpha / static_cast<float>(p.size);
  const float factor = 2.0f * p.alpha * p.beta / static_cast<float>(p.size);
  // Windows j = c0 - after .. c0 + V - 1 + before, at scale[j - (c0 - after)].
  constexpr int kWindows = V + SIZE - 1;
  float scale[kWindows], term[kWindows];
#pragma unroll
  for (int w = 0; w < kWindows; ++w) {
    const int j = V - kAfter + w;  // index into xs
    const bool present = j < V ? has_previous : (j < 2 * V ? true : has_next);
    float sum = 0;
#pragma unroll
    for (int i = j - kBefore; i <= j + kAfter; ++i) sum += xs[i] * xs[i];
    scale[w] = p.k + scale_alpha * sum;
    term[w] = present ? dys[j] * ys[j] / scale[w] : 0.0f;
  }
  Vector<T, V> old;
  if (beta_dx != 0.0f) old = *reinterpret_cast<const Vector<T, V>*>(dx + at);
  Vector<T, V> out;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    // Windows containing channel c0 + i: j in [i - after, i + before], at w = j + after.
    float sum = 0;
#pragma unroll
    for (int w = i; w <= i + SIZE - 1; ++w) sum += term[w];
    float v = dys[V + i] * inverse_power(scale[i + kAfter], p.beta) - factor * xs[V + i] * sum;
    if (beta_dx != 0.0f) v += beta_dx * to_float(old.v[i]);
    out.v[i] = from_float<T>(v);
  }
  *reinterpret_cast<Vector<T, V>*>(dx + at) = out;
}

// ---- Any layout: one warp per pixel; the pixel's channels in shared memory ----------

constexpr int kLrnWarps = 4;

struct Pixel {
  std::int64_t base;  // element offset of channel 0
  std::int64_t step;  // elements between channels
};

__device__ __forceinline__ Pixel pixel_of(std::int64_t pixel, Dims d, Strides s) {
  const std::int64_t w = pixel % d.d3, h = pixel / d.d3 % d.d2, n = pixel / (d.d3 * d.d2);
  return {n * s.s0 + h * s.s2 + w * s.s3, s.s1};
}

// Runs body(px, lane, sx) for each of this warp's pixels, with the pixel's
// x in sx[0, C) (shared memory: `floats` per channel for each warp, the
// rest for the body).
template <typename Body>
__device__ __forceinline__ void for_each_pixel(const void* x, DType type, Dims d, Strides s, int floats, Body body) {
  extern __shared__ float shared[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t channels = d.d1, pixels = d.d0 * d.d2 * d.d3;
  float* sx = shared + warp * floats * channels;
  for (std::int64_t pixel = blockIdx.x * static_cast<std::int64_t>(kLrnWarps) + warp; pixel < pixels;
       pixel += static_cast<std::int64_t>(gridDim.x) * kLrnWarps) {
    const Pixel px = pixel_of(pixel, d, s);
    for (std::int64_t c = lane; c < channels; c += 32) sx[c] = load(x, type, px.base + c * px.step);
    __syncwarp();
    body(px, lane, sx);
    __syncwarp();
  }
}

__global__ void lrn_forward_kernel(const void* x, void* y, DType type, Dims d, Strides s, LrnParameters p) {
  const std::int64_t channels = d.d1;
  const int before = (p.size - 1) / 2;
  const float scale_alpha = p.alpha / static_cast<float>(p.size);
  for_each_pixel(x, type, d, s, 1, [&](const Pixel& px, int lane, const float* sx) {
    for (std::int64_t c = lane; c < channels; c += 32) {
      float sum = 0;
      const std::int64_t lo = c - before, hi = lo + p.size - 1;
      for (std::int64_t j = lo < 0 ? 0 : lo; j <= hi && j < channels; ++j) sum += sx[j] * sx[j];
      store(y, type, px.base + c * px.step, sx[c] * inverse_power(p.k + scale_alpha * sum, p.beta));
    }
  });
}

__global__ void lrn_backward_kernel(const void* x, const void* y, const void* dy, void* dx, DType type, Dims d,
                                    Strides s, LrnParameters p, float beta_dx) {
  const std::int64_t channels = d.d1;
  const int before = (p.size - 1) / 2, after = p.size - 1 - before;
  const float scale_alpha = p.alpha / static_cast<float>(p.size);
  const float factor = 2.0f * p.alpha * p.beta / static_cast<float>(p.size);
  // Per warp: x, then scale, then dy * y / scale.
  for_each_pixel(x, type, d, s, 3, [&](const Pixel& px, int lane, float* sx) {
    float* ss = sx + channels;
    float* st = ss + channels;
    for (std::int64_t c = lane; c < channels; c += 32) {
      float sum = 0;
      const std::int64_t lo = c - before, hi = c + after;
      for (std::int64_t j = lo < 0 ? 0 : lo; j <= hi && j < channels; ++j) sum += sx[j] * sx[j];
      const float scale = p.k + scale_alpha * sum;
      ss[c] = scale;
      const std::int64_t at = px.base + c * px.step;
      st[c] = load(dy, type, at) * load(y, type, at) / scale;
    }
    __syncwarp();
    for (std::int64_t c = lane; c < channels; c += 32) {
      // Windows j containing c: j - before <= c <= j + after, i.e. j in [c - after, c + before].
      float sum = 0;
      const std::int64_t lo = c - after, hi = c + before;
      for (std::int64_t j = lo < 0 ? 0 : lo; j <= hi && j < channels; ++j) sum += st[j];
      const std::int64_t at = px.base + c * px.step;
      float v = load(dy, type, at) * inverse_power(ss[c], p.beta) - factor * sx[c] * sum;
      if (beta_dx != 0.0f) v += beta_dx * load(dx, type, at);
      store(dx, type, at, v);
    }
  });
}

unsigned lrn_blocks(std::int64_t pixels) {
  const std::int64_t blocks = (pixels + kLrnWarps - 1) / kLrnWarps;
  return static_cast<unsigned>(blocks > 65535LL * 16 ? 65535LL * 16 : blocks);
}

// ---- Launchers of the NHWC kernels -------------------------------------------------

int vector_width(DType type) {
  switch (type) {
    case DType::f16:
    case DType::bf16: return 8;
    case DType::f32: return 4;
    default: return 0;
  }
}

bool aligned16(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// Calls run(first_pixel, pixels) over chunks of whole pixels of at most 2^30
// elements: 32-bit element offsets, at most 2^28 threads (blocks_for's grid holds them).
constexpr std::int64_t kChunkElements = std::int64_t{1} << 30;
template <typename Run>
void over_chunks(std::array<std::int64_t, 4> dims, Run run) {
  const std::int64_t channels = dims[1], pixels = dims[0] * dims[2] * dims[3];
  const std::int64_t chunk = kChunkElements / channels;
  for (std::int64_t first = 0; first < pixels; first += chunk) run(first, std::min(chunk, pixels - first));
}

NhwcLrnShape nhwc_shape(std::int64_t channels, int v, std::int64_t pixels) {
  const auto vectors = static_cast<unsigned>(channels / v);
  return {vectors, static_cast<unsigned>(pixels) * vectors};
}

template <typename T, int V, int SIZE>
void launch_forward(const void* x, void* y, std::array<std::int64_t, 4> dims, LrnParameters p,
                    cudaStream_t stream) {
  if constexpr (SIZE <= V + 1) {
    if (p.size != SIZE) return launch_forward<T, V, SIZE + 1>(x, y, dims, p, stream);
    over_chunks(dims, [&](std::int64_t first, std::int64_t pixels) {
      const NhwcLrnShape s = nhwc_shape(dims[1], V, pixels);
      const std::int64_t at = first * dims[1];
      lrn_forward_nhwc_kernel<T, V, SIZE><<<blocks_for(s.total), kThreads, 0, stream>>>(
          static_cast<const T*>(x) + at, static_cast<T*>(y) + at, s, p);
    });
  } else {
    throw Error("LRN kernel: no vectorised kernel for size " + std::to_string(p.size));
  }
}

template <typename T, int V, int SIZE>
void launch_backward(const void* x, const void* y, const void* dy, void* dx, std::array<std::int64_t, 4> dims,
                     LrnParameters p, float beta_dx, cudaStream_t stream) {
  if constexpr (SIZE <= V + 1) {
    if (p.size != SIZE) return launch_backward<T, V, SIZE + 1>(x, y, dy, dx, dims, p, beta_dx, stream);
    over_chunks(dims, [&](std::int64_t first, std::int64_t pixels) {
      const NhwcLrnShape s = nhwc_shape(dims[1], V, pixels);
      const std::int64_t at = first * dims[1];
      lrn_backward_nhwc_kernel<T, V, SIZE><<<blocks_for(s.total), kThreads, 0, stream>>>(
          static_cast<const T*>(x) + at, static_cast<const T*>(y) + at, static_cast<const T*>(dy) + at,
          static_cast<T*>(dx) + at, s, p, beta_dx);
    });
  } else {
    throw Error("LRN kernel: no vectorised kernel for size " + std::to_string(p.size));
  }
}

bool vectorized(DType type, std::array<std::int64_t, 4> dims, std::array<std::int64_t, 4> strides, int size,
                std::initializer_list<const void*> pointers) {
  return lrn_vectorized(type, dims, strides, size) && aligned16(pointers);
}

}  // namespace

bool lrn_vectorized(DType type, std::array<std::int64_t, 4> dims, std::array<std::int64_t, 4> strides, int size) {
  const int v = vector_width(type);
  const auto [n, c, h, w] = dims;
  const bool packed_nhwc = strides == std::array<std::int64_t, 4>{c * h * w, 1, w * c, c};
  return v > 0 && packed_nhwc && n * h * w > 0 && c % v == 0 && size >= 1 && size - 1 <= v &&
         c <= kChunkElements;
}

void lrn_forward(const void* x, void* y, DType type, std::array<std::int64_t, 4> dims,
                 std::array<std::int64_t, 4> strides, LrnParameters p, cudaStream_t stream) {
  if (vectorized(type, dims, strides, p.size, {x, y})) {
    with_storage_type(type, "lrn_forward", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      launch_forward<T, 16 / sizeof(T), 1>(x, y, dims, p, stream);
    });
    check_launch("lrn_forward (NHWC vectors)");
    return;
  }
  const Dims d{dims[0], dims[1], dims[2], dims[3]};
  const std::size_t shared = static_cast<std::size_t>(kLrnWarps * d.d1) * sizeof(float);
  lrn_forward_kernel<<<lrn_blocks(d.d0 * d.d2 * d.d3), kLrnWarps * 32, shared, stream>>>(
      x, y, type, d, Strides{strides[0], strides[1], strides[2], strides[3]}, p);
  check_launch("lrn_forward");
}

void lrn_backward(const void* x, const void* y, const void* dy, void* dx, DType type, std::array<std::int64_t, 4> dims,
                  std::array<std::int64_t, 4> strides, LrnParameters p, float beta_dx, cudaStream_t stream) {
  if (vectorized(type, dims, strides, p.size, {x, y, dy, dx})) {
    with_storage_type(type, "lrn_backward", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      launch_backward<T, 16 / sizeof(T), 1>(x, y, dy, dx, dims, p, beta_dx, stream);
    });
    check_launch("lrn_backward (NHWC vectors)");
    return;
  }
  const Dims d{dims[0], dims[1], dims[2], dims[3]};
  const std::size_t shared = static_cast<std::size_t>(kLrnWarps * 3 * d.d1) * sizeof(float);
  lrn_backward_kernel<<<lrn_blocks(d.d0 * d.d2 * d.d3), kLrnWarps * 32, shared, stream>>>(
      x, y, dy, dx, type, d, Strides{strides[0], strides[1], strides[2], strides[3]}, p, beta_dx);
  check_launch("lrn_backward");
}

}  // namespace crossbench::cudnn::kernels
