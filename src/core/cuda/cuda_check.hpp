// The CUDA-family members of the checked-call macros of crossbench/error.hpp.
#pragma once

#include <cuda_runtime.h>

#include "crossbench/error.hpp"

// cudaErrorMemoryAllocation becomes OutOfMemory (the cell's status is `oom`).
#define CB_CHECK_CUDA(expr)                                                                  \
  do {                                                                                       \
    const cudaError_t cb_cuda_status_ = (expr);                                              \
    if (cb_cuda_status_ != cudaSuccess)                                                      \
      ::crossbench::throw_library_error("CUDA", #expr, __FILE__, __LINE__,                   \
                                        cudaGetErrorString(cb_cuda_status_),                 \
                                        cb_cuda_status_ == cudaErrorMemoryAllocation);       \
  } while (false)
