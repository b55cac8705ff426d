// The cuDNN and cuBLAS members of the checked-call macro family (see
// cuda_check.hpp). Allocation failures become crossbench::OutOfMemory, as
// cudaErrorMemoryAllocation does in CB_CHECK_CUDA:
//   cuDNN 9: CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED (the old
//            CUDNN_STATUS_ALLOC_FAILED) and ..._DEVICE_ALLOCATION_FAILED (compat.hpp);
//   cuBLAS:  CUBLAS_STATUS_ALLOC_FAILED.
#pragma once

#include <cublas_v2.h>
#include <cudnn.h>

#include <string>

#include "core/cuda/cuda_check.hpp"
#include "core/cuda/cudnn_compat.hpp"
#include "crossbench/error.hpp"

namespace crossbench {

inline bool is_cudnn_allocation_failure(cudnnStatus_t status) { return compat::is_allocation_failure(status); }

// cudnnGetErrorString plus cuDNN's own last-error detail, when it has one.
inline std::string cudnn_message(cudnnStatus_t status) {
  std::string message = cudnnGetErrorString(status);
  char detail[512] = {};
  compat::last_error_detail(detail, sizeof detail);
  if (detail[0] != '\0') message += std::string(" (") + detail + ")";
  return message;
}

inline const char* cublas_status_name(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unknown cuBLAS status";
}

}  // namespace crossbench

#define CB_CHECK_CUDNN(expr)                                                                        \
  do {                                                                                              \
    const cudnnStatus_t cb_cudnn_status_ = (expr);                                                  \
    if (cb_cudnn_status_ != CUDNN_STATUS_SUCCESS)                                                   \
      ::crossbench::throw_library_error("cuDNN", #expr, __FILE__, __LINE__,                         \
                                        ::crossbench::cudnn_message(cb_cudnn_status_),       \
                                        ::crossbench::is_cudnn_allocation_failure(cb_cudnn_status_)); \
  } while (false)

#define CB_CHECK_CUBLAS(expr)                                                                       \
  do {                                                                                              \
    const cublasStatus_t cb_cublas_status_ = (expr);                                                \
    if (cb_cublas_status_ != CUBLAS_STATUS_SUCCESS)                                                 \
      ::crossbench::throw_library_error("cuBLAS", #expr, __FILE__, __LINE__,                        \
                                        ::crossbench::cublas_status_name(cb_cublas_status_), \
                                        cb_cublas_status_ == CUBLAS_STATUS_ALLOC_FAILED);           \
  } while (false)
