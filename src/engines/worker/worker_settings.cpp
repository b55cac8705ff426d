#include "engines/worker/worker_settings.hpp"

#include "crossbench/error.hpp"
#include "engines/worker/worker_engine.hpp"

namespace crossbench {

std::string worker_command_key(std::string_view name) { return "workers." + std::string(name); }

std::optional<WorkerSettings> worker_settings(const EngineConfig& config, std::string_view name) {
  const auto command = config.settings.find(worker_command_key(name));
  if (command == config.settings.end()) return std::nullopt;
  WorkerSettings settings;
  settings.command = split_worker_command(command->second);
  if (settings.command.empty()) throw UsageError("[workers] " + std::string(name) + " has an empty command");
  // A worker's every wait is bounded like the cell it serves.
  settings.timeout_s = std::stod(config.setting("measure.cell_time_limit_s"));
  settings.process_per_cell = config.setting("engine.worker_per_cell") == "true";
  return settings;
}

}  // namespace crossbench
