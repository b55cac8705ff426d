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
// key in config.worker_settings (the schema's sent_to_workers rows) with its
// value typed by the schema row (integer, number, boolean, else text). Throws
// Error for a key the schema does not declare.
nlohmann::json prepare_request(const Network& network, const CellSpec& cell, const EngineConfig& config, int protocol);

}  // namespace crossbench
