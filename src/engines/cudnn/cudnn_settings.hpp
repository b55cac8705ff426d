// The cuDNN engine's own settings: its [engine] keys of the options schema
// (include/crossbench/options_schema.hpp declares them once), parsed and
// checked here, in one place, out of EngineConfig::settings. Plain C++ (no
// CUDA): every build checks them before a run starts (check_engine_settings).
#pragma once

#include <cstdint>
#include <string>

#include "crossbench/engine.hpp"
#include "engines/cudnn/algorithm_cache.hpp"

namespace crossbench::cudnn {

enum class AlgorithmPolicy : std::uint8_t { heuristic, exhaustive };
enum class Layout : std::uint8_t { automatic, nchw, nhwc };
// The L2 state each timed run of the measured search starts in (engine.search_l2):
// warm, back to back (a candidate's operands stay L2-resident from its previous run);
// cold, after a write of twice the device's L2 (as a step's operands, written long before).
enum class SearchL2 : std::uint8_t { warm, cold };

struct CudnnSettings {
  AlgorithmPolicy algorithm = AlgorithmPolicy::heuristic;  // engine.algo: convolution algorithm choice
  std::string algorithm_cache_path;  // engine.algo_cache: exhaustive: measured choices saved and replayed (JSON); empty: in memory
  std::int64_t workspace_limit_bytes = 1LL << 30;  // engine.workspace_limit_mb: per convolution [bytes]
  Layout layout = Layout::automatic;  // engine.layout: automatic: NCHW for fp32, NHWC for tf32, fp16, bf16 (measured)
  bool cuda_graphs = false;           // engine.cuda_graphs: capture the step as a CUDA graph and replay it
  bool graph_api = true;              // engine.graph_api: exhaustive: Graph API engine configurations are candidates too
  bool fuse = true;                   // engine.fuse: lower the kit's fused groups (off: every layer its own ops)
  SearchL2 search_l2 = SearchL2::warm;  // engine.search_l2: exhaustive: the L2 state of every timed search run
  bool search_in_step = false;  // engine.search_in_step: exhaustive + graphs: near-tied Graph API plans timed inside the step
  int search_warmup_ms = 0;          // engine.search_warmup_ms: exhaustive: untimed GPU time of each candidate before its timed runs [ms]
  double search_tie = kTieFraction;  // engine.search_tie (its schema default is kTieFraction's value): exhaustive: medians within this fraction of the fastest are a tie
  bool graph_plan_reuse = true;   // engine.graph_plan_reuse: exhaustive: runtime-compiled plans restored across sessions
  bool graph_from_cache = true;   // engine.graph_from_cache: exhaustive, no search_in_step: a replay creates only its chosen Graph API plans
  bool conv_statistics = false;   // engine.conv_statistics: exhaustive, training: batch-norm statistics from the convolution
  std::int64_t pool_spacer_bytes = 0;  // engine.pool_spacer_mb: held before a session's pool, times (its index mod 4) [bytes]
  // Not a schema key: the session's index among consecutive sessions of the same cell (0, 1, ...: the
  // repetitions of --repetitions), set by the engine for each session (engine.pool_spacer_mb).
  int session_of_cell = 0;
  // Not schema keys: tests turn one fusion off to hold it to the unfused ops
  // with everything else alike (ReluPoolFusion, FullyConnectedFusion): with
  // engine.fuse false the convolutions' own fusions change too, and their
  // last-bit differences move max pools' argmax and relu masks.
  bool fold_relu_into_pool = true;
  bool fc_epilogues = true;  // false: fully-connected layers on cublasGemmEx and our kernels, fc_bias_relu refused
};

// Reads the engine's keys of `config.settings` (schema defaults for absent
// ones). Throws UsageError for a value outside its schema row and for
// engine.algo_cache without algo = exhaustive.
CudnnSettings cudnn_settings(const EngineConfig& config);
// cudnn_settings(), and the algorithm cache file read once, so that a file
// that is not a cache is refused (UsageError naming it) before any cell runs;
// a missing file is a cold cache. The engine reads it again when created.
void check_cudnn_settings(const EngineConfig& config);

// The timing context of the measured search's records, appended to every
// algorithm cache key (algorithms.cpp): graphed or eager runs, and " l2=cold"
// under SearchL2::cold. Warm adds nothing, so caches measured before
// engine.search_l2 existed (warm) stay valid, and a record measured warm is
// never replayed as cold, nor the reverse; likewise " warmup=<ms>ms" where
// engine.search_warmup_ms is above 0 (0, the searches before it, adds nothing).
std::string search_timing_context(bool cuda_graphs, SearchL2 l2, int warmup_ms = 0);
// The search's L2 policy for a cell's decisions: "search_l2=cold" under cold
// with the measured search, else empty (warm is today's search, unmarked).
std::string search_l2_decision(const CudnnSettings& settings);
// "search_warmup=<ms>ms" with the measured search and a warm-up above 0, else empty.
std::string search_warmup_decision(const CudnnSettings& settings);

// engine.pool_spacer_mb: what the session of this index holds before its pool [bytes]: the setting times
// (index mod 4), so three consecutive sessions (--repetitions 3) hold three different spacers.
[[nodiscard]] std::int64_t session_pool_spacer_bytes(const CudnnSettings& settings);
// " pool_spacer=<MiB>MiB(session <k> of the cell)" where the setting is above 0, else empty.
[[nodiscard]] std::string pool_spacer_decision(const CudnnSettings& settings);

// The CUDA driver's on-disk JIT cache as this process finds it, for the decisions of a cell that compiled
// Graph API plans at runtime: cuDNN's NVRTC-compiled kernels land there, so a process that finds it warm
// compiles in about half the time (bench/results/2026-12-14, call 84: 14 runtime-compiled graphs in 11.0 and
// 12.1 s from an empty cache, 6.4 s from the one an earlier process filled). "jit_cache=disabled"
// (CUDA_CACHE_DISABLE=1), "jit_cache=<CUDA_CACHE_PATH>" (space, ';', ',' and '%' percent-encoded, so that
// the path stays one field of one token), or "jit_cache=default" (the driver's
// ~/.nv/ComputeCache). The arguments are the two variables' values (null: unset); the overload reads them.
[[nodiscard]] std::string jit_cache_decision(const char* cache_disable, const char* cache_path);
[[nodiscard]] std::string jit_cache_decision();

// What the engine's code sees: the settings every engine shares and its own.
struct CudnnConfig : EngineConfig, CudnnSettings {
  CudnnConfig() = default;
  CudnnConfig(const EngineConfig& shared, const CudnnSettings& own) : EngineConfig(shared), CudnnSettings(own) {}
};

}  // namespace crossbench::cudnn
