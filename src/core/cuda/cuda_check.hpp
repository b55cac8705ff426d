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

#include <string>

#include "core/device_health.hpp"
#include "crossbench/error.hpp"

namespace crossbench {

// The errors after which the context is unusable until the process ends
// (CUDA runtime API: "the process must be terminated and relaunched").
inline bool cuda_error_is_sticky(cudaError_t status) {
  switch (status) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
      return true;
    default:
      return false;
  }
}

}  // namespace crossbench

// cudaErrorMemoryAllocation becomes OutOfMemory (the cell's status is `oom`);
// a sticky error also marks the rank's device lost (core/device_health.hpp).
#define CB_CHECK_CUDA(expr)                                                                  \
  do {                                                                                       \
    const cudaError_t cb_cuda_status_ = (expr);                                              \
    if (cb_cuda_status_ != cudaSuccess) {                                                    \
      if (::crossbench::cuda_error_is_sticky(cb_cuda_status_))                               \
        ::crossbench::device_health::mark_lost(std::string(cudaGetErrorName(cb_cuda_status_)) + \
                                               " (" + cudaGetErrorString(cb_cuda_status_) + ") in `" #expr "`"); \
      ::crossbench::throw_library_error("CUDA", #expr, __FILE__, __LINE__,                   \
                                        cudaGetErrorString(cb_cuda_status_),                 \
                                        cb_cuda_status_ == cudaErrorMemoryAllocation);       \
    }                                                                                        \
  } while (false)
