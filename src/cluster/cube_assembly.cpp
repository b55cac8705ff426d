#include "cluster/cube_assembly.hpp"

#include <algorithm>
#include <map>
#include <set>

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

namespace {

// Each worker engine's framework versions (the hello's `versions`) among `results`
// of segment `segment` (-1: all), as one JSON object engine -> versions.
nlohmann::json worker_versions_of(const std::vector<CellResult>& results, int segment) {
  nlohmann::json versions = nlohmann::json::object();
  for (const CellResult& result : results)
    if (!result.versions.empty() && (segment < 0 || result.segment == segment) && !versions.contains(result.cell.engine)) {
      try {
        versions[result.cell.engine] = nlohmann::json::parse(result.versions);
      } catch (const nlohmann::json::exception&) {
        versions[result.cell.engine] = result.versions;
      }
    }
  return versions;
}

// What differs between the segments of one cube, named for a reader: build
// facts (revision, libraries), worker framework versions, and the physical
// GPUs (UUIDs) behind each device key. Empty when the segments agree.
std::string segments_differ(const std::vector<CubeSegment>& segments, const std::vector<RankRecord>& ranks) {
  if (segments.size() < 2) return "";
  std::vector<std::string> named;
  std::set<std::string> keys;
  for (const auto& segment : segments)
    for (const auto& [key, value] : build_identity(segment.attributes)) keys.insert(key);
  keys.insert("worker_versions");
  for (const auto& key : keys) {
    std::set<std::string> values;
    for (const auto& segment : segments) {
      const auto found = segment.attributes.find(key);
      // A segment that ran no worker cell says nothing about the workers' versions.
      if (key == "worker_versions" && (found == segment.attributes.end() || found->second == "{}")) continue;
      values.insert(found == segment.attributes.end() ? "" : found->second);
    }
    if (values.size() > 1) named.push_back(key);
  }
  std::map<std::string, std::map<int, std::set<std::string>>> uuids;  // device key -> segment -> UUIDs
  for (const auto& row : ranks) uuids[row.device_key][row.segment].insert(row.uuid.empty() ? row.host : row.uuid);
  for (const auto& [key, by_segment] : uuids) {
    std::set<std::set<std::string>> distinct;
    for (const auto& [segment, set] : by_segment) distinct.insert(set);
    if (distinct.size() > 1) named.push_back("physical devices of '" + key + "'");
  }
  std::string text;
  for (const auto& item : named) text += (text.empty() ? "" : "; ") + item;
  return text;
}

}  // namespace

CubeContents assemble_cube(const JobOptions& options, const Plan& plan, const std::vector<RunSegment>& segments,
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
  // The native engines' library versions are root and segment attributes already.
  const nlohmann::json worker_versions = worker_versions_of(results, -1);
  if (!worker_versions.empty()) cube.attributes["worker_versions"] = worker_versions.dump();
  // Every segment, each with its ranks: a resumed cube keeps who measured each cell.
  std::string allowed, allowed_settings;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const int index = static_cast<int>(i);
    CubeSegment segment{segments[i].attributes};
    segment.attributes["worker_versions"] = worker_versions_of(results, index).dump();
    if (!segment.attributes.count("ended")) {
      // Killed without an end record (or still running): say so, with its last cell's end.
      std::string last;
      for (const auto& result : results)
        if (result.segment == index && result.finished_utc > last) last = result.finished_utc;
      segment.attributes["ended"] = "";
      segment.attributes["run_state"] = i + 1 == segments.size() ? attributes.count("run_state") ? attributes.at("run_state") : "running"
                                        : "ended without a record (killed?); its last cell finished " + (last.empty() ? "(none)" : last);
    }
    if (const auto found = segment.attributes.find("allowed_build_change"); found != segment.attributes.end())
      allowed += (allowed.empty() ? "" : "; ") + ("segment " + std::to_string(i) + ": " + found->second);
    if (const auto found = segment.attributes.find("allowed_setting_change"); found != segment.attributes.end())
      allowed_settings += (allowed_settings.empty() ? "" : "; ") + ("segment " + std::to_string(i) + ": " + found->second);
    cube.segments.push_back(std::move(segment));
    const auto rows = rank_records(segments[i].devices, index);
    cube.ranks.insert(cube.ranks.end(), rows.begin(), rows.end());
  }
  cube.attributes["segments"] = std::to_string(segments.size());
  cube.attributes["segments_differ"] = segments_differ(cube.segments, cube.ranks);
  if (!allowed.empty()) cube.attributes["allowed_build_change"] = allowed;
  if (!allowed_settings.empty()) cube.attributes["allowed_setting_change"] = allowed_settings;
  return cube;
}

}  // namespace crossbench
