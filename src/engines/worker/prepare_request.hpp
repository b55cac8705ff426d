// The `prepare` request of the worker protocol (README "Framework workers"),
// built apart from the process handling so that a test can hold it to the
// options schema.
#pragma once

#include <nlohmann/json.hpp>

#include "crossbench/cell.hpp"
#include "crossbench/engine.hpp"
#include "crossbench/network.hpp"

namespace crossbench {

// The cell, its network graph, the rank's CPU threads, and `settings`: every
// key of the schema's sent_to_workers rows (worker_setting_keys()) with its
// value in config.settings (the schema default where absent), typed by the
// row (integer, number, boolean, else text). Throws UsageError for a value
// outside its row.
nlohmann::json prepare_request(const Network& network, const CellSpec& cell, const EngineConfig& config, int protocol);

}  // namespace crossbench
