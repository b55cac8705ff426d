#include "dist/resume_settings.hpp"

#include <cstdio>

namespace crossbench {
namespace {

std::string exact(double value) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

const char* layout_name(Layout layout) {
  return layout == Layout::nchw ? "nchw" : layout == Layout::nhwc ? "nhwc" : "auto";
}

}  // namespace

std::map<std::string, std::string> resume_settings(const Options& options) {
  const MeasureOptions& measure = options.measure;
  const EngineConfig& engine = options.engine;
  return {
      {"measure.warmup", std::to_string(measure.warmup_steps)},
      {"measure.min_steps", std::to_string(measure.min_steps)},
      {"measure.max_steps", std::to_string(measure.max_steps)},
      {"measure.target_ci", exact(measure.target_ci)},
      {"measure.cell_time_limit_s", exact(measure.cell_time_limit_s)},
      {"measure.seed", std::to_string(engine.seed)},
      {"measure.update", engine.update == Update::sgd ? "sgd" : "none"},
      {"measure.learning_rate", exact(engine.learning_rate)},
      {"measure.layer_times", measure.layer_times ? "true" : "false"},
      {"measure.layer_time_repetitions", std::to_string(measure.layer_time_repetitions)},
      {"engine.algo", engine.algorithm == AlgorithmPolicy::exhaustive ? "exhaustive" : "heuristic"},
      {"engine.workspace_limit_mb", std::to_string(engine.workspace_limit_bytes >> 20)},
      {"engine.layout", layout_name(engine.layout)},
      {"engine.cuda_graphs", engine.cuda_graphs ? "true" : "false"},
      {"engine.bucket_mb", std::to_string(engine.bucket_bytes >> 20)},
  };
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
