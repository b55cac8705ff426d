#include "cluster/resume_settings.hpp"

#include "crossbench/engine.hpp"
#include "crossbench/options_schema.hpp"

namespace crossbench {

std::map<std::string, std::string> resume_settings(const JobOptions& options) {
  // The options schema says which settings change the numbers (one row per key).
  std::map<std::string, std::string> settings;
  for (const RecordedSetting& setting : number_changing_settings(options.settings)) settings[setting.key] = setting.value;
  return settings;
}

std::map<std::string, std::string> resume_worker_commands(const JobOptions& options) {
  std::map<std::string, std::string> commands;
  for (const auto& [key, command] : options.engine.settings) {
    if (key.rfind("workers.", 0) != 0) continue;
    std::string text;  // as the worker runs it: "{workers}" expanded, single spaces
    for (const auto& argument : split_worker_command(command)) text += (text.empty() ? "" : " ") + argument;
    commands[key] = text;
  }
  return commands;
}

}  // namespace crossbench
