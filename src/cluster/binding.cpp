#include "cluster/binding.hpp"

#include <nlohmann/json.hpp>

#include "cluster/cpu_affinity.hpp"

namespace crossbench {

Device bind_device(const MpiSession& mpi, const std::string& device_tag, bool bind_near_gpu) {
  const int gpus = visible_gpu_count();
  Device device = gpus > 0 ? probe_gpu(mpi.local_rank() % gpus, device_tag)
                           : probe_cpu(cpu_threads_of_binding(), device_tag);
  const CpuPlacement placement = bind_near_gpu ? crossbench::bind_near_gpu(device) : cpu_placement(device);
  device.cpu_set = placement.cpu_set;
  device.numa_node = placement.numa_node;
  return device;
}

std::vector<Device> gather_devices(const MpiSession& mpi, const Device& mine) {
  std::vector<Device> devices;
  for (const auto& text : mpi.allgather(to_json(mine).dump())) devices.push_back(device_from_json(nlohmann::json::parse(text)));
  return devices;
}

}  // namespace crossbench
