// `crossbench check`: the output check of every cell of the matrix, as JSON
// lines, without timing and without a cube. Session::check() is what `run`
// computes after a cell's timed steps (one forward, and backward in training,
// on the synthetic batch with dropout step 0); here it runs right after
// preparation, so engines can be compared number for number on identical data.
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "app/options.hpp"
#include "crossbench/device.hpp"
#include "crossbench/engine.hpp"
#include "crossbench/error.hpp"
#include "crossbench/network.hpp"
#include "crossbench/options.hpp"
#include "crossbench/runner.hpp"
#include "cluster/plan.hpp"

namespace crossbench {
namespace {

using json = nlohmann::ordered_json;  // keys in the order written: the cell first

// A native engine runs on its own kind of device, a framework worker on the
// first visible GPU (unless --cpu); with no GPU visible, everything is given
// the CPU, where a GPU engine's cells come out `unsupported` with the reason.
DeviceKind device_kind_for(const std::string& engine, bool workers_on_cpu) {
  if (visible_gpu_count() == 0) return DeviceKind::cpu;
  for (const auto& info : engine_catalog())
    if (info.name == engine) return info.device_kind;
  return workers_on_cpu ? DeviceKind::cpu : DeviceKind::gpu;
}

// One cell: its identity, status, message and (when the check ran) the
// OutputCheck. NaN numbers are written as null (gradient_norm in inference);
// doubles round-trip (nlohmann writes 17 significant digits).
json check_cell(Engine* engine, const Network& network, const CellSpec& cell, const Device& device) {
  json line{{"engine", cell.engine},
            {"network", cell.network},
            {"precision", to_string(cell.precision)},
            {"batch", cell.batch},
            {"phase", to_string(cell.phase)},
            {"device", device.key()},
            {"status", ""},
            {"message", ""}};
  const auto outcome = [&](Status status, const std::string& message) {
    line["status"] = to_string(status);
    line["message"] = message;
    return line;
  };
  // The same pre-checks and failure mapping as `run` (runner.hpp, cell.hpp).
  if (const std::string reason = unsupported_reason(engine, cell.engine, device, cell, 0); !reason.empty())
    return outcome(Status::unsupported, reason);
  try {
    const OutputCheck check = engine->prepare(network, cell)->check();
    line["finite"] = check.finite;
    line["loss"] = check.loss;
    line["logits_checksum"] = check.logits_checksum;
    line["gradient_norm"] = check.gradient_norm;
    line["gradient_norms"] = check.gradient_norms;
    return outcome(check.finite ? Status::ok : Status::failed, check.finite ? "" : "non-finite output");
  } catch (...) {
    const CellFailure failure = cell_failure(std::current_exception());
    return outcome(failure.status, failure.message);
  }
}

}  // namespace

int check_command(const CommandContext& context) {
  const std::optional<CheckOptions> parsed = command_options_or_help<CheckOptions>(context);
  if (!parsed) return 0;  // --help
  const CheckOptions& options = *parsed;
  const bool workers_on_cpu = options.workers_on_cpu;
  const Device cpu = probe_cpu(cpu_threads_of_binding(), options.device_tag);
  std::unique_ptr<Device> gpu;
  std::vector<std::string> engine_names = resolve_engines(options.matrix.engines, DeviceKind::cpu);
  for (const auto& name : resolve_engines(options.matrix.engines, visible_gpu_count() > 0 ? DeviceKind::gpu : DeviceKind::cpu))
    if (std::find(engine_names.begin(), engine_names.end(), name) == engine_names.end()) engine_names.push_back(name);

  // One process, one device: the data-parallel sizes are run's, each cell is checked once.
  MatrixOptions single_device = options.matrix;
  single_device.gpus = {1};
  // --filter: a filter that selects no cell checks nothing; that is a mistake, not a pass.
  if (!options.cell_filter.empty()) {
    const std::vector<CellSpec> cells = expand_matrix(single_device, engine_names, 1);
    if (std::none_of(cells.begin(), cells.end(), [&](const CellSpec& cell) { return cell_selected(options.cell_filter, cell); }))
      throw UsageError("--filter '" + options.cell_filter + "' matches no cell of the matrix");
  }
  for (const auto& engine_name : engine_names) {
    const DeviceKind kind = device_kind_for(engine_name, workers_on_cpu);
    if (kind == DeviceKind::gpu && !gpu) gpu = std::make_unique<Device>(probe_gpu(0, options.device_tag));
    const Device& device = kind == DeviceKind::gpu ? *gpu : cpu;
    EngineConfig config = options.engine;
    config.threads = device.kind == DeviceKind::cpu ? device.compute_units : 1;
    const std::unique_ptr<Engine> engine = make_engine(engine_name, device, config);
    std::map<std::string, Network> networks;
    for (const CellSpec& cell : expand_matrix(single_device, {engine_name}, 1)) {
      if (!cell_selected(options.cell_filter, cell)) continue;
      if (!networks.count(cell.network)) networks.emplace(cell.network, make_network(cell.network));
      std::cout << check_cell(engine.get(), networks.at(cell.network), cell, device).dump() << std::endl;
    }
  }
  return 0;
}

}  // namespace crossbench
