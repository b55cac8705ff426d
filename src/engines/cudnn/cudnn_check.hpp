// The cuDNN and cuBLAS members of the checked-call macro family of
// crossbench/error.hpp (CB_CHECK_CUDA lives in src/core/cuda/cuda_check.hpp).
//
// Every failing call becomes a crossbench::Error naming the call, file:line,
// rank and host and the library's own message; allocation failures become
// crossbench::OutOfMemory so that the cell's status is `oom`, as
// cudaErrorMemoryAllocation does in CB_CHECK_CUDA:
//   cuDNN 9: CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED (the old
//            CUDNN_STATUS_ALLOC_FAILED) and ..._DEVICE_ALLOCATION_FAILED (compat.hpp);
//   cuBLAS:  CUBLAS_STATUS_ALLOC_FAILED.
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include <string>

#include "core/cuda/cuda_check.hpp"
#include "engines/cudnn/compat.hpp"
#include "crossbench/error.hpp"

namespace crossbench::cudnn {

inline bool is_allocation_failure(cudnnStatus_t status) { return compat::is_allocation_failure(status); }

const char* cublas_status_name(cublasStatus_t status);

// cudnnGetErrorString plus cuDNN's own last-error detail, when it has one.
std::string cudnn_message(cudnnStatus_t status);

}  // namespace crossbench::cudnn

#define CB_CHECK_CUDNN(expr)                                                                        \
  do {                                                                                              \
    const cudnnStatus_t cb_cudnn_status_ = (expr);                                                  \
    if (cb_cudnn_status_ != CUDNN_STATUS_SUCCESS)                                                   \
      ::crossbench::throw_library_error("cuDNN", #expr, __FILE__, __LINE__,                         \
                                        ::crossbench::cudnn::cudnn_message(cb_cudnn_status_),       \
                                        ::crossbench::cudnn::is_allocation_failure(cb_cudnn_status_)); \
  } while (false)

#define CB_CHECK_CUBLAS(expr)                                                                       \
  do {                                                                                              \
    const cublasStatus_t cb_cublas_status_ = (expr);                                                \
    if (cb_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                                 \
      ::crossbench::throw_library_error("cuBLAS", #expr, __FILE__, __LINE__,                        \
                                        ::crossbench::cudnn::cublas_status_name(cb_cublas_status_), \
                                        cb_cublas_status_ == CUBLAS_STATUS_ALLOC_FAILED);           \
  } while (false)
