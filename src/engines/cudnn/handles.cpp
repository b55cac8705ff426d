// Out-of-line parts of the RAII owners and the checked-call helpers.
#include <string>

#include "engines/cudnn/device_pool.hpp"
#include "engines/cudnn/handles.hpp"

namespace crossbench::cudnn {

const char* cublas_status_name(cublasStatus_t status) {
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

std::string cudnn_message(cudnnStatus_t status) {
  std::string message = cudnnGetErrorString(status);
  char detail[512] = {};
  compat::last_error_detail(detail, sizeof detail);
  if (detail[0] != '\0') message += std::string(" (") + detail + ")";
  return message;
}

DeviceBuffer::DeviceBuffer(std::size_t bytes, const char* what) {
  void* data = nullptr;
  const cudaError_t status = cudaMalloc(&data, bytes);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();  // a failed cudaMalloc is not sticky: clear it for the next cell
    std::size_t free_bytes = 0, total_bytes = 0;
    (void)cudaMemGetInfo(&free_bytes, &total_bytes);
    (void)cudaGetLastError();
    throw_library_error("CUDA", "cudaMalloc(" + format_bytes(static_cast<double>(bytes)) + ") for " + what,
                        __FILE__, __LINE__,
                        std::string(cudaGetErrorString(status)) + "; " +
                            format_bytes(static_cast<double>(free_bytes)) + " of " +
                            format_bytes(static_cast<double>(total_bytes)) + " free",
                        status == cudaErrorMemoryAllocation);
  }
  data_ = data;
  bytes_ = bytes;
}

}  // namespace crossbench::cudnn
