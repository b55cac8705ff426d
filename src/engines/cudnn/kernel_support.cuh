// What every .cu file of the cuDNN engine shares: launch geometry, the
// launch check, fp32 loads and stores of the three storage types, 4-D shapes.
// Device-side only (included by .cu files). Arithmetic that must match the
// CPU bit for bit (the synthetic generator) uses explicitly rounded
// intrinsics (__fmul_rn, __fsub_rn) so that nvcc cannot contract it into an
// FMA with a different rounding.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "crossbench/error.hpp"
#include "crossbench/splitmix64.hpp"
#include "engines/cudnn/dtype.hpp"

namespace crossbench::cudnn::kernels {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float unit(std::uint64_t state, std::uint64_t index) {
  return splitmix64::to_unit_interval(splitmix64::stream_element(state, index));
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

inline unsigned blocks_for(std::int64_t count) {
  const std::int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 65535LL * 32 ? 65535LL * 32 : blocks));
}

inline void check_launch(const char* what) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    throw_library_error("CUDA", std::string("kernel launch ") + what, __FILE__, __LINE__, cudaGetErrorString(status),
                        status == cudaErrorMemoryAllocation);
}

struct Strides {
  std::int64_t s0, s1, s2, s3;
};

// Calls f(static_cast<T*>(nullptr)) with T the storage type of `type` (float,
// __half, __nv_bfloat16); any other type is an Error naming `what`.
template <typename F>
void with_storage_type(DType type, const char* what, F&& f) {
  switch (type) {
    case DType::f16: f(static_cast<__half*>(nullptr)); break;
    case DType::bf16: f(static_cast<__nv_bfloat16*>(nullptr)); break;
    case DType::f32: f(static_cast<float*>(nullptr)); break;
    default: throw Error(std::string(what) + ": a data type other than fp32, fp16 and bf16");
  }
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

}  // namespace
}  // namespace crossbench::cudnn::kernels
