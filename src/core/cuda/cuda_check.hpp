// The checked-call macros for the CUDA libraries, one family with those of
// crossbench/error.hpp (MPI, HDF5, oneDNN): every failing call throws a
// crossbench::Error naming the call, file:line, rank, host and the library's
// own message (throw_library_error); allocation failures throw OutOfMemory so
// that the cell's status is `oom`. One header per library, all here:
//   cuda_check.hpp    CB_CHECK_CUDA
//   cudnn_check.hpp   CB_CHECK_CUDNN, CB_CHECK_CUBLAS
//   nccl_check.hpp    CB_CHECK_NCCL
// Header-only: only the code that includes a library's header links it.
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
