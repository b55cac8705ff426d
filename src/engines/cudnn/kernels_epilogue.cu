// kernels_epilogue.hpp: the kernels and their launchers.
#include "engines/cudnn/kernels_epilogue.hpp"

#include <initializer_list>

#include "engines/cudnn/kernel_support.cuh"

namespace crossbench::cudnn::kernels {
namespace {

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

// relu over packed tensors, forward (y = relu(x), in place allowed) and
// backward (dx = (y > 0 ? dy : 0) + beta dx, dx may be dy). `kVector`
// elements (16 bytes) per step where the pointers and the count allow, else
// one; Index is 32-bit where the count allows.
template <typename T>
struct ReluForward {
  const T* x;
  T* y;
  __device__ __forceinline__ void operator()(std::int64_t i) const {
    y[i] = from_float<T>(epilogue(to_float(x[i]), 0.0f, true));
  }
  template <int kVector>
  __device__ __forceinline__ void vector(std::int64_t v) const {
    uint4 data = reinterpret_cast<const uint4*>(x)[v];
    T* values = reinterpret_cast<T*>(&data);
#pragma unroll
    for (int j = 0; j < kVector; ++j) values[j] = from_float<T>(epilogue(to_float(values[j]), 0.0f, true));
    reinterpret_cast<uint4*>(y)[v] = data;
  }
};

template <typename T>
struct ReluBackward {
  const T* y;
  const T* dy;
  T* dx;
  float beta;  // 0: write, 1: accumulate
  __device__ __forceinline__ float gradient(float out, float g, float previous) const {
    const float masked = out > 0.0f ? g : 0.0f;
    return beta != 0.0f ? masked + beta * previous : masked;
  }
  __device__ __forceinline__ void operator()(std::int64_t i) const {
    dx[i] = from_float<T>(gradient(to_float(y[i]), to_float(dy[i]), beta != 0.0f ? to_float(dx[i]) : 0.0f));
  }
  template <int kVector>
  __device__ __forceinline__ void vector(std::int64_t v) const {
    const uint4 out = reinterpret_cast<const uint4*>(y)[v];
    uint4 g = reinterpret_cast<const uint4*>(dy)[v];
    uint4 previous{};
    if (beta != 0.0f) previous = reinterpret_cast<const uint4*>(dx)[v];
    const T* outs = reinterpret_cast<const T*>(&out);
    const T* previouses = reinterpret_cast<const T*>(&previous);
    T* gs = reinterpret_cast<T*>(&g);
#pragma unroll
    for (int j = 0; j < kVector; ++j)
      gs[j] = from_float<T>(gradient(to_float(outs[j]), to_float(gs[j]), to_float(previouses[j])));
    reinterpret_cast<uint4*>(dx)[v] = g;
  }
};

template <int kVector, typename Op, typename Index>
__global__ void elementwise_vector_kernel(Op op, Index vectors) {
  for (Index v = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; v < vectors;
       v += static_cast<Index>(gridDim.x) * blockDim.x)
    op.template vector<kVector>(v);
}

template <typename Op, typename Index>
__global__ void elementwise_kernel(Op op, Index count) {
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<Index>(gridDim.x) * blockDim.x)
    op(i);
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

}  // namespace

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

namespace {
// Runs `op` over `count` elements of T: vectorised where every pointer in
// `pointers` is 16-byte aligned and the count a multiple of the vector.
template <typename T, typename Op>
void launch_elementwise(Op op, std::int64_t count, std::initializer_list<const void*> pointers, cudaStream_t stream) {
  constexpr int kVector = 16 / sizeof(T);
  bool aligned = count % kVector == 0;
  for (const void* p : pointers) aligned = aligned && reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
  const bool small = count < (std::int64_t{1} << 31);
  if (aligned) {
    const std::int64_t vectors = count / kVector;
    if (small)
      elementwise_vector_kernel<kVector><<<blocks_for(vectors), kThreads, 0, stream>>>(op, static_cast<std::int32_t>(vectors));
    else
      elementwise_vector_kernel<kVector><<<blocks_for(vectors), kThreads, 0, stream>>>(op, vectors);
  } else if (small) {
    elementwise_kernel<<<blocks_for(count), kThreads, 0, stream>>>(op, static_cast<std::int32_t>(count));
  } else {
    elementwise_kernel<<<blocks_for(count), kThreads, 0, stream>>>(op, count);
  }
}

template <typename T>
void launch_relu(const void* x, void* y, std::int64_t count, cudaStream_t stream) {
  launch_elementwise<T>(ReluForward<T>{static_cast<const T*>(x), static_cast<T*>(y)}, count, {x, y}, stream);
}

template <typename T>
void launch_relu_backward(const void* y, const void* dy, void* dx, std::int64_t count, float beta,
                          cudaStream_t stream) {
  launch_elementwise<T>(
      ReluBackward<T>{static_cast<const T*>(y), static_cast<const T*>(dy), static_cast<T*>(dx), beta}, count,
      {y, dy, dx}, stream);
}
}  // namespace

void relu(const void* x, void* y, DType type, std::int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  switch (type) {
    case DType::f16: launch_relu<__half>(x, y, count, stream); break;
    case DType::bf16: launch_relu<__nv_bfloat16>(x, y, count, stream); break;
    case DType::f32: launch_relu<float>(x, y, count, stream); break;
    default: throw Error("relu: a data type other than fp32, fp16 and bf16");
  }
  check_launch("relu");
}

void relu_backward(const void* y, const void* dy, void* dx, DType type, std::int64_t count, float beta,
                   cudaStream_t stream) {
  if (count == 0) return;
  switch (type) {
    case DType::f16: launch_relu_backward<__half>(y, dy, dx, count, beta, stream); break;
    case DType::bf16: launch_relu_backward<__nv_bfloat16>(y, dy, dx, count, beta, stream); break;
    case DType::f32: launch_relu_backward<float>(y, dy, dx, count, beta, stream); break;
    default: throw Error("relu_backward: a data type other than fp32, fp16 and bf16");
  }
  check_launch("relu_backward");
}

}  // namespace crossbench::cudnn::kernels
