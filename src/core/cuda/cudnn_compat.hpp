// Every difference between the toolkits the cuDNN engine builds with, in one
// place (README "Which toolkit for which GPU"):
//   CUDA 13.x + cuDNN 9   sm_75 .. sm_120 (Turing to Blackwell)
//   CUDA 12.x + cuDNN 9   sm_50 .. sm_90  (Maxwell to Hopper)
//   CUDA 11.8 + cuDNN 8.9 sm_35 .. sm_90  (Kepler to Hopper)
// The rest of the engine calls these names and never tests a version itself.
// A feature that a toolkit lacks is answered at run time (supports() says
// `unsupported` with the reason, or the engine takes the legacy path and says
// so in `decisions`), never by a broken build.
#pragma once

#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstddef>

// cuDNN >= major.minor (the headers the engine is compiled against).
#define CROSSBENCH_CUDNN_AT_LEAST(major, minor) \
  (CUDNN_MAJOR > (major) || (CUDNN_MAJOR == (major) && CUDNN_MINOR >= (minor)))
// CUDA runtime >= major.minor (CUDART_VERSION is 1000 * major + 10 * minor).
#define CROSSBENCH_CUDART_AT_LEAST(major, minor) (CUDART_VERSION >= (major) * 1000 + (minor) * 10)

#if !CROSSBENCH_CUDNN_AT_LEAST(8, 9)
#error "crossbench's cuDNN engine needs cuDNN 8.9 or later (cuDNN 8.9 for CUDA 11.8, cuDNN 9 for CUDA 12 and 13)"
#endif
#if !CROSSBENCH_CUDART_AT_LEAST(11, 8)
#error "crossbench's cuDNN engine needs CUDA 11.8 or later"
#endif

namespace crossbench::compat {

// The oldest GPU generation the toolkit compiles for, as 10 * major + minor: CUDA 13 dropped
// Maxwell, Pascal and Volta, CUDA 12 dropped Kepler.
constexpr int oldest_compute_capability() {
#if CROSSBENCH_CUDART_AT_LEAST(13, 0)
  return 75;
#elif CROSSBENCH_CUDART_AT_LEAST(12, 0)
  return 50;
#else
  return 35;
#endif
}
constexpr const char* toolkit_for_older_gpus() {
  return oldest_compute_capability() >= 75 ? "the CUDA 12 build (Maxwell to Volta) or the CUDA 11.8 build (Kepler)"
                                           : "the CUDA 11.8 build (Kepler)";
}

// cuDNN 9 split CUDNN_STATUS_ALLOC_FAILED into a host and a device status.
inline bool is_allocation_failure(cudnnStatus_t status) {
#if CUDNN_MAJOR >= 9
  return status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
         status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
#else
  return status == CUDNN_STATUS_ALLOC_FAILED;
#endif
}

// cuDNN's own detail for the last failing call; cuDNN 8 has none (an empty string).
inline void last_error_detail(char* detail, std::size_t size) {
#if CUDNN_MAJOR >= 9
  cudnnGetLastErrorString(detail, size);
#else
  if (size > 0) detail[0] = '\0';
#endif
}

// CUDA 12 replaced cudaGraphInstantiate's error-node and log arguments by flags.
inline cudaError_t graph_instantiate(cudaGraphExec_t* exec, cudaGraph_t graph) {
#if CROSSBENCH_CUDART_AT_LEAST(12, 0)
  return cudaGraphInstantiate(exec, graph, 0);
#else
  return cudaGraphInstantiate(exec, graph, nullptr, nullptr, 0);
#endif
}

#ifdef __CUDACC__
// atomicAdd on doubles is native from sm_60 (Pascal); Kepler and Maxwell get
// the compare-and-swap loop of the CUDA programming guide.
__device__ __forceinline__ double atomic_add(double* address, double value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 600
  auto* word = reinterpret_cast<unsigned long long*>(address);
  unsigned long long old = *word, assumed = 0;
  do {
    assumed = old;
    old = atomicCAS(word, assumed,
                    static_cast<unsigned long long>(
                        __double_as_longlong(value + __longlong_as_double(static_cast<long long>(assumed)))));
  } while (assumed != old);
  return __longlong_as_double(static_cast<long long>(old));
#else
  return atomicAdd(address, value);
#endif
}
#endif

}  // namespace crossbench::compat
