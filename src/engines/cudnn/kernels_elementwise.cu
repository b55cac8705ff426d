// kernels_elementwise.hpp: the kernels and their launchers.
#include "engines/cudnn/kernels_elementwise.hpp"

#include "core/cuda/cudnn_compat.hpp"
#include "engines/cudnn/kernel_support.cuh"

namespace crossbench::cudnn::kernels {
namespace {

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
  const std::uint64_t state = splitmix64::stream_state(seed, mask_tensor_id + (*step << 32));
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

__global__ void bias_relu_strided_kernel(void* y, Strides st, Dims d, DType type, const void* bias, bool relu,
                                         std::int64_t count) {
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < count;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i3 = p % d.d3, i2 = p / d.d3 % d.d2, i1 = p / (d.d3 * d.d2) % d.d1, i0 = p / (d.d3 * d.d2 * d.d1);
    const std::int64_t at = i0 * st.s0 + i1 * st.s1 + i2 * st.s2 + i3 * st.s3;
    float v = load(y, type, at);
    if (bias != nullptr) v += load(bias, type, i1);
    if (relu) v = v > 0.0f ? v : (v == v ? 0.0f : v);  // NaN stays NaN
    store(y, type, at, v);
  }
}

__global__ void differences_kernel(const void* want, const void* got, Strides st, Dims d, DType type,
                                   std::int64_t count, unsigned* out) {
  float largest = 0.0f, worst = 0.0f;
  unsigned non_finite = 0;
  for (std::int64_t p = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; p < count;
       p += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t i3 = p % d.d3, i2 = p / d.d3 % d.d2, i1 = p / (d.d3 * d.d2) % d.d1, i0 = p / (d.d3 * d.d2 * d.d1);
    const std::int64_t at = i0 * st.s0 + i1 * st.s1 + i2 * st.s2 + i3 * st.s3;
    const float a = load(want, type, at), b = load(got, type, at);
    if (!isfinite(a) || !isfinite(b)) {
      ++non_finite;
      continue;
    }
    largest = fmaxf(largest, fabsf(a));
    worst = fmaxf(worst, fabsf(b - a));
  }
  // Non-negative floats order as their bit patterns: atomicMax on the bits.
  atomicMax(out, __float_as_uint(largest));
  atomicMax(out + 1, __float_as_uint(worst));
  if (non_finite > 0) atomicAdd(out + 2, non_finite);
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
  // The stream state is computed on the host, by the same splitmix64.
  const std::uint64_t state = splitmix64::stream_state(seed, tensor_id);
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

void bias_relu_strided(void* y, DType type, std::array<std::int64_t, 4> dims, std::array<std::int64_t, 4> strides,
                       const void* bias, bool relu, cudaStream_t stream) {
  const std::int64_t count = dims[0] * dims[1] * dims[2] * dims[3];
  bias_relu_strided_kernel<<<blocks_for(count), kThreads, 0, stream>>>(
      y, Strides{strides[0], strides[1], strides[2], strides[3]}, Dims{dims[0], dims[1], dims[2], dims[3]}, type, bias,
      relu, count);
  check_launch("bias_relu_strided");
}

void differences(const void* want, const void* got, DType type, std::array<std::int64_t, 4> dims,
                 std::array<std::int64_t, 4> strides, unsigned* out, cudaStream_t stream) {
  const std::int64_t count = dims[0] * dims[1] * dims[2] * dims[3];
  differences_kernel<<<blocks_for(count), kThreads, 0, stream>>>(
      want, got, Strides{strides[0], strides[1], strides[2], strides[3]}, Dims{dims[0], dims[1], dims[2], dims[3]}, type,
      count, out);
  check_launch("differences");
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
