#include "cluster/cube_assembly.hpp"

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

namespace crossbench {

// Scaling efficiency of each data-parallel cell: its throughput over g times
// the throughput of the single-device cell of the same coordinates (the same
// replica when measured, else replica 0), when both are ok.
void add_scaling_efficiency(std::vector<CellResult>& cells) {
  std::map<std::string, const CellResult*> single;
  for (const CellResult& result : cells)
    if (result.cell.gpus == 1 && result.status == Status::ok) single[cell_key(result.device_key, result.cell)] = &result;
  for (CellResult& result : cells) {
    if (result.cell.gpus == 1 || result.status != Status::ok) continue;
    CellSpec base = result.cell;
    base.gpus = 1;
    auto found = single.find(cell_key(result.device_key, base));
    if (found == single.end()) {
      base.replica = 0;
      found = single.find(cell_key(result.device_key, base));
    }
    if (found == single.end()) continue;
    result.scaling_efficiency = result.images_per_s / (result.cell.gpus * found->second->images_per_s);
  }
}

CubeContents assemble_cube(const Options& options, const Plan& plan, const std::vector<Device>& rank_devices,
                           const std::vector<CellResult>& results,
                           const std::map<std::string, std::string>& attributes) {
  CubeContents cube;
  cube.attributes = attributes;
  for (const auto& group : plan.groups) {
    cube.axes.devices.push_back(group.key);
    for (const auto& engine : resolve_engines(options.matrix.engines, group.device.kind))
      if (std::find(cube.axes.engines.begin(), cube.axes.engines.end(), engine) == cube.axes.engines.end())
        cube.axes.engines.push_back(engine);
  }
  // A resumed run may hold results of devices (or engines) that no rank of this run has.
  for (const auto& result : results) {
    if (std::find(cube.axes.devices.begin(), cube.axes.devices.end(), result.device_key) == cube.axes.devices.end())
      cube.axes.devices.push_back(result.device_key);
    if (std::find(cube.axes.engines.begin(), cube.axes.engines.end(), result.cell.engine) == cube.axes.engines.end())
      cube.axes.engines.push_back(result.cell.engine);
  }
  cube.axes.networks = options.matrix.networks;
  for (const auto precision : options.matrix.precisions) cube.axes.precisions.emplace_back(to_string(precision));
  cube.axes.batches = options.matrix.batches;
  for (const auto phase : options.matrix.phases) cube.axes.phases.emplace_back(to_string(phase));
  cube.axes.gpus.assign(options.matrix.gpus.begin(), options.matrix.gpus.end());
  for (int replica = 0; replica < options.replicas; ++replica) cube.axes.replicas.push_back(replica);
  cube.cells = results;
  add_scaling_efficiency(cube.cells);
  // Each worker engine's framework versions (the hello's `versions`), as one
  // JSON object engine -> versions; the native engines' are root attributes already.
  nlohmann::json worker_versions = nlohmann::json::object();
  for (const CellResult& result : results)
    if (!result.versions.empty() && !worker_versions.contains(result.cell.engine)) {
      try {
        worker_versions[result.cell.engine] = nlohmann::json::parse(result.versions);
      } catch (const nlohmann::json::exception&) {
        worker_versions[result.cell.engine] = result.versions;
      }
    }
  if (!worker_versions.empty()) cube.attributes["worker_versions"] = worker_versions.dump();
  for (std::size_t rank = 0; rank < rank_devices.size(); ++rank) {
    const Device& device = rank_devices[rank];
    RankRecord row;
    row.rank = static_cast<std::int32_t>(rank);
    row.host = device.host;
    row.device_key = device.key();
    row.device_index = device.index;
    row.uuid = device.uuid;
    row.pci_bus_id = device.pci_bus_id;
    row.memory_bytes = static_cast<double>(device.memory_bytes);
    row.sm_clock_mhz = device.sm_clock_mhz;
    row.memory_clock_mhz = device.memory_clock_mhz;
    row.power_limit_w = device.power_limit_w;
    row.driver = device.driver;
    row.threads = device.kind == DeviceKind::cpu ? device.compute_units : 0;
    row.application_sm_clock_mhz = device.application_sm_clock_mhz;
    row.application_memory_clock_mhz = device.application_memory_clock_mhz;
    row.clock_policy = device.clock_policy;
    row.ecc = device.ecc;
    row.cpu_model = device.cpu_model;
    row.os = device.os;
    row.kernel = device.kernel;
    row.container = device.container;
    cube.ranks.push_back(row);
  }
  return cube;
}

}  // namespace crossbench
