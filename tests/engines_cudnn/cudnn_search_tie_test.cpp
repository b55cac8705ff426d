// engine.search_tie on a GPU (label `gpu`; every test skips with a reason when
// no GPU is visible): the measured search orders its candidates by the run's
// margin, both when it measures them and when it replays a record measured
// under another margin, and the cell's decisions name the margin.
#include <cuda_runtime.h>
#include <cudnn.h>
#include <gtest/gtest.h>

#include <algorithm>
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

// A 3x3 convolution, 64 -> 64 channels on 28x28, batch 8, fp32 NCHW, searched forward: first with a
// margin of 0.001 (the record's fastest median first), then replayed from the same cache under 0.5
// (the heuristic's preference among everything within 50%), and the record itself untouched by either.
TEST(CudnnSearchTie, TheRunsMarginOrdersAMeasuredAndAReplayedRecord) {
  SKIP_WITHOUT_GPU();
  const SearchTestHandles handles;
  handles.bind();
  if (HasFatalFailure()) return;
  const CudnnHandle& dnn = handles.dnn;
  const Stream& stream = handles.stream;
  AlgorithmCache cache{std::filesystem::path(), MeasurementContext{}};

  SearchTestProblem layer;
  layer.describe();
  if (HasFatalFailure()) return;
  const ConvolutionProblem problem = layer.problem();

  std::string key;
  std::vector<MeasuredCandidate> recorded;
  for (const double margin : {0.001, 0.5}) {
    CudnnConfig config;
    config.algorithm = AlgorithmPolicy::exhaustive;
    config.search_tie = margin;
    SetupContext ctx(dnn, stream, config, Precision::fp32, std::int64_t{256} << 20);
    ctx.algorithm_cache = &cache;
    SearchTestProblem::reserve(ctx);
    key = "conv.forward " + problem_signature(ctx, problem) + " timing=eager";
    const auto forward = forward_candidates(ctx, problem);
    ASSERT_FALSE(forward.empty());
    const MeasuredChoice* record = cache.find(key);
    ASSERT_NE(record, nullptr);
    if (recorded.empty()) recorded = record->candidates;  // measured under 0.001
    ASSERT_EQ(record->candidates.size(), recorded.size()) << "a replay leaves the record as it was";
    std::vector<MeasuredCandidate> expected = recorded;
    order_by_median(expected, margin);
    EXPECT_EQ(forward.front().algorithm, expected.front().algorithm) << margin;
    EXPECT_EQ(static_cast<int>(forward.front().math), expected.front().math) << margin;
    if (margin < 0.01) {
      const auto fastest = std::min_element(recorded.begin(), recorded.end(), [](const auto& a, const auto& b) {
        return a.median_ms < b.median_ms;
      });
      EXPECT_LE(expected.front().median_ms, fastest->median_ms * 1.001) << "0.001: the fastest median";
    }
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// A whole cell: its decisions name the margin it searched with.
TEST(CudnnSearchTie, TheMarginIsInTheCellsDecisions) {
  SKIP_WITHOUT_GPU();
  const Network network = make_network("alexnet");
  EngineConfig config;
  config.seed = 42;
  CudnnSettings settings;
  settings.algorithm = AlgorithmPolicy::exhaustive;
  settings.cuda_graphs = true;
  settings.search_tie = 0.001;
  auto engine = make_cudnn_engine(probe_gpu(0, ""), config, settings);
  auto session = engine->prepare(network, {"cudnn", "alexnet", Precision::tf32, 2, Phase::training, 0});
  const std::string d = session->record().decisions;
  EXPECT_NE(d.find("search_tie=0.001"), std::string::npos) << d;
  EXPECT_TRUE(session->check().finite) << d;
}

}  // namespace
}  // namespace crossbench::cudnn
