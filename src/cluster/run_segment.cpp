#include "cluster/run_segment.hpp"

#include <set>

#include "crossbench/build_info.hpp"
#include "crossbench/engine.hpp"
#include "crossbench/error.hpp"
#include "core/utc_time.hpp"

namespace crossbench {

RunSegment start_segment(const std::string& command_line, bool resumed, const MpiSession& mpi,
                         const std::vector<Device>& devices) {
  RunSegment segment;
  auto& a = segment.attributes;
  a["started"] = utc_now();
  a["command_line"] = command_line;
  a["crossbench_version"] = build_info::version;
  a["git_revision"] = build_info::git_revision;
  a["mpi_version"] = mpi.library_version();
  a["mpi_ranks"] = std::to_string(mpi.size());
  a["resumed"] = resumed ? "true" : "false";
  for (const auto& [name, version] : engine_library_versions()) a[name] = version;
  std::set<std::string> hosts;
  for (const Device& device : devices) hosts.insert(device.host);
  for (const auto& host : hosts) a["hosts"] += (a["hosts"].empty() ? "" : ", ") + host;
  segment.devices = devices;
  return segment;
}

std::map<std::string, std::string> build_identity(const std::map<std::string, std::string>& attributes) {
  std::map<std::string, std::string> identity;
  for (const auto& [key, value] : attributes) {
    const bool version = key.size() > 8 && key.compare(key.size() - 8, 8, "_version") == 0;
    if (key == "git_revision" || (version && key != "cuda_driver_version" && key != "hdf5_version"))
      identity[key] = value;
  }
  return identity;
}

std::vector<std::string> build_differences(const RunSegment& earlier, int earlier_index, const RunSegment& now) {
  const auto before = build_identity(earlier.attributes), after = build_identity(now.attributes);
  std::set<std::string> keys;
  for (const auto& [key, value] : before) keys.insert(key);
  for (const auto& [key, value] : after) keys.insert(key);
  std::vector<std::string> differences;
  const auto shown = [](const std::map<std::string, std::string>& map, const std::string& key) {
    const auto found = map.find(key);
    return found == map.end() ? std::string("(not loaded)") : "'" + found->second + "'";
  };
  for (const auto& key : keys)
    if (shown(before, key) != shown(after, key))
      differences.push_back(key + " is " + shown(before, key) + " in segment " + std::to_string(earlier_index) + ", " +
                            shown(after, key) + " now");
  return differences;
}

nlohmann::json segment_record(const RunSegment& segment, int index) {
  nlohmann::json devices = nlohmann::json::array();
  for (const Device& device : segment.devices) devices.push_back(to_json(device));
  return {{"type", "segment"}, {"segment", index}, {"attributes", segment.attributes}, {"devices", devices}};
}

nlohmann::json segment_end_record(int index, const std::string& ended_utc, const std::string& run_state) {
  return {{"type", "segment_end"}, {"segment", index}, {"ended", ended_utc}, {"run_state", run_state}};
}

std::vector<RunSegment> segments_from_records(const std::vector<nlohmann::json>& records) {
  std::vector<RunSegment> segments;
  for (const auto& record : records) {
    try {
      const int index = record.at("segment").get<int>();
      if (record.at("type") == "segment") {
        if (index != static_cast<int>(segments.size()))
          throw Error("segment " + std::to_string(index) + " follows " + std::to_string(segments.size()) + " segments");
        RunSegment segment;
        segment.attributes = record.at("attributes").get<std::map<std::string, std::string>>();
        for (const auto& device : record.at("devices")) segment.devices.push_back(device_from_json(device));
        segments.push_back(std::move(segment));
      } else {
        if (index < 0 || index >= static_cast<int>(segments.size()))
          throw Error("the end of segment " + std::to_string(index) + " that never started");
        segments[static_cast<std::size_t>(index)].attributes["ended"] = record.at("ended").get<std::string>();
        segments[static_cast<std::size_t>(index)].attributes["run_state"] = record.at("run_state").get<std::string>();
      }
    } catch (const nlohmann::json::exception& error) {
      throw Error(std::string("malformed run segment record: ") + error.what());
    }
  }
  return segments;
}

std::vector<RankRecord> rank_records(const std::vector<Device>& devices, int segment) {
  std::vector<RankRecord> rows;
  for (std::size_t rank = 0; rank < devices.size(); ++rank) {
    const Device& device = devices[rank];
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
    row.segment = segment;
    row.cpu_set = device.cpu_set;
    row.numa_node = device.numa_node;
    rows.push_back(row);
  }
  return rows;
}

}  // namespace crossbench
