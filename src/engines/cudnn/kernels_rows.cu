// kernels_rows.hpp: the kernel and its launchers.
#include "engines/cudnn/kernels_rows.hpp"

#include "core/cuda/cuda_check.hpp"
#include "engines/cudnn/kernel_support.cuh"

namespace crossbench::cudnn::kernels {
namespace {

template <typename T, int V>
struct alignas(sizeof(T) * V) RowVector {
  T v[V];
};

struct RowShape {
  unsigned vectors;  // per row: width / V
  unsigned total;    // threads: rows * vectors
  unsigned x_pitch, y_pitch;
};

// Thread idx: row idx / vectors, elements [c, c + V) of it. y = x + beta * y as
// strided_add computes it (v = x; v += beta * y); beta 0 copies the bits.
template <typename T, int V>
__global__ void add_rows_kernel(const T* __restrict__ x, T* __restrict__ y, RowShape s, float beta) {
  const unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= s.total) return;
  const unsigned row = idx / s.vectors, c = (idx - row * s.vectors) * V;
  const RowVector<T, V> in = *reinterpret_cast<const RowVector<T, V>*>(x + row * s.x_pitch + c);
  RowVector<T, V>* out = reinterpret_cast<RowVector<T, V>*>(y + row * s.y_pitch + c);
  if (beta == 0.0f) {
    *out = in;
    return;
  }
  RowVector<T, V> sum = *out;
#pragma unroll
  for (int i = 0; i < V; ++i) {
    float v = to_float(in.v[i]);
    v += beta * to_float(sum.v[i]);
    sum.v[i] = from_float<T>(v);
  }
  *out = sum;
}

// Chunks of whole rows spanning at most 2^28 elements in either tensor: 32-bit
// offsets, and at most 2^28 threads (blocks_for's grid holds them all).
constexpr std::int64_t kChunkElements = std::int64_t{1} << 28;

template <typename T, int V>
void launch(const void* x, void* y, Rows r, float beta, cudaStream_t stream) {
  const std::int64_t pitch = std::max({r.x_pitch, r.y_pitch, r.width, std::int64_t{1}});
  const std::int64_t chunk = std::max<std::int64_t>(1, kChunkElements / pitch);
  for (std::int64_t first = 0; first < r.rows; first += chunk) {
    const std::int64_t rows = std::min(chunk, r.rows - first);
    const RowShape s{static_cast<unsigned>(r.width / V), static_cast<unsigned>(rows * (r.width / V)),
                     static_cast<unsigned>(r.x_pitch), static_cast<unsigned>(r.y_pitch)};
    add_rows_kernel<T, V><<<blocks_for(s.total), kThreads, 0, stream>>>(
        static_cast<const T*>(x) + first * r.x_pitch, static_cast<T*>(y) + first * r.y_pitch, s, beta);
  }
}

template <typename T>
void dispatch(const void* x, void* y, Rows r, float beta, cudaStream_t stream) {
  constexpr int V = 16 / sizeof(T);
  const bool vectors = r.width % V == 0 && r.x_pitch % V == 0 && r.y_pitch % V == 0 &&
                       reinterpret_cast<std::uintptr_t>(x) % 16 == 0 && reinterpret_cast<std::uintptr_t>(y) % 16 == 0;
  if (vectors) launch<T, V>(x, y, r, beta, stream);
  else launch<T, 1>(x, y, r, beta, stream);
}

}  // namespace

void add_rows(const void* x, void* y, DType type, Rows r, float beta, cudaStream_t stream) {
  if (r.rows <= 0 || r.width <= 0) return;
  if (r.x_pitch > kChunkElements || r.y_pitch > kChunkElements || r.width > kChunkElements)
    throw Error("add_rows: a row or pitch beyond 2^28 elements");
  with_storage_type(type, "add_rows", [&](auto* tag) {
    dispatch<std::remove_pointer_t<decltype(tag)>>(x, y, r, beta, stream);
  });
  check_launch("add_rows");
}

void copy_rows(const void* x, void* y, DType type, Rows r, float beta, cudaStream_t stream) {
  if (r.rows <= 0 || r.width <= 0) return;
  if (beta != 0.0f) return add_rows(x, y, type, r, beta, stream);
  const auto bytes = static_cast<std::size_t>(size_of(type));
  if (r.x_pitch == r.width && r.y_pitch == r.width) {  // one contiguous block
    CB_CHECK_CUDA(cudaMemcpyAsync(y, x, static_cast<std::size_t>(r.rows * r.width) * bytes, cudaMemcpyDeviceToDevice,
                                  stream));
    return;
  }
  // Pitched rows: our kernel where it takes the type. cudaMemcpy2DAsync ran GoogLeNet's NHWC concat
  // slices (rows of 128-768 bytes) at 1.8x the old cudnnTransformTensor's time on the H200 (inception
  // output concats 0.137 ms against 0.047-0.071 ms: bench/results/2026-12-02/call6).
  if (type == DType::f32 || type == DType::f16 || type == DType::bf16) return add_rows(x, y, type, r, 0.0f, stream);
  CB_CHECK_CUDA(cudaMemcpy2DAsync(y, static_cast<std::size_t>(r.y_pitch) * bytes, x,
                                  static_cast<std::size_t>(r.x_pitch) * bytes, static_cast<std::size_t>(r.width) * bytes,
                                  static_cast<std::size_t>(r.rows), cudaMemcpyDeviceToDevice, stream));
}

}  // namespace crossbench::cudnn::kernels
