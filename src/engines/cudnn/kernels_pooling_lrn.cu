// kernels_pooling_lrn.hpp: the kernels and their launchers.
#include "engines/cudnn/kernels_pooling_lrn.hpp"

#include "engines/cudnn/kernel_support.cuh"

namespace crossbench::cudnn::kernels {
namespace {

// ---- NHWC max pooling -----------------------------------------------------------

// Max pooling, NHWC: one thread per (pixel, vector of V channels), V = 16
// bytes of channels where C allows (else 1): a flat grid of full blocks with
// 16-byte loads. (One block per pixel with a thread per channel, the first
// version, ran VGG-11's pool1 backward at batch 64 in bf16 in 2.7 ms on an
// H200: 3.2 million blocks of 64 threads.)
template <typename T, int V>
struct alignas(sizeof(T) * V) Lanes {
  T v[V];
};
template <int V>
struct alignas(V) LaneBytes {
  std::uint8_t b[V];
};

struct PoolShape {
  int channels, in_h, in_w, out_h, out_w;
  std::int64_t images;
};

template <typename T, int V>
__global__ void max_pool_nhwc_forward_kernel(const T* x, T* y, std::uint8_t* argmax, PoolShape s, PoolGeometry g) {
  const int vectors = s.channels / V;
  const std::int64_t total = s.images * s.out_h * s.out_w * vectors;
  for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(idx % vectors) * V;
    const std::int64_t pixel = idx / vectors;
    const int ow = static_cast<int>(pixel % s.out_w), oh = static_cast<int>(pixel / s.out_w % s.out_h);
    const std::int64_t n = pixel / (static_cast<std::int64_t>(s.out_w) * s.out_h);
    const int h0 = oh * g.stride - g.padding, w0 = ow * g.stride - g.padding;
    const int kh0 = h0 < 0 ? -h0 : 0, kw0 = w0 < 0 ? -w0 : 0;
    const int kh1 = min(g.kernel, s.in_h - h0), kw1 = min(g.kernel, s.in_w - w0);
    const std::int64_t image = n * s.in_h * s.in_w;
    float best[V];
    LaneBytes<V> where;
#pragma unroll
    for (int j = 0; j < V; ++j) {
      best[j] = -INFINITY;
      where.b[j] = 0;
    }
    for (int kh = kh0; kh < kh1; ++kh)
      for (int kw = kw0; kw < kw1; ++kw) {
        const std::int64_t at = (image + static_cast<std::int64_t>(h0 + kh) * s.in_w + (w0 + kw)) * s.channels + c;
        const Lanes<T, V> in = *reinterpret_cast<const Lanes<T, V>*>(x + at);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const float v = to_float(in.v[j]);
          if (v > best[j] || (isnan(v) && !isnan(best[j]))) {
            best[j] = v;
            where.b[j] = static_cast<std::uint8_t>(kh * g.kernel + kw);
          }
        }
      }
    const std::int64_t o = pixel * s.channels + c;
    Lanes<T, V> out;
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = from_float<T>(best[j]);
    *reinterpret_cast<Lanes<T, V>*>(y + o) = out;
    if (argmax != nullptr) *reinterpret_cast<LaneBytes<V>*>(argmax + o) = where;  // training only
  }
}

template <typename T, int V>
__global__ void max_pool_nhwc_backward_kernel(const T* dy, const std::uint8_t* argmax, T* dx, PoolShape s,
                                              PoolGeometry g, float beta) {
  const int vectors = s.channels / V;
  const std::int64_t total = s.images * s.in_h * s.in_w * vectors;
  for (std::int64_t idx = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(idx % vectors) * V;
    const std::int64_t pixel = idx / vectors;
    const int w = static_cast<int>(pixel % s.in_w), h = static_cast<int>(pixel / s.in_w % s.in_h);
    const std::int64_t n = pixel / (static_cast<std::int64_t>(s.in_w) * s.in_h);
    // Windows whose span [o * stride - padding, + kernel) holds h (and w).
    const int hp = h + g.padding, wp = w + g.padding;
    const int oh_lo = hp < g.kernel ? 0 : (hp - g.kernel) / g.stride + 1;
    const int ow_lo = wp < g.kernel ? 0 : (wp - g.kernel) / g.stride + 1;
    const int oh_hi = min(hp / g.stride, s.out_h - 1), ow_hi = min(wp / g.stride, s.out_w - 1);
    const std::int64_t image = n * s.out_h * s.out_w;
    float sum[V];
#pragma unroll
    for (int j = 0; j < V; ++j) sum[j] = 0;
    for (int oh = oh_lo; oh <= oh_hi; ++oh)
      for (int ow = ow_lo; ow <= ow_hi; ++ow) {
        const std::int64_t o = (image + static_cast<std::int64_t>(oh) * s.out_w + ow) * s.channels + c;
        const int position = (hp - oh * g.stride) * g.kernel + (wp - ow * g.stride);
        const LaneBytes<V> where = *reinterpret_cast<const LaneBytes<V>*>(argmax + o);
        const Lanes<T, V> gradient = *reinterpret_cast<const Lanes<T, V>*>(dy + o);
#pragma unroll
        for (int j = 0; j < V; ++j)
          if (where.b[j] == position) sum[j] += to_float(gradient.v[j]);
      }
    const std::int64_t i = pixel * s.channels + c;
    Lanes<T, V> out;
    if (beta != 0.0f) out = *reinterpret_cast<const Lanes<T, V>*>(dx + i);
#pragma unroll
    for (int j = 0; j < V; ++j) out.v[j] = from_float<T>(beta != 0.0f ? sum[j] + beta * to_float(out.v[j]) : sum[j]);
    *reinterpret_cast<Lanes<T, V>*>(dx + i) = out;
  }
}

}  // namespace

namespace {
PoolShape pool_shape(std::array<std::int64_t, 4> in, std::array<std::int64_t, 4> out) {
  return {static_cast<int>(in[1]), static_cast<int>(in[2]), static_cast<int>(in[3]), static_cast<int>(out[2]),
          static_cast<int>(out[3]), in[0]};
}

template <typename T, int V>
struct PoolForward {
  static void run(const void* x, void* y, std::uint8_t* argmax, PoolShape s, PoolGeometry g, cudaStream_t stream) {
    const std::int64_t total = s.images * s.out_h * s.out_w * (s.channels / V);
    max_pool_nhwc_forward_kernel<T, V><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(x),
                                                                                  static_cast<T*>(y), argmax, s, g);
  }
};

template <typename T, int V>
struct PoolBackward {
  static void run(const void* dy, const std::uint8_t* argmax, void* dx, PoolShape s, PoolGeometry g, float beta,
                  cudaStream_t stream) {
    const std::int64_t total = s.images * s.in_h * s.in_w * (s.channels / V);
    max_pool_nhwc_backward_kernel<T, V><<<blocks_for(total), kThreads, 0, stream>>>(
        static_cast<const T*>(dy), argmax, static_cast<T*>(dx), s, g, beta);
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
                           std::array<std::int64_t, 4> out, PoolGeometry g, cudaStream_t stream) {
  dispatch_pool<PoolForward>(type, in[1], aligned16({x, y}), argmax, x, y, argmax, pool_shape(in, out), g, stream);
  check_launch("max_pool_nhwc_forward");
}

void max_pool_nhwc_backward(const void* dy, const std::uint8_t* argmax, void* dx, DType type,
                            std::array<std::int64_t, 4> in, std::array<std::int64_t, 4> out, PoolGeometry g, float beta,
                            cudaStream_t stream) {
  dispatch_pool<PoolBackward>(type, in[1], aligned16({dy, dx}), argmax, dy, argmax, dx, pool_shape(in, out), g, beta,
                              stream);
  check_launch("max_pool_nhwc_backward");
}

}  // namespace crossbench::cudnn::kernels
