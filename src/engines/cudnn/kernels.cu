// CUDA kernels of the cuDNN engine (see kernels.hpp). Arithmetic that must
// match the CPU bit for bit (the synthetic generator) uses explicitly
// rounded intrinsics (__fmul_rn, __fsub_rn) so that nvcc cannot contract it
// into an FMA with a different rounding.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "crossbench/error.hpp"
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
                                      float scale, std::int64_t count) {
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < count;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i = canonical_index(p, dims, channels_last);
    const float centred = __fsub_rn(__fmul_rn(2.0f, unit(state, static_cast<std::uint64_t>(i))), 1.0f);
    store(dst, type, p, __fmul_rn(scale, centred));
  }
}

__global__ void fill_constant_kernel(void* dst, DType type, std::int64_t count, float value) {
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < count;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    store(dst, type, p, value);
}

__global__ void dropout_forward_kernel(const void* x, void* y, std::uint8_t* mask, DType type, Dims dims,
                                       bool channels_last, std::uint64_t seed, std::uint64_t mask_tensor_id,
                                       const std::uint64_t* step, double rate, float scale, std::int64_t count) {
  const std::uint64_t state = stream_state(seed, mask_tensor_id + (*step << 32));
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < count;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i = canonical_index(p, dims, channels_last);
    const bool kept = static_cast<double>(unit(state, static_cast<std::uint64_t>(i))) >= rate;
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
  if (threadIdx.x == 0) atomicAdd(out, partial[0]);
  if (bad != 0) atomicAdd(non_finite, bad);
}

}  // namespace

void fill_synthetic(void* dst, DType type, std::array<std::int64_t, 4> canonical_dims, bool channels_last,
                    std::uint64_t seed, std::uint64_t tensor_id, float scale, cudaStream_t stream) {
  const Dims d{canonical_dims[0], canonical_dims[1], canonical_dims[2], canonical_dims[3]};
  const std::int64_t count = d.d0 * d.d1 * d.d2 * d.d3;
  if (count == 0) return;
  // The stream state is computed on the host: the same splitmix64 finaliser.
  auto host_mix = [](std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  };
  const std::uint64_t state = host_mix(seed ^ (tensor_id * kGoldenGamma));
  fill_synthetic_kernel<<<blocks_for(count), kThreads, 0, stream>>>(dst, type, d, channels_last, state, scale, count);
  check_launch("fill_synthetic");
}

void fill_constant(void* dst, DType type, std::int64_t count, float value, cudaStream_t stream) {
  if (count == 0) return;
  fill_constant_kernel<<<blocks_for(count), kThreads, 0, stream>>>(dst, type, count, value);
  check_launch("fill_constant");
}

void dropout_forward(const void* x, void* y, std::uint8_t* mask, DType type, std::array<std::int64_t, 4> dims,
                     bool channels_last, std::uint64_t seed, std::uint64_t mask_tensor_id, const std::uint64_t* step,
                     double rate, cudaStream_t stream) {
  const Dims d{dims[0], dims[1], dims[2], dims[3]};
  const std::int64_t count = d.d0 * d.d1 * d.d2 * d.d3;
  const float scale = static_cast<float>(1.0 / (1.0 - rate));
  dropout_forward_kernel<<<blocks_for(count), kThreads, 0, stream>>>(x, y, mask, type, d, channels_last, seed,
                                                                     mask_tensor_id, step, rate, scale, count);
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

}  // namespace crossbench::cudnn::kernels
