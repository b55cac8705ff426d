// Out-of-line parts of the RAII owners.
#include <string>

#include "engines/cudnn/memory_pool.hpp"
#include "engines/cudnn/handles.hpp"
#include "engines/cudnn/fault_injection.hpp"

namespace crossbench::cudnn {

DeviceBuffer::DeviceBuffer(std::size_t bytes, const char* what) {
  fault_injection::before_allocation(what, bytes);  // test-only OOM (CROSSBENCH_GPU_FAULT)
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
