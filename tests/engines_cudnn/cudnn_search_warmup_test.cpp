// engine.search_warmup_ms on a GPU (label `gpu`; every test skips with a
// reason when no GPU is visible): each candidate the measured search re-times
// first runs untimed for at least the warm-up's GPU time, its records go under
// the warm-up's own timing context, and a cell's decisions say so.
#include <cuda_runtime.h>
#include <cudnn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>

#include "crossbench/device.hpp"
#include "crossbench/engine.hpp"
#include "crossbench/network.hpp"
#include "engines/cudnn/algorithm_cache.hpp"
#include "engines/cudnn/algorithms.hpp"
#include "engines/cudnn/cudnn_engine.hpp"
#include "engines/cudnn/graph.hpp"
#include "engines/cudnn/handles.hpp"
#include "search_test_problem.hpp"

namespace crossbench::cudnn {
namespace {

constexpr int kWarmupMs = 20;  // long beside the test problem's candidates (well under 1 ms each)

class WarmSearch : public ::testing::TestWithParam<bool> {};  // CUDA graphs: the graphed or the eager runs

TEST_P(WarmSearch, EveryRetimedCandidateRunsTheWarmupFirst) {
  SKIP_WITHOUT_GPU();
  const bool graphs = GetParam();
  const SearchTestHandles handles;
  handles.bind();
  if (HasFatalFailure()) return;
  const CudnnHandle& dnn = handles.dnn;
  const Stream& stream = handles.stream;
  CudnnConfig config;
  config.algorithm = AlgorithmPolicy::exhaustive;
  config.cuda_graphs = graphs;
  config.search_warmup_ms = kWarmupMs;
  AlgorithmCache cache{std::filesystem::path(), MeasurementContext{}};

  SearchTestProblem layer;
  layer.describe();
  if (HasFatalFailure()) return;
  const ConvolutionProblem problem = layer.problem();

  SetupContext ctx(dnn, stream, config, Precision::fp32, std::int64_t{256} << 20);
  ctx.algorithm_cache = &cache;
  SearchTestProblem::reserve(ctx);
  const std::string signature = problem_signature(ctx, problem);

  const auto began = std::chrono::steady_clock::now();
  const auto forward = forward_candidates(ctx, problem);
  const double search_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count();
  ASSERT_FALSE(forward.empty());
  EXPECT_TRUE(forward.front().valid());
  int retimed = 0;  // the candidates with a median: each was warmed up before its timed runs
  for (const AlgorithmChoice& c : forward) {
    if (!std::isfinite(c.time_ms)) continue;
    ++retimed;
    EXPECT_LT(c.time_ms, kWarmupMs) << "the test needs candidates shorter than the warm-up";
  }
  ASSERT_GE(retimed, 1);
  // A lower bound only: the warm-up's GPU time less one run of slack per candidate (its first, timed
  // launch can be the whole warm-up where a run is slow).
  EXPECT_GE(search_ms, retimed * (kWarmupMs - 1.0)) << retimed << " re-timed candidates";

  const std::string timing = graphs ? " timing=graphed" : " timing=eager";
  EXPECT_NE(cache.find("conv.forward " + signature + timing + " warmup=20ms"), nullptr);
  EXPECT_EQ(cache.find("conv.forward " + signature + timing), nullptr) << "never replayed without the warm-up";
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

INSTANTIATE_TEST_SUITE_P(CudnnSearchWarmup, WarmSearch, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "graphed" : "eager"; });

// A whole cell searched with the warm-up: the decisions say so (none without it), and the graphed
// step it times computes finite logits.
TEST(CudnnSearchWarmup, TheWarmupIsInTheCellsDecisions) {
  SKIP_WITHOUT_GPU();
  const Network network = make_network("alexnet");
  for (const int warmup_ms : {2, 0}) {
    EngineConfig config;
    config.seed = 42;
    CudnnSettings settings;
    settings.algorithm = AlgorithmPolicy::exhaustive;
    settings.cuda_graphs = true;
    settings.search_warmup_ms = warmup_ms;
    auto engine = make_cudnn_engine(probe_gpu(0, ""), config, settings);
    auto session = engine->prepare(network, {"cudnn", "alexnet", Precision::tf32, 2, Phase::training, 0});
    const std::string d = session->record().decisions;
    EXPECT_EQ(d.find("search_warmup=2ms") != std::string::npos, warmup_ms == 2) << d;
    EXPECT_EQ(d.find("search_warmup="), d.find("search_warmup=2ms")) << d;
    EXPECT_TRUE(session->check().finite) << d;
  }
}

}  // namespace
}  // namespace crossbench::cudnn
