#include "dist/binding.hpp"

namespace crossbench {

Device bind_device(const MpiSession& mpi, const std::string& device_tag) {
  const int gpus = visible_gpu_count();
  if (gpus > 0) return probe_gpu(mpi.local_rank() % gpus, device_tag);
  return probe_cpu(cpu_threads_of_binding(), device_tag);
}

}  // namespace crossbench
