#include "engines/cudnn/cudnn_settings.hpp"

#include <cstdlib>

#include <filesystem>

#include "crossbench/error.hpp"
#include "engines/cudnn/algorithm_cache.hpp"
#include "engines/cudnn/graph_plan_store.hpp"

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
  settings.search_l2 = config.setting("engine.search_l2") == "cold" ? SearchL2::cold : SearchL2::warm;
  settings.search_tie = std::stod(config.setting("engine.search_tie"));  // the schema has checked its range
  settings.search_warmup_ms = std::stoi(config.setting("engine.search_warmup_ms"));  // and this one's
  settings.search_in_step = config.setting("engine.search_in_step") == "true";
  // On by default (measured: the same plans and medians, shorter set-up; DESIGN.md), so, as graph_api, they take
  // effect where they apply and nowhere else: the heuristic policy builds no measured Graph API plans, and the
  // in-step search times the graph's other plans, which a graph created with one configuration lacks.
  const bool exhaustive = settings.algorithm == AlgorithmPolicy::exhaustive;
  settings.graph_plan_reuse = exhaustive && config.setting("engine.graph_plan_reuse") == "true";
  settings.graph_from_cache =
      exhaustive && !settings.search_in_step && config.setting("engine.graph_from_cache") == "true";
  settings.conv_statistics = config.setting("engine.conv_statistics") == "true";
  settings.pool_spacer_bytes = std::stoll(config.setting("engine.pool_spacer_mb")) << 20;  // MiB → bytes
  settings.algorithm_cache_path = config.setting("engine.algo_cache");
  if (!settings.algorithm_cache_path.empty() && settings.algorithm != AlgorithmPolicy::exhaustive)
    throw UsageError("[engine] algo_cache applies to algo = exhaustive (the measured search) only");
  if (settings.search_l2 == SearchL2::cold && settings.algorithm != AlgorithmPolicy::exhaustive)
    throw UsageError("[engine] search_l2 = cold applies to algo = exhaustive (the measured search) only");
  if (settings.search_in_step && (settings.algorithm != AlgorithmPolicy::exhaustive || !settings.cuda_graphs))
    throw UsageError("[engine] search_in_step applies to algo = exhaustive with cuda_graphs = true (it times the "
                     "graphed step)");
  if (settings.conv_statistics && settings.algorithm != AlgorithmPolicy::exhaustive)
    throw UsageError("[engine] conv_statistics applies to algo = exhaustive (the statistics graph is chosen by the "
                     "measured search)");
  if (settings.search_warmup_ms > 0 && settings.algorithm != AlgorithmPolicy::exhaustive)
    throw UsageError("[engine] search_warmup_ms applies to algo = exhaustive (the measured search) only");
  return settings;
}

std::string search_timing_context(bool cuda_graphs, SearchL2 l2, int warmup_ms) {
  return std::string(cuda_graphs ? " timing=graphed" : " timing=eager") + (l2 == SearchL2::cold ? " l2=cold" : "") +
         (warmup_ms > 0 ? " warmup=" + std::to_string(warmup_ms) + "ms" : "");
}

std::string search_warmup_decision(const CudnnSettings& settings) {
  return settings.algorithm == AlgorithmPolicy::exhaustive && settings.search_warmup_ms > 0
             ? "search_warmup=" + std::to_string(settings.search_warmup_ms) + "ms"
             : "";
}

std::int64_t session_pool_spacer_bytes(const CudnnSettings& settings) {
  return settings.pool_spacer_bytes * (settings.session_of_cell % 4);
}

std::string pool_spacer_decision(const CudnnSettings& settings) {
  if (settings.pool_spacer_bytes <= 0) return "";
  return " pool_spacer=" + std::to_string(session_pool_spacer_bytes(settings) >> 20) + "MiB(session " +
         std::to_string(settings.session_of_cell) + " of the cell)";
}

std::string jit_cache_decision(const char* cache_disable, const char* cache_path) {
  if (cache_disable != nullptr && std::string(cache_disable) == "1") return "jit_cache=disabled";
  if (cache_path != nullptr && *cache_path != '\0') {
    // Percent-encoded where the decisions' own separators (space, ';', ',') or '%' would cut the token.
    std::string text = "jit_cache=";
    for (const char c : std::string(cache_path)) {
      if (c == ' ' || c == ';' || c == ',' || c == '%' || c == '\t' || c == '\n') {
        static constexpr char kHex[] = "0123456789ABCDEF";
        const auto byte = static_cast<unsigned char>(c);
        text += '%';
        text += kHex[byte >> 4];
        text += kHex[byte & 0xF];
      } else {
        text += c;
      }
    }
    return text;
  }
  return "jit_cache=default";
}

std::string jit_cache_decision() {
  return jit_cache_decision(std::getenv("CUDA_CACHE_DISABLE"), std::getenv("CUDA_CACHE_PATH"));
}

std::string search_l2_decision(const CudnnSettings& settings) {
  return settings.algorithm == AlgorithmPolicy::exhaustive && settings.search_l2 == SearchL2::cold ? "search_l2=cold"
                                                                                                    : "";
}

void check_cudnn_settings(const EngineConfig& config) {
  const CudnnSettings settings = cudnn_settings(config);
  if (!settings.algorithm_cache_path.empty()) {
    AlgorithmCache(std::filesystem::path(settings.algorithm_cache_path), {});
    // The compiled plans beside it (engine.graph_plan_reuse): a file that is not a plan store is refused here
    // too, before any cell, as a corrupt cache is.
    if (settings.graph_plan_reuse) GraphPlanStore(std::filesystem::path(settings.algorithm_cache_path + ".plans"), {});
  }
}

}  // namespace crossbench::cudnn
