// CUDA kernels of the cuDNN engine (see kernels.hpp). Arithmetic that must
// match the CPU bit for bit (the synthetic generator) uses explicitly
// rounded intrinsics (__fmul_rn, __fsub_rn) so that nvcc cannot contract it
// into an FMA with a different rounding.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <limits>
#include <string>

#include "crossbench/error.hpp"
#include "engines/cudnn/compat.hpp"
#include "engines/cudnn/kernels.hpp"

namespace crossbench::cudnn::kernels {
namespace {

constexpr std::uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ULL;
constexpr int kThreads = 256;

__device__ __forceinline__ std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

__device__ __forceinline__ std::uint64_t stream_state(std::uint64_t seed, std::uint64_t tensor_id) {
  return mix(seed ^ (tensor_id * kGoldenGamma));
}

__device__ __forceinline__ float unit(std::uint64_t state, std::uint64_t index) {
  const std::uint64_t bits = mix(state + (index + 1) * kGoldenGamma);
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);  // exact: 24 bits times a power of two
}

// Loads and stores in fp32 for the three storage types.
__device__ __forceinline__ float load(const void* p, DType type, std::int64_t i) {
  switch (type) {
    case DType::f16: return __half2float(static_cast<const __half*>(p)[i]);
    case DType::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void store(void* p, DType type, std::int64_t i, float v) {
  switch (type) {
    case DType::f16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    case DType::bf16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    default: static_cast<float*>(p)[i] = v; break;
  }
}

struct Dims {
  std::int64_t d0, d1, d2, d3;
};

// Canonical flat index (d0, d1, d2, d3) of physical element p.
__device__ __forceinline__ std::int64_t canonical_index(std::int64_t p, Dims d, bool channels_last) {
  if (!channels_last) return p;
  const std::int64_t c = p % d.d1;
  std::int64_t rest = p / d.d1;
  const std::int64_t w = rest % d.d3;
  rest /= d.d3;
  const std::int64_t h = rest % d.d2;
  const std::int64_t n = rest / d.d2;
  return ((n * d.d1 + c) * d.d2 + h) * d.d3 + w;
}

unsigned blocks_for(std::int64_t count) {
  const std::int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535LL * 32 ? 65535LL * 32 : blocks));
}

void check_launch(const char* what) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    throw_library_error("CUDA", std::string("kernel launch ") + what, __FILE__, __LINE__, cudaGetErrorString(status),
                        status == cudaErrorMemoryAllocation);
}

__global__ void fill_synthetic_kernel(void* dst, DType type, Dims dims, bool channels_last, std::uint64_t state,
                                      float scale, std::int64_t count, std::int64_t stored_d1,
                                      std::uint64_t first_index) {
  for (std::int64_t q = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; q < count;
       q += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::int64_t p = q;
    if (stored_d1 > dims.d1) {  // channels-last with padded channels: q = pixel * stored_d1 + c
      const std::int64_t c = q % stored_d1;
      if (c >= dims.d1) {
        store(dst, type, q, 0.0f);
        continue;
      }
      p = q / stored_d1 * dims.d1 + c;
    }
    const std::int64_t i = canonical_index(p, dims, channels_last);
    const float centred = __fsub_rn(__fmul_rn(2.0f, unit(state, first_index + static_cast<std::uint64_t>(i))), 1.0f);
    store(dst, type, q, __fmul_rn(scale, centred));
  }
}

__global__ void fill_constant_kernel(void* dst, DType type, std::int64_t count, float value) {
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < count;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    store(dst, type, p, value);
}

__global__ void dropout_forward_kernel(const void* x, void* y, std::uint8_t* mask, DType type, Dims dims,
                                       bool channels_last, std::uint64_t seed, std::uint64_t mask_tensor_id,
                                       const std::uint64_t* step, double rate, float scale, std::int64_t count,
                                       std::uint64_t first_index) {
  const std::uint64_t state = stream_state(seed, mask_tensor_id + (*step << 32));
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < count;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i = canonical_index(p, dims, channels_last);
    const bool kept = static_cast<double>(unit(state, first_index + static_cast<std::uint64_t>(i))) >= rate;
    mask[p] = kept ? 1 : 0;
    store(y, type, p, kept ? load(x, type, p) * scale : 0.0f);
  }
}

__global__ void dropout_backward_kernel(const void* dy, void* dx, const std::uint8_t* mask, DType type,
                                        std::int64_t count, float scale, float beta) {
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < count;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    float v = mask[p] ? load(dy, type, p) * scale : 0.0f;
    if (beta != 0.0f) v += beta * load(dx, type, p);
    store(dx, type, p, v);
  }
}

__global__ void increment_kernel(std::uint64_t* counter) { *counter += 1; }

// One block per row of log-probabilities.
__global__ void nll_kernel(const float* logp, const std::int32_t* labels, float* row_loss, void* dlogits,
                           DType dlogits_type, std::int64_t classes, float inverse_rows) {
  const std::int64_t row = blockIdx.x;
  const std::int32_t label = labels[row];
  const float* lp = logp + row * classes;
  if (threadIdx.x == 0) row_loss[row] = -lp[label];
  if (dlogits == nullptr) return;
  for (std::int64_t k = threadIdx.x; k < classes; k += blockDim.x) {
    const float p = expf(lp[k]);
    store(dlogits, dlogits_type, row * classes + k, (p - (k == label ? 1.0f : 0.0f)) * inverse_rows);
  }
}

__global__ void add_bias_kernel(void* y, DType y_type, const void* bias, DType bias_type, std::int64_t rows,
                                std::int64_t features) {
  const std::int64_t count = rows * features;
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < count;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    store(y, y_type, p, load(y, y_type, p) + load(bias, bias_type, p % features));
}

// One thread per feature, a loop over the (few) rows: coalesced across threads.
__global__ void bias_gradient_kernel(const void* dy, DType dy_type, void* db, DType db_type, std::int64_t rows,
                                     std::int64_t features) {
  const std::int64_t j = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (j >= features) return;
  float sum = 0.0f;
  for (std::int64_t n = 0; n < rows; ++n) sum += load(dy, dy_type, n * features + j);
  store(db, db_type, j, sum);
}

struct Strides {
  std::int64_t s0, s1, s2, s3;
};

__global__ void strided_add_kernel(const void* x, Strides xs, void* y, Strides ys, Dims d, DType type, float beta,
                                   std::int64_t count) {
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < count;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i3 = p % d.d3, i2 = p / d.d3 % d.d2, i1 = p / (d.d3 * d.d2) % d.d1, i0 = p / (d.d3 * d.d2 * d.d1);
    const std::int64_t xi = i0 * xs.s0 + i1 * xs.s1 + i2 * xs.s2 + i3 * xs.s3;
    const std::int64_t yi = i0 * ys.s0 + i1 * ys.s1 + i2 * ys.s2 + i3 * ys.s3;
    float v = load(x, type, xi);
    if (beta != 0.0f) v += beta * load(y, type, yi);
    store(y, type, yi, v);
  }
}

// Column sums of a packed NHWC tensor seen as rows (N*H*W) x columns (C):
// threads along x read consecutive channels (coalesced), along y rows.
__global__ void channel_sum_nhwc_kernel(const void* x, DType type, std::int64_t rows, std::int64_t channels,
                                        float* accumulator) {
  __shared__ float partial[8][33];
  const std::int64_t c = blockIdx.x * 32 + threadIdx.x;
  float sum = 0;
  if (c < channels)
    for (std::int64_t r = blockIdx.y * 8 + threadIdx.y; r < rows; r += static_cast<std::int64_t>(gridDim.y) * 8)
      sum += load(x, type, r * channels + c);
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < channels) {
    for (int i = 1; i < 8; ++i) sum += partial[i][threadIdx.x];
    atomicAdd(accumulator + c, sum);
  }
}

// Contiguous (H, W) planes (NCHW, and NCHW slices): one block per (n, c) plane,
// no per-element index arithmetic.
__global__ void channel_sum_planes_kernel(const void* x, DType type, std::int64_t images, std::int64_t channels,
                                          std::int64_t plane_elements, std::int64_t image_stride,
                                          std::int64_t channel_stride, float* accumulator) {
  __shared__ float partial[kThreads];
  for (std::int64_t plane = blockIdx.x; plane < images * channels; plane += gridDim.x) {
    const std::int64_t n = plane / channels, c = plane % channels;
    const std::int64_t base = n * image_stride + c * channel_stride;
    float sum = 0;
    for (std::int64_t i = threadIdx.x; i < plane_elements; i += blockDim.x) sum += load(x, type, base + i);
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
      if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
      __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(accumulator + c, partial[0]);
    __syncthreads();  // partial is reused by the next plane
  }
}

// Any strides: one block row per channel, blocks along the channel's elements.
__global__ void channel_sum_strided_kernel(const void* x, DType type, Dims d, Strides s, float* accumulator) {
  __shared__ float partial[kThreads];
  const std::int64_t c = blockIdx.y;
  const std::int64_t per_channel = d.d0 * d.d2 * d.d3;
  float sum = 0;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < per_channel;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t w = i % d.d3, h = i / d.d3 % d.d2, n = i / (d.d3 * d.d2);
    sum += load(x, type, n * s.s0 + c * s.s1 + h * s.s2 + w * s.s3);
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(accumulator + c, partial[0]);
}

__global__ void store_floats_kernel(const float* from, void* to, DType type, std::int64_t count) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < count) store(to, type, i, from[i]);
}

// ---- Convolution epilogue and batch-norm folding ----------------------------------

template <typename T>
__device__ __forceinline__ float to_float(T v) { return static_cast<float>(v); }
template <>
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
template <>
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T>
__device__ __forceinline__ T from_float(float v) { return static_cast<T>(v); }
template <>
__device__ __forceinline__ __half from_float(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }

// relu that keeps NaN (a NaN compares false).
__device__ __forceinline__ float epilogue(float v, float bias, bool relu) {
  v += bias;
  return relu && v < 0.0f ? 0.0f : v;
}

// Packed NHWC, 16 bytes per thread (channels a multiple of the vector): the
// channel of a vector's first element is its flat index modulo C. Index is
// 32-bit where the tensor allows (64-bit division is slow on the GPU).
template <typename T, typename Index>
__global__ void bias_activation_nhwc_vector_kernel(T* y, const T* bias, Index vectors, Index channels, bool relu) {
  constexpr int kVector = 16 / sizeof(T);
  for (Index v = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; v < vectors;
       v += static_cast<Index>(gridDim.x) * blockDim.x) {
    const Index c = (v * kVector) % channels;
    uint4 data = reinterpret_cast<const uint4*>(y)[v];
    const uint4 shift = *reinterpret_cast<const uint4*>(bias + c);
    T* values = reinterpret_cast<T*>(&data);
    const T* b = reinterpret_cast<const T*>(&shift);
#pragma unroll
    for (int j = 0; j < kVector; ++j) values[j] = from_float<T>(epilogue(to_float(values[j]), to_float(b[j]), relu));
    reinterpret_cast<uint4*>(y)[v] = data;
  }
}

template <typename T, typename Index>
__global__ void bias_activation_nhwc_kernel(T* y, const T* bias, Index count, Index channels, bool relu) {
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<Index>(gridDim.x) * blockDim.x)
    y[i] = from_float<T>(epilogue(to_float(y[i]), to_float(bias[i % channels]), relu));
}

template <typename T, typename Index>
__global__ void add_relu_vector_kernel(const T* a, const T* b, T* y, Index vectors) {
  constexpr int kVector = 16 / sizeof(T);
  for (Index v = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; v < vectors;
       v += static_cast<Index>(gridDim.x) * blockDim.x) {
    uint4 x = reinterpret_cast<const uint4*>(a)[v];
    const uint4 z = reinterpret_cast<const uint4*>(b)[v];
    T* xs = reinterpret_cast<T*>(&x);
    const T* zs = reinterpret_cast<const T*>(&z);
#pragma unroll
    for (int j = 0; j < kVector; ++j) xs[j] = from_float<T>(epilogue(to_float(xs[j]), to_float(zs[j]), true));
    reinterpret_cast<uint4*>(y)[v] = x;
  }
}

template <typename T, typename Index>
__global__ void add_relu_kernel(const T* a, const T* b, T* y, Index count) {
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<Index>(gridDim.x) * blockDim.x)
    y[i] = from_float<T>(epilogue(to_float(a[i]), to_float(b[i]), true));
}

// Contiguous (H, W) planes: one block per (n, c) plane, one bias per block.
template <typename T>
__global__ void bias_activation_planes_kernel(T* y, const T* bias, std::int64_t planes, std::int64_t channels,
                                              std::int64_t plane_elements, std::int64_t image_stride,
                                              std::int64_t channel_stride, bool relu) {
  for (std::int64_t p = blockIdx.x; p < planes; p += gridDim.x) {
    const std::int64_t n = p / channels, c = p % channels;
    T* plane = y + n * image_stride + c * channel_stride;
    const float b = to_float(bias[c]);
    for (std::int64_t i = threadIdx.x; i < plane_elements; i += blockDim.x)
      plane[i] = from_float<T>(epilogue(to_float(plane[i]), b, relu));
  }
}

__device__ __forceinline__ double folded_scale(const BatchNormStatistics& bn, std::int64_t o) {
  return static_cast<double>(bn.gamma[o]) / sqrt(static_cast<double>(bn.variance[o]) + bn.epsilon);
}

__global__ void fold_shift_kernel(std::int64_t out_channels, const void* conv_bias, void* shift, DType type,
                                  BatchNormStatistics bn) {
  const std::int64_t o = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (o >= out_channels) return;
  const double b = conv_bias != nullptr ? static_cast<double>(load(conv_bias, type, o)) : 0.0;
  store(shift, type, o, static_cast<float>((b - static_cast<double>(bn.mean[o])) * folded_scale(bn, o) + bn.beta[o]));
}

__global__ void fold_weights_kernel(void* w, DType type, std::int64_t count, std::int64_t per_output,
                                    BatchNormStatistics bn) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    store(w, type, i, static_cast<float>(static_cast<double>(load(w, type, i)) * folded_scale(bn, i / per_output)));
}

// ---- im2col: one block per (image, filter tap) row ----------------------------------

// Row t = (n, crs) of the column matrix holds the P*Q positions contiguously at
// t * P*Q; rows crs >= C*R*S (the padding to `padded_taps`) are zero. In-plane
// arithmetic is 32-bit (im2col() keeps planes below 2^31 elements): 64-bit
// division per element made this kernel compute-bound.
__global__ void im2col_kernel(const float* x, std::int64_t rows, int channels_taps, int padded_taps, int height,
                              int width, std::int64_t x_image_stride, std::int64_t x_channel_stride, int x_row_stride,
                              ConvolutionGeometry g, float* columns) {
  const int taps = g.kernel * g.kernel;
  const int out_w = static_cast<int>(g.out_w), positions = static_cast<int>(g.out_h * g.out_w);
  for (std::int64_t t = blockIdx.x; t < rows; t += gridDim.x) {
    const std::int64_t n = t / padded_taps;
    const int crs = static_cast<int>(t - n * padded_taps);
    float* row = columns + t * positions;
    if (crs >= channels_taps) {
      for (int pq = threadIdx.x; pq < positions; pq += blockDim.x) row[pq] = 0.0f;
      continue;
    }
    const int c = crs / taps, r = (crs % taps) / g.kernel, s = crs % g.kernel;
    const float* plane = x + n * x_image_stride + c * x_channel_stride;
    for (int pq = threadIdx.x; pq < positions; pq += blockDim.x) {
      const int p = pq / out_w, q = pq - p * out_w;
      const int ih = p * g.stride - g.padding + r, iw = q * g.stride - g.padding + s;
      row[pq] = ih >= 0 && ih < height && iw >= 0 && iw < width ? plane[ih * x_row_stride + iw] : 0.0f;
    }
  }
}

__global__ void pad_rows_kernel(const float* src, std::int64_t rows, std::int64_t length, std::int64_t padded_length,
                                float* dst) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < rows * padded_length;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / padded_length, column = i % padded_length;
    dst[i] = column < length ? src[row * length + column] : 0.0f;
  }
}

// dst[row][column] = sum over m of partials[m][row][column] (padded rows), in order of m.
__global__ void sum_padded_matrices_kernel(const float* partials, std::int64_t matrices, std::int64_t rows,
                                           std::int64_t length, std::int64_t padded_length, float* dst) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < rows * length;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / length, column = i % length;
    const float* from = partials + row * padded_length + column;
    float sum = 0;
    for (std::int64_t m = 0; m < matrices; ++m) sum += from[m * rows * padded_length];
    dst[i] = sum;
  }
}

// ---- LRN: one warp per pixel; the pixel's channels in shared memory ----------------

constexpr int kLrnWarps = 4;

struct Pixel {
  std::int64_t base;  // element offset of channel 0
  std::int64_t step;  // elements between channels
};

__device__ __forceinline__ Pixel pixel_of(std::int64_t pixel, Dims d, Strides s) {
  const std::int64_t w = pixel % d.d3, h = pixel / d.d3 % d.d2, n = pixel / (d.d3 * d.d2);
  return {n * s.s0 + h * s.s2 + w * s.s3, s.s1};
}

__global__ void lrn_forward_kernel(const void* x, void* y, DType type, Dims d, Strides s, LrnParameters p) {
  extern __shared__ float shared[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t channels = d.d1, pixels = d.d0 * d.d2 * d.d3;
  float* sx = shared + warp * channels;
  const int before = (p.size - 1) / 2;
  const float scale_alpha = p.alpha / static_cast<float>(p.size);
  for (std::int64_t pixel = blockIdx.x * static_cast<std::int64_t>(kLrnWarps) + warp; pixel < pixels;
       pixel += static_cast<std::int64_t>(gridDim.x) * kLrnWarps) {
    const Pixel px = pixel_of(pixel, d, s);
    for (std::int64_t c = lane; c < channels; c += 32) sx[c] = load(x, type, px.base + c * px.step);
    __syncwarp();
    for (std::int64_t c = lane; c < channels; c += 32) {
      float sum = 0;
      const std::int64_t lo = c - before, hi = lo + p.size - 1;
      for (std::int64_t j = lo < 0 ? 0 : lo; j <= hi && j < channels; ++j) sum += sx[j] * sx[j];
      store(y, type, px.base + c * px.step, sx[c] * powf(p.k + scale_alpha * sum, -p.beta));
    }
    __syncwarp();
  }
}

__global__ void lrn_backward_kernel(const void* x, const void* y, const void* dy, void* dx, DType type, Dims d,
                                    Strides s, LrnParameters p, float beta_dx) {
  extern __shared__ float shared[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t channels = d.d1, pixels = d.d0 * d.d2 * d.d3;
  float* sx = shared + warp * 3 * channels;  // x, then scale, then dy * y / scale
  float* ss = sx + channels;
  float* st = ss + channels;
  const int before = (p.size - 1) / 2, after = p.size - 1 - before;
  const float scale_alpha = p.alpha / static_cast<float>(p.size);
  const float factor = 2.0f * p.alpha * p.beta / static_cast<float>(p.size);
  for (std::int64_t pixel = blockIdx.x * static_cast<std::int64_t>(kLrnWarps) + warp; pixel < pixels;
       pixel += static_cast<std::int64_t>(gridDim.x) * kLrnWarps) {
    const Pixel px = pixel_of(pixel, d, s);
    for (std::int64_t c = lane; c < channels; c += 32) sx[c] = load(x, type, px.base + c * px.step);
    __syncwarp();
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
      float v = load(dy, type, at) * powf(ss[c], -p.beta) - factor * sx[c] * sum;
      if (beta_dx != 0.0f) v += beta_dx * load(dx, type, at);
      store(dx, type, at, v);
    }
    __syncwarp();
  }
}

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

__global__ void sgd_kernel(void* w, const void* g, DType type, std::int64_t count, float rate) {
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < count;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    store(w, type, p, load(w, type, p) - rate * load(g, type, p));
}

__global__ void sum_of_squares_kernel(const void* x, DType type, std::int64_t count, double* out,
                                      unsigned long long* non_finite) {
  __shared__ double partial[kThreads];
  double sum = 0;
  unsigned long long bad = 0;
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < count;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const double v = load(x, type, p);
    if (!isfinite(v)) ++bad;
    sum += v * v;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) compat::atomic_add(out, partial[0]);  // doubles: native from sm_60
  if (bad != 0) atomicAdd(non_finite, bad);
}

}  // namespace

void fill_synthetic(void* dst, DType type, std::array<std::int64_t, 4> canonical_dims, bool channels_last,
                    std::uint64_t seed, std::uint64_t tensor_id, float scale, cudaStream_t stream,
                    std::int64_t stored_d1, std::uint64_t first_index) {
  const Dims d{canonical_dims[0], canonical_dims[1], canonical_dims[2], canonical_dims[3]};
  if (stored_d1 <= d.d1 || !channels_last) stored_d1 = 0;
  const std::int64_t count = d.d0 * (stored_d1 > 0 ? stored_d1 : d.d1) * d.d2 * d.d3;
  if (count == 0) return;
  // The stream state is computed on the host: the same splitmix64 finaliser.
  auto host_mix = [](std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  };
  const std::uint64_t state = host_mix(seed ^ (tensor_id * kGoldenGamma));
  fill_synthetic_kernel<<<blocks_for(count), kThreads, 0, stream>>>(dst, type, d, channels_last, state, scale, count,
                                                                     stored_d1, first_index);
  check_launch("fill_synthetic");
}

void fill_constant(void* dst, DType type, std::int64_t count, float value, cudaStream_t stream) {
  if (count == 0) return;
  fill_constant_kernel<<<blocks_for(count), kThreads, 0, stream>>>(dst, type, count, value);
  check_launch("fill_constant");
}

void dropout_forward(const void* x, void* y, std::uint8_t* mask, DType type, std::array<std::int64_t, 4> dims,
                     bool channels_last, std::uint64_t seed, std::uint64_t mask_tensor_id, const std::uint64_t* step,
                     double rate, cudaStream_t stream, std::uint64_t first_index) {
  const Dims d{dims[0], dims[1], dims[2], dims[3]};
  const std::int64_t count = d.d0 * d.d1 * d.d2 * d.d3;
  const float scale = static_cast<float>(1.0 / (1.0 - rate));
  dropout_forward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(x, y, mask, type, d, channels_last, seed,
                                                                     mask_tensor_id, step, rate, scale, count,
                                                                     first_index);
  check_launch("dropout_forward");
}

void dropout_backward(const void* dy, void* dx, const std::uint8_t* mask, DType type, std::int64_t count,
                      double rate, float beta, cudaStream_t stream) {
  const float scale = static_cast<float>(1.0 / (1.0 - rate));
  dropout_backward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(dy, dx, mask, type, count, scale, beta);
  check_launch("dropout_backward");
}

void increment(std::uint64_t* counter, cudaStream_t stream) {
  increment_kernel<<<1, 1, 0, stream>>>(counter);
  check_launch("increment");
}

void nll(const float* logp, const std::int32_t* labels, float* row_loss, void* dlogits, DType dlogits_type,
         std::int64_t rows, std::int64_t classes, cudaStream_t stream) {
  nll_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logp, labels, row_loss, dlogits, dlogits_type,
                                                                   classes, 1.0f / static_cast<float>(rows));
  check_launch("nll");
}

void add_bias(void* y, DType y_type, const void* bias, DType bias_type, std::int64_t rows, std::int64_t features,
              cudaStream_t stream) {
  add_bias_kernel<<<blocks_for(rows * features), kThreads, 0, stream>>>(y, y_type, bias, bias_type, rows, features);
  check_launch("add_bias");
}

void bias_gradient(const void* dy, DType dy_type, void* db, DType db_type, std::int64_t rows, std::int64_t features,
                   cudaStream_t stream) {
  bias_gradient_kernel<<<blocks_for(features), kThreads, 0, stream>>>(dy, dy_type, db, db_type, rows, features);
  check_launch("bias_gradient");
}

void strided_add(const void* x, std::array<std::int64_t, 4> x_strides, void* y, std::array<std::int64_t, 4> y_strides,
                 std::array<std::int64_t, 4> dims, DType type, float beta, cudaStream_t stream) {
  const Dims d{dims[0], dims[1], dims[2], dims[3]};
  const std::int64_t count = d.d0 * d.d1 * d.d2 * d.d3;
  if (count == 0) return;
  strided_add_kernel<<<blocks_for(count), kThreads, 0, stream>>>(
      x, Strides{x_strides[0], x_strides[1], x_strides[2], x_strides[3]}, y,
      Strides{y_strides[0], y_strides[1], y_strides[2], y_strides[3]}, d, type, beta, count);
  check_launch("strided_add");
}

void channel_sum(const void* x, DType type, std::array<std::int64_t, 4> dims, std::array<std::int64_t, 4> strides,
                 float* accumulator, void* out, DType out_type, cudaStream_t stream) {
  const Dims d{dims[0], dims[1], dims[2], dims[3]};
  const std::int64_t channels = d.d1, rows = d.d0 * d.d2 * d.d3;
  if (cudaMemsetAsync(accumulator, 0, static_cast<std::size_t>(channels) * sizeof(float), stream) != cudaSuccess)
    check_launch("channel_sum memset");
  const bool nhwc_packed = strides[1] == 1 && strides[3] == d.d1 && strides[2] == d.d1 * d.d3 &&
                           strides[0] == d.d1 * d.d3 * d.d2;
  const bool planes = strides[3] == 1 && strides[2] == d.d3;
  if (nhwc_packed) {
    const std::int64_t row_blocks = (rows + 63) / 64;
    const dim3 grid(static_cast<unsigned>((channels + 31) / 32), static_cast<unsigned>(row_blocks > 1024 ? 1024 : row_blocks));
    channel_sum_nhwc_kernel<<<grid, dim3(32, 8), 0, stream>>>(x, type, rows, channels, accumulator);
  } else if (planes) {
    const std::int64_t plane_count = d.d0 * channels;
    channel_sum_planes_kernel<<<static_cast<unsigned>(std::min<std::int64_t>(plane_count, 1LL << 20)), kThreads, 0,
                                stream>>>(x, type, d.d0, channels, d.d2 * d.d3, strides[0], strides[1], accumulator);
  } else {
    const std::int64_t blocks = (rows + kThreads - 1) / kThreads;
    const dim3 grid(static_cast<unsigned>(blocks > 64 ? 64 : blocks), static_cast<unsigned>(channels));
    channel_sum_strided_kernel<<<grid, kThreads, 0, stream>>>(
        x, type, d, Strides{strides[0], strides[1], strides[2], strides[3]}, accumulator);
  }
  check_launch("channel_sum");
  store_floats_kernel<<<static_cast<unsigned>((channels + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      accumulator, out, out_type, channels);
  check_launch("channel_sum store");
}

namespace {
unsigned lrn_blocks(std::int64_t pixels) {
  const std::int64_t blocks = (pixels + kLrnWarps - 1) / kLrnWarps;
  return static_cast<unsigned>(blocks > 65535LL * 16 ? 65535LL * 16 : blocks);
}
}  // namespace

void lrn_forward(const void* x, void* y, DType type, std::array<std::int64_t, 4> dims,
                 std::array<std::int64_t, 4> strides, LrnParameters p, cudaStream_t stream) {
  const Dims d{dims[0], dims[1], dims[2], dims[3]};
  const std::size_t shared = static_cast<std::size_t>(kLrnWarps * d.d1) * sizeof(float);
  lrn_forward_kernel<<<lrn_blocks(d.d0 * d.d2 * d.d3), kLrnWarps * 32, shared, stream>>>(
      x, y, type, d, Strides{strides[0], strides[1], strides[2], strides[3]}, p);
  check_launch("lrn_forward");
}

void lrn_backward(const void* x, const void* y, const void* dy, void* dx, DType type, std::array<std::int64_t, 4> dims,
                  std::array<std::int64_t, 4> strides, LrnParameters p, float beta_dx, cudaStream_t stream) {
  const Dims d{dims[0], dims[1], dims[2], dims[3]};
  const std::size_t shared = static_cast<std::size_t>(kLrnWarps * 3 * d.d1) * sizeof(float);
  lrn_backward_kernel<<<lrn_blocks(d.d0 * d.d2 * d.d3), kLrnWarps * 32, shared, stream>>>(
      x, y, dy, dx, type, d, Strides{strides[0], strides[1], strides[2], strides[3]}, p, beta_dx);
  check_launch("lrn_backward");
}

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

void im2col(const float* x, std::array<std::int64_t, 4> dims, std::array<std::int64_t, 4> x_strides,
            ConvolutionGeometry g, std::int64_t padded_taps, float* columns, cudaStream_t stream) {
  constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();
  if (x_strides[3] != 1) throw Error("im2col: the input's rows are not contiguous");
  const std::int64_t channels_taps = dims[1] * g.kernel * g.kernel, rows = dims[0] * padded_taps;
  if (padded_taps < channels_taps || padded_taps > kIntMax || dims[2] * x_strides[2] > kIntMax ||
      g.out_h * g.out_w > kIntMax)
    throw Error("im2col: a plane beyond 2^31 - 1 elements, or fewer padded taps than taps");
  if (rows == 0 || g.out_h * g.out_w == 0) return;
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(rows, std::int64_t{1} << 30));
  im2col_kernel<<<blocks, kThreads, 0, stream>>>(x, rows, static_cast<int>(channels_taps),
                                                 static_cast<int>(padded_taps), static_cast<int>(dims[2]),
                                                 static_cast<int>(dims[3]), x_strides[0], x_strides[1],
                                                 static_cast<int>(x_strides[2]), g, columns);
  check_launch("im2col");
}

void pad_rows(const float* src, std::int64_t rows, std::int64_t length, std::int64_t padded_length, float* dst,
              cudaStream_t stream) {
  const std::int64_t count = rows * padded_length;
  if (count == 0) return;
  pad_rows_kernel<<<blocks_for(count), kThreads, 0, stream>>>(src, rows, length, padded_length, dst);
  check_launch("pad_rows");
}

void sum_padded_matrices(const float* partials, std::int64_t matrices, std::int64_t rows, std::int64_t length,
                         std::int64_t padded_length, float* dst, cudaStream_t stream) {
  const std::int64_t count = rows * length;
  if (count == 0) return;
  sum_padded_matrices_kernel<<<blocks_for(count), kThreads, 0, stream>>>(partials, matrices, rows, length,
                                                                         padded_length, dst);
  check_launch("sum_padded_matrices");
}

void sgd(void* w, const void* g, DType type, std::int64_t count, float rate, cudaStream_t stream) {
  sgd_kernel<<<blocks_for(count), kThreads, 0, stream>>>(w, g, type, count, rate);
  check_launch("sgd");
}

void sum_of_squares(const void* x, DType type, std::int64_t count, double* out, unsigned long long* non_finite,
                    cudaStream_t stream) {
  if (count == 0) return;
  const std::int64_t blocks = (count + kThreads - 1) / kThreads;
  sum_of_squares_kernel<<<static_cast<unsigned>(blocks > 1024 ? 1024 : blocks), kThreads, 0, stream>>>(
      x, type, count, out, non_finite);
  check_launch("sum_of_squares");
}

bool bias_activation_supported(std::array<std::int64_t, 4> dims, std::array<std::int64_t, 4> strides) {
  const auto [n, c, h, w] = dims;
  const bool nhwc_packed = strides[1] == 1 && strides[3] == c && strides[2] == c * w && strides[0] == c * w * h;
  const bool planes = strides[3] == 1 && strides[2] == w;
  return nhwc_packed || planes;
}

namespace {
template <typename T>
void launch_bias_activation(void* y_bytes, std::array<std::int64_t, 4> dims, std::array<std::int64_t, 4> strides,
                            const void* bias_bytes, bool relu, cudaStream_t stream) {
  T* y = static_cast<T*>(y_bytes);
  const T* bias = static_cast<const T*>(bias_bytes);
  const auto [n, c, h, w] = dims;
  const std::int64_t count = n * c * h * w;
  if (count == 0) return;
  const bool nhwc_packed = strides[1] == 1 && strides[3] == c && strides[2] == c * w && strides[0] == c * w * h;
  if (nhwc_packed) {
    constexpr std::int64_t kVector = 16 / sizeof(T);
    const bool aligned = reinterpret_cast<std::uintptr_t>(y) % 16 == 0 && reinterpret_cast<std::uintptr_t>(bias) % 16 == 0;
    const bool small = count < (std::int64_t{1} << 31);
    if (aligned && c % kVector == 0) {
      const std::int64_t vectors = count / kVector;
      if (small)
        bias_activation_nhwc_vector_kernel<T, std::int32_t><<<blocks_for(vectors), kThreads, 0, stream>>>(
            y, bias, static_cast<std::int32_t>(vectors), static_cast<std::int32_t>(c), relu);
      else
        bias_activation_nhwc_vector_kernel<T, std::int64_t><<<blocks_for(vectors), kThreads, 0, stream>>>(
            y, bias, vectors, c, relu);
    } else if (small) {
      bias_activation_nhwc_kernel<T, std::int32_t><<<blocks_for(count), kThreads, 0, stream>>>(
          y, bias, static_cast<std::int32_t>(count), static_cast<std::int32_t>(c), relu);
    } else {
      bias_activation_nhwc_kernel<T, std::int64_t><<<blocks_for(count), kThreads, 0, stream>>>(y, bias, count, c, relu);
    }
  } else {
    const std::int64_t planes = n * c;
    const unsigned blocks = static_cast<unsigned>(planes < (1 << 20) ? planes : (1 << 20));
    const int threads = h * w >= 256 ? 256 : 128;
    bias_activation_planes_kernel<T><<<blocks, threads, 0, stream>>>(y, bias, planes, c, h * w, strides[0], strides[1],
                                                                      relu);
  }
}
}  // namespace

void bias_activation(void* y, DType type, std::array<std::int64_t, 4> dims, std::array<std::int64_t, 4> strides,
                     const void* bias, bool relu, cudaStream_t stream) {
  if (!bias_activation_supported(dims, strides))
    throw Error("bias_activation: a tensor layout other than packed NHWC or contiguous planes");
  switch (type) {
    case DType::f16: launch_bias_activation<__half>(y, dims, strides, bias, relu, stream); break;
    case DType::bf16: launch_bias_activation<__nv_bfloat16>(y, dims, strides, bias, relu, stream); break;
    case DType::f32: launch_bias_activation<float>(y, dims, strides, bias, relu, stream); break;
    default: throw Error("bias_activation: a data type other than fp32, fp16 and bf16");
  }
  check_launch("bias_activation");
}

void fold_batch_norm(void* w, DType type, std::int64_t out_channels, std::int64_t per_output, const void* conv_bias,
                     void* shift, BatchNormStatistics bn, cudaStream_t stream) {
  fold_shift_kernel<<<blocks_for(out_channels), kThreads, 0, stream>>>(out_channels, conv_bias, shift, type, bn);
  check_launch("fold_batch_norm shift");
  fold_weights_kernel<<<blocks_for(out_channels * per_output), kThreads, 0, stream>>>(
      w, type, out_channels * per_output, per_output, bn);
  check_launch("fold_batch_norm weights");
}

namespace {
template <typename T>
void launch_add_relu(const void* a_bytes, const void* b_bytes, void* y_bytes, std::int64_t count, cudaStream_t stream) {
  const T* a = static_cast<const T*>(a_bytes);
  const T* b = static_cast<const T*>(b_bytes);
  T* y = static_cast<T*>(y_bytes);
  constexpr std::int64_t kVector = 16 / sizeof(T);
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  const bool small = count < (std::int64_t{1} << 31);
  if (count % kVector == 0 && aligned(a) && aligned(b) && aligned(y)) {
    const std::int64_t vectors = count / kVector;
    if (small)
      add_relu_vector_kernel<T, std::int32_t><<<blocks_for(vectors), kThreads, 0, stream>>>(
          a, b, y, static_cast<std::int32_t>(vectors));
    else
      add_relu_vector_kernel<T, std::int64_t><<<blocks_for(vectors), kThreads, 0, stream>>>(a, b, y, vectors);
  } else if (small) {
    add_relu_kernel<T, std::int32_t><<<blocks_for(count), kThreads, 0, stream>>>(a, b, y,
                                                                                static_cast<std::int32_t>(count));
  } else {
    add_relu_kernel<T, std::int64_t><<<blocks_for(count), kThreads, 0, stream>>>(a, b, y, count);
  }
}
}  // namespace

void add_relu(const void* a, const void* b, void* y, DType type, std::int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  switch (type) {
    case DType::f16: launch_add_relu<__half>(a, b, y, count, stream); break;
    case DType::bf16: launch_add_relu<__nv_bfloat16>(a, b, y, count, stream); break;
    case DType::f32: launch_add_relu<float>(a, b, y, count, stream); break;
    default: throw Error("add_relu: a data type other than fp32, fp16 and bf16");
  }
  check_launch("add_relu");
}

}  // namespace crossbench::cudnn::kernels
