#include "dist/resume_settings.hpp"

#include "crossbench/options_schema.hpp"

namespace crossbench {

std::map<std::string, std::string> resume_settings(const Options& options) {
  // The options schema says which settings change the numbers (one row per key).
  std::map<std::string, std::string> settings;
  for (const RecordedSetting& setting : number_changing_settings(options)) settings[setting.key] = setting.value;
  return settings;
}

std::map<std::string, std::string> resume_worker_commands(const Options& options) {
  std::map<std::string, std::string> commands;
  for (const auto& [engine, argv] : options.engine.worker_commands) {
    std::string text;
    for (const auto& argument : argv) text += (text.empty() ? "" : " ") + argument;
    commands["workers." + engine] = text;
  }
  return commands;
}

}  // namespace crossbench
