#include "cluster/binding.hpp"

#include <nlohmann/json.hpp>

namespace crossbench {

Device bind_device(const MpiSession& mpi, const std::string& device_tag) {
  const int gpus = visible_gpu_count();
  if (gpus > 0) return probe_gpu(mpi.local_rank() % gpus, device_tag);
  return probe_cpu(cpu_threads_of_binding(), device_tag);
}

std::vector<Device> gather_devices(const MpiSession& mpi, const Device& mine) {
  std::vector<Device> devices;
  for (const auto& text : mpi.allgather(to_json(mine).dump())) devices.push_back(device_from_json(nlohmann::json::parse(text)));
  return devices;
}

}  // namespace crossbench
