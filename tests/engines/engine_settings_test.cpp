// Each engine's own settings, parsed from the run's canonical schema text
// (EngineConfig::settings): schema defaults for absent keys, every value held
// to its schema row, the cross-key rules in the engine's one place.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "crossbench/engine.hpp"
#include "crossbench/error.hpp"
#include "engines/cudnn/cudnn_settings.hpp"
#include "crossbench/data_paths.hpp"
#include "engines/worker/worker_engine.hpp"
#include "engines/worker/worker_settings.hpp"

namespace crossbench {
namespace {

TEST(EngineSettings, AbsentKeysHaveTheirSchemaDefaults) {
  const EngineConfig config;
  EXPECT_EQ(config.setting("engine.layout"), "auto");
  EXPECT_EQ(config.setting("measure.cell_time_limit_s"), "600");
  EXPECT_THROW(config.setting("engine.colour"), Error);  // not a schema key: a programming error
  const cudnn::CudnnSettings defaults = cudnn::cudnn_settings(config);
  const cudnn::CudnnSettings plain;
  EXPECT_EQ(defaults.algorithm, plain.algorithm);
  EXPECT_EQ(defaults.layout, plain.layout);
  EXPECT_EQ(defaults.workspace_limit_bytes, plain.workspace_limit_bytes);
  EXPECT_EQ(defaults.cuda_graphs, plain.cuda_graphs);
  EXPECT_TRUE(defaults.algorithm_cache_path.empty());
}

TEST(EngineSettings, TheCudnnEngineReadsItsKeys) {
  EngineConfig config;
  config.settings = {{"engine.algo", "exhaustive"},
                     {"engine.layout", "nhwc"},
                     {"engine.workspace_limit_mb", "256"},
                     {"engine.cuda_graphs", "true"}};
  const cudnn::CudnnSettings settings = cudnn::cudnn_settings(config);
  EXPECT_EQ(settings.algorithm, cudnn::AlgorithmPolicy::exhaustive);
  EXPECT_EQ(settings.layout, cudnn::Layout::nhwc);
  EXPECT_EQ(settings.workspace_limit_bytes, 256LL << 20);
  EXPECT_TRUE(settings.cuda_graphs);
  check_engine_settings(config);

  config.settings["engine.layout"] = "nhwd";  // outside the schema row
  EXPECT_THROW(cudnn::cudnn_settings(config), UsageError);
}

TEST(EngineSettings, AnAlgorithmCacheNeedsTheMeasuredSearch) {
  EngineConfig config;
  config.settings = {{"engine.algo_cache", "/nonexistent/algorithms.json"}};
  try {
    check_engine_settings(config);
    FAIL() << "algo_cache with the heuristic accepted";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("algo_cache applies to algo = exhaustive"), std::string::npos) << error.what();
  }
  config.settings["engine.algo"] = "exhaustive";  // a missing file is a cold cache
  EXPECT_NO_THROW(check_engine_settings(config));
}

// engine.search_l2: the L2 state of the measured search's timed runs.
TEST(EngineSettings, TheSearchL2PolicyIsAKeyOfItsOwn) {
  EngineConfig config;
  EXPECT_EQ(config.setting("engine.search_l2"), "warm");  // the schema default: today's search
  EXPECT_EQ(cudnn::cudnn_settings(config).search_l2, cudnn::SearchL2::warm);
  EXPECT_EQ(cudnn::CudnnSettings{}.search_l2, cudnn::SearchL2::warm);
  config.settings = {{"engine.algo", "exhaustive"}, {"engine.search_l2", "cold"}};
  EXPECT_EQ(cudnn::cudnn_settings(config).search_l2, cudnn::SearchL2::cold);
  EXPECT_NO_THROW(check_engine_settings(config));
  config.settings["engine.search_l2"] = "warm";
  EXPECT_EQ(cudnn::cudnn_settings(config).search_l2, cudnn::SearchL2::warm);
}

// engine.search_tie: the measured search's tie margin, 0.001 unless set, held to (0, 0.5].
TEST(EngineSettings, TheSearchTieIsAFractionOfItsOwn) {
  EngineConfig config;
  EXPECT_EQ(config.setting("engine.search_tie"), "0.001");
  EXPECT_DOUBLE_EQ(cudnn::cudnn_settings(config).search_tie, cudnn::kTieFraction);
  EXPECT_DOUBLE_EQ(cudnn::CudnnSettings{}.search_tie, cudnn::kTieFraction);
  config.settings = {{"engine.algo", "exhaustive"}, {"engine.search_tie", "0.03"}};
  EXPECT_DOUBLE_EQ(cudnn::cudnn_settings(config).search_tie, 0.03);
  for (const char* bad : {"0", "-0.01", "0.6", "a few", ""}) {
    config.settings["engine.search_tie"] = bad;
    try {
      static_cast<void>(cudnn::cudnn_settings(config));
      ADD_FAILURE() << "search_tie = '" << bad << "' accepted";
    } catch (const UsageError& error) {
      EXPECT_NE(std::string(error.what()).find("search_tie"), std::string::npos) << error.what();
    }
  }
}

TEST(EngineSettings, ABadSearchL2ValueNamesTheKeyAndTheValues) {
  EngineConfig config;
  config.settings = {{"engine.algo", "exhaustive"}, {"engine.search_l2", "hot"}};
  try {
    static_cast<void>(cudnn::cudnn_settings(config));
    FAIL() << "search_l2 = hot accepted";
  } catch (const UsageError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("[engine] search_l2"), std::string::npos) << message;
    EXPECT_NE(message.find("'hot'"), std::string::npos) << message;
    EXPECT_NE(message.find("warm, cold"), std::string::npos) << message;
  }
}

TEST(EngineSettings, AColdSearchNeedsTheMeasuredSearch) {
  EngineConfig config;
  config.settings = {{"engine.search_l2", "cold"}};  // algo = heuristic: nothing is timed
  try {
    check_engine_settings(config);
    FAIL() << "search_l2 = cold with the heuristic accepted";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("search_l2 = cold applies to algo = exhaustive"), std::string::npos)
        << error.what();
  }
}

// The policy is part of every algorithm cache key (algorithms.cpp's timing_of):
// warm keeps the keys measured before the option, cold has records of its own.
TEST(EngineSettings, TheSearchL2PolicyIsPartOfTheCacheKey) {
  using cudnn::SearchL2;
  EXPECT_EQ(cudnn::search_timing_context(true, SearchL2::warm), " timing=graphed");
  EXPECT_EQ(cudnn::search_timing_context(false, SearchL2::warm), " timing=eager");
  EXPECT_EQ(cudnn::search_timing_context(true, SearchL2::cold), " timing=graphed l2=cold");
  EXPECT_EQ(cudnn::search_timing_context(false, SearchL2::cold), " timing=eager l2=cold");
  for (const bool graphs : {true, false})
    EXPECT_NE(cudnn::search_timing_context(graphs, SearchL2::warm), cudnn::search_timing_context(graphs, SearchL2::cold));
}

// engine.search_warmup_ms: records of their own where above 0; 0 keeps the keys measured before it.
TEST(EngineSettings, TheSearchWarmupIsPartOfTheCacheKey) {
  using cudnn::SearchL2;
  EXPECT_EQ(cudnn::search_timing_context(true, SearchL2::warm, 0), " timing=graphed");
  EXPECT_EQ(cudnn::search_timing_context(true, SearchL2::warm, 5), " timing=graphed warmup=5ms");
  EXPECT_EQ(cudnn::search_timing_context(false, SearchL2::cold, 20), " timing=eager l2=cold warmup=20ms");
  EXPECT_NE(cudnn::search_timing_context(true, SearchL2::warm, 5), cudnn::search_timing_context(true, SearchL2::warm, 10));
}

TEST(EngineSettings, TheSearchWarmupIsReadAndInTheDecisions) {
  EngineConfig config;
  config.settings = {{"engine.algo", "exhaustive"}, {"engine.search_warmup_ms", "5"}};
  cudnn::CudnnSettings settings = cudnn::cudnn_settings(config);
  EXPECT_EQ(settings.search_warmup_ms, 5);
  EXPECT_EQ(cudnn::search_warmup_decision(settings), "search_warmup=5ms");
  settings.search_warmup_ms = 0;
  EXPECT_EQ(cudnn::search_warmup_decision(settings), "");  // the searches before the option, unmarked
  config.settings = {{"engine.algo", "exhaustive"}};
  EXPECT_EQ(cudnn::cudnn_settings(config).search_warmup_ms, 0) << "the schema's default";
}

TEST(EngineSettings, ThePoolSpacerGrowsWithTheCellsSessionIndexAndIsInTheDecisions) {
  EngineConfig config;
  config.settings = {{"engine.pool_spacer_mb", "512"}};
  cudnn::CudnnSettings settings = cudnn::cudnn_settings(config);
  EXPECT_EQ(settings.pool_spacer_bytes, 512LL << 20);
  // Consecutive sessions of a cell (--repetitions) hold 0, 1, 2, 3 times the setting, then again.
  const std::int64_t mib = 1LL << 20;
  const std::vector<std::int64_t> held{0, 512 * mib, 1024 * mib, 1536 * mib, 0, 512 * mib};
  for (int session = 0; session < static_cast<int>(held.size()); ++session) {
    settings.session_of_cell = session;
    EXPECT_EQ(cudnn::session_pool_spacer_bytes(settings), held[static_cast<std::size_t>(session)]) << session;
  }
  settings.session_of_cell = 2;
  EXPECT_EQ(cudnn::pool_spacer_decision(settings), " pool_spacer=1024MiB(session 2 of the cell)");
  config.settings = {};
  settings = cudnn::cudnn_settings(config);
  EXPECT_EQ(settings.pool_spacer_bytes, 0) << "the schema's default: none";
  settings.session_of_cell = 3;
  EXPECT_EQ(cudnn::session_pool_spacer_bytes(settings), 0);
  EXPECT_EQ(cudnn::pool_spacer_decision(settings), "") << "a run without the setting says nothing of it";
}

// The CUDA JIT cache a cell's runtime-compiled Graph API plans found, as its decisions name it.
TEST(CudnnSettings, TheJitCacheDecisionNamesWhatTheDriverUses) {
  EXPECT_EQ(cudnn::jit_cache_decision(nullptr, nullptr), "jit_cache=default");
  EXPECT_EQ(cudnn::jit_cache_decision(nullptr, ""), "jit_cache=default") << "an empty path is the default";
  EXPECT_EQ(cudnn::jit_cache_decision(nullptr, "/scratch/jit"), "jit_cache=/scratch/jit");
  EXPECT_EQ(cudnn::jit_cache_decision("1", "/scratch/jit"), "jit_cache=disabled") << "disabled wins over a path";
  EXPECT_EQ(cudnn::jit_cache_decision("0", "/scratch/jit"), "jit_cache=/scratch/jit");
  EXPECT_EQ(cudnn::jit_cache_decision(nullptr, "/my jit;cache,100%"), "jit_cache=/my%20jit%3Bcache%2C100%25")
      << "the decisions' separators are encoded: the path stays one field";
}

// The cuDNN engine refuses `settings` with a UsageError whose text holds `message`.
void expect_cudnn_refuses(const std::map<std::string, std::string>& settings, const std::string& message) {
  EngineConfig config;
  config.settings = settings;
  try {
    static_cast<void>(cudnn::cudnn_settings(config));
    ADD_FAILURE() << "accepted, expected: " << message;
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find(message), std::string::npos) << error.what();
  }
}

TEST(EngineSettings, GraphPlanReuseIsOnByDefaultWhereTheMeasuredSearchRuns) {
  EngineConfig config;
  config.settings = {{"engine.algo", "exhaustive"}};
  EXPECT_TRUE(cudnn::cudnn_settings(config).graph_plan_reuse) << "the schema's default: on";
  EXPECT_TRUE(cudnn::CudnnSettings{}.graph_plan_reuse) << "the struct's default is the schema's";
  config.settings["engine.graph_plan_reuse"] = "false";
  EXPECT_FALSE(cudnn::cudnn_settings(config).graph_plan_reuse);
  // The heuristic policy builds no measured Graph API plans: nothing to restore, so no effect (as graph_api).
  config.settings = {{"engine.graph_plan_reuse", "true"}};
  EXPECT_FALSE(cudnn::cudnn_settings(config).graph_plan_reuse);
  EXPECT_FALSE(cudnn::cudnn_settings(EngineConfig{}).graph_plan_reuse) << "algo's default is heuristic";
}

TEST(EngineSettings, GraphFromCacheIsOnByDefaultWhereTheMeasuredSearchRunsWithoutTheInStepSearch) {
  EngineConfig config;
  config.settings = {{"engine.algo", "exhaustive"}};
  EXPECT_TRUE(cudnn::cudnn_settings(config).graph_from_cache) << "the schema's default: on";
  EXPECT_TRUE(cudnn::CudnnSettings{}.graph_from_cache) << "the struct's default is the schema's";
  config.settings["engine.graph_from_cache"] = "false";
  EXPECT_FALSE(cudnn::cudnn_settings(config).graph_from_cache);
  config.settings = {{"engine.graph_from_cache", "true"}};
  EXPECT_FALSE(cudnn::cudnn_settings(config).graph_from_cache) << "the heuristic policy: no effect";
  // The in-step search's options are the graph's other plans, which a graph of one configuration lacks: the
  // in-step search keeps its whole graphs.
  config.settings = {{"engine.algo", "exhaustive"}, {"engine.cuda_graphs", "true"}, {"engine.search_in_step", "true"},
                     {"engine.graph_from_cache", "true"}};
  const cudnn::CudnnSettings settings = cudnn::cudnn_settings(config);
  EXPECT_TRUE(settings.search_in_step);
  EXPECT_FALSE(settings.graph_from_cache);
}

TEST(EngineSettings, ConvStatisticsIsReadAndNeedsTheMeasuredSearch) {
  EngineConfig config;
  EXPECT_FALSE(cudnn::cudnn_settings(config).conv_statistics) << "the schema's default: off";
  config.settings = {{"engine.algo", "exhaustive"}, {"engine.conv_statistics", "true"}};
  EXPECT_TRUE(cudnn::cudnn_settings(config).conv_statistics);
  // The statistics graph is chosen by measurement only.
  expect_cudnn_refuses({{"engine.conv_statistics", "true"}}, "[engine] conv_statistics applies to algo = exhaustive");
}

TEST(EngineSettings, ANegativePoolSpacerNamesTheKeyAndItsRange) {
  EngineConfig config;
  config.settings = {{"engine.pool_spacer_mb", "-1"}};
  try {
    static_cast<void>(cudnn::cudnn_settings(config));
    FAIL() << "pool_spacer_mb = -1 accepted";
  } catch (const UsageError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("pool_spacer_mb"), std::string::npos) << message;
    EXPECT_NE(message.find("-1"), std::string::npos) << message;
  }
}

TEST(EngineSettings, ASearchWarmupNeedsTheMeasuredSearch) {
  EngineConfig config;
  config.settings = {{"engine.search_warmup_ms", "5"}};  // algo = heuristic: nothing is timed
  try {
    check_engine_settings(config);
    FAIL() << "search_warmup_ms with the heuristic accepted";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("search_warmup_ms applies to algo = exhaustive"), std::string::npos)
        << error.what();
  }
}

TEST(EngineSettings, TheInStepChoiceNeedsTheMeasuredSearchAndGraphs) {
  EngineConfig config;
  config.settings = {{"engine.algo", "exhaustive"}, {"engine.cuda_graphs", "true"}, {"engine.search_in_step", "true"}};
  EXPECT_TRUE(cudnn::cudnn_settings(config).search_in_step);
  config.settings = {{"engine.algo", "exhaustive"}};
  EXPECT_FALSE(cudnn::cudnn_settings(config).search_in_step) << "off by default";
  for (const auto& [algo, graphs] : {std::pair{"heuristic", "true"}, std::pair{"exhaustive", "false"}}) {
    config.settings = {{"engine.algo", algo}, {"engine.cuda_graphs", graphs}, {"engine.search_in_step", "true"}};
    try {
      check_engine_settings(config);
      FAIL() << "search_in_step accepted with algo = " << algo << ", cuda_graphs = " << graphs;
    } catch (const UsageError& error) {
      EXPECT_NE(std::string(error.what()).find("search_in_step applies to algo = exhaustive with cuda_graphs = true"),
                std::string::npos)
          << error.what();
    }
  }
}

TEST(EngineSettings, AColdSearchIsInTheDecisions) {
  cudnn::CudnnSettings settings;
  settings.algorithm = cudnn::AlgorithmPolicy::exhaustive;
  EXPECT_EQ(cudnn::search_l2_decision(settings), "");  // warm: the decisions as before
  settings.search_l2 = cudnn::SearchL2::cold;
  EXPECT_EQ(cudnn::search_l2_decision(settings), "search_l2=cold");
  settings.algorithm = cudnn::AlgorithmPolicy::heuristic;
  EXPECT_EQ(cudnn::search_l2_decision(settings), "");  // no search, nothing timed
}

TEST(EngineSettings, AWorkerEngineIsOneWithACommand) {
  EngineConfig config;
  EXPECT_FALSE(worker_settings(config, "pytorch").has_value());
  config.settings = {{worker_command_key("pytorch"), "python3  {workers}/pytorch/worker.py"},
                     {"measure.cell_time_limit_s", "30"},
                     {"engine.compile_mode", "max-autotune"}};
  const auto settings = worker_settings(config, "pytorch");
  ASSERT_TRUE(settings.has_value());
  ASSERT_EQ(settings->command.size(), 2u);
  EXPECT_EQ(settings->command[1], (data_paths().workers / "pytorch" / "worker.py").string());
  EXPECT_DOUBLE_EQ(settings->timeout_s, 30);

  config.settings[worker_command_key("jax")] = "  ";
  EXPECT_THROW(check_engine_settings(config), UsageError);
}

}  // namespace
}  // namespace crossbench
