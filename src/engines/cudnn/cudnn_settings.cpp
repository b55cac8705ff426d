#include "engines/cudnn/cudnn_settings.hpp"

#include <filesystem>

#include "crossbench/error.hpp"
#include "engines/cudnn/algorithm_cache.hpp"

namespace crossbench::cudnn {

CudnnSettings cudnn_settings(const EngineConfig& config) {
  CudnnSettings settings;
  settings.algorithm =
      config.setting("engine.algo") == "exhaustive" ? AlgorithmPolicy::exhaustive : AlgorithmPolicy::heuristic;
  settings.workspace_limit_bytes = std::stoll(config.setting("engine.workspace_limit_mb")) << 20;  // MiB → bytes
  const std::string layout = config.setting("engine.layout");
  settings.layout = layout == "nchw" ? Layout::nchw : layout == "nhwc" ? Layout::nhwc : Layout::automatic;
  settings.cuda_graphs = config.setting("engine.cuda_graphs") == "true";
  settings.graph_api = config.setting("engine.graph_api") == "true";
  settings.fuse = config.setting("engine.fuse") == "true";
  settings.algorithm_cache_path = config.setting("engine.algo_cache");
  if (!settings.algorithm_cache_path.empty() && settings.algorithm != AlgorithmPolicy::exhaustive)
    throw UsageError("[engine] algo_cache applies to algo = exhaustive (the measured search) only");
  return settings;
}

void check_cudnn_settings(const EngineConfig& config) {
  const CudnnSettings settings = cudnn_settings(config);
  if (!settings.algorithm_cache_path.empty()) AlgorithmCache(std::filesystem::path(settings.algorithm_cache_path), {});
}

}  // namespace crossbench::cudnn
