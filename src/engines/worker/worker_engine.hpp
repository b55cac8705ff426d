// Framework engines as worker processes (DESIGN.md "Workers"), speaking the
// JSON-lines protocol documented in the README ("Framework workers").
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "crossbench/engine.hpp"
#include "engines/worker/worker_settings.hpp"

namespace crossbench {

// 3: `prepare` carries the options schema's worker settings in one
// `settings` object (key → value); 2 named seed, update, learning_rate,
// layout and compile_mode by hand. 2: the Runner drives the steps ("steps"
// requests in batches, raw times back); 1 had the worker run the stopping rule
// itself ("measure"). src/workers/common/protocol.py holds the same number.
inline constexpr int kWorkerProtocol = 3;

// default_worker_commands() and split_worker_command() are the registry's
// (crossbench/engine.hpp): the rest of crossbench reaches workers only through it.
// "{workers}" in a command stands for data_paths().workers (crossbench/data_paths.hpp).

std::unique_ptr<Engine> make_worker_engine(const std::string& name, const Device& device, const EngineConfig& config,
                                           const WorkerSettings& settings);

}  // namespace crossbench
