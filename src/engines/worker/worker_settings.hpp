// The worker engine's own settings, parsed and checked here, in one place,
// out of EngineConfig::settings: the [workers] command of the engine and the
// schema keys a worker is sent or bound by (options_schema.hpp declares them).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crossbench/engine.hpp"

namespace crossbench {

struct WorkerSettings {
  std::vector<std::string> command;  // workers.<name>: the worker's argv (no shell), "{workers}" expanded
  double timeout_s = 600;            // measure.cell_time_limit_s: a worker's start, preparation or check [s]
  bool process_per_cell = true;      // engine.worker_per_cell: a fresh process for every cell
  // The schema keys a worker runs a cell with (layout, compile mode, seed, ...) are not
  // parsed here: prepare_request.cpp sends every sent_to_workers key of the schema.
};

// worker_command_key() is the registry's (crossbench/engine.hpp).
// The settings of worker engine `name`; nullopt when config.settings holds no
// command for it (it is not a worker engine of this run). Throws UsageError
// for an empty command or a value outside its schema row.
std::optional<WorkerSettings> worker_settings(const EngineConfig& config, std::string_view name);

}  // namespace crossbench
