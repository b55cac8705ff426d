// engine.search_l2 = cold on a GPU (label `gpu`; every test skips with a
// reason when no GPU is visible): the measured search flushes the L2 before
// every timed run, with a buffer of twice the device's L2 owned by the search
// context, still picks a candidate, records it under the cold timing context
// only, and says so in the cell's decisions.
#include <cuda_runtime.h>
#include <cudnn.h>
#include <gtest/gtest.h>

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

std::size_t device_l2_bytes() {
  int device = 0, l2 = 0;
  EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), cudaSuccess);
  return static_cast<std::size_t>(l2);
}

// A 3x3 convolution, 64 -> 64 channels on 28x28, batch 8, fp32 NCHW: searched
// forward and backward-filter (the direction of the H200's misleading warm choice).
class ColdSearch : public ::testing::TestWithParam<bool> {};  // CUDA graphs: the graphed or the eager runs

TEST_P(ColdSearch, PicksACandidateWithATwiceL2FlushBuffer) {
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
  config.search_l2 = SearchL2::cold;
  AlgorithmCache cache{std::filesystem::path(), MeasurementContext{}};

  SearchTestProblem layer;
  layer.describe();
  if (HasFatalFailure()) return;
  const ConvolutionProblem problem = layer.problem();

  std::size_t flush_bytes = 0;
  {
    SetupContext ctx(dnn, stream, config, Precision::fp32, std::int64_t{256} << 20);
    ctx.algorithm_cache = &cache;
      SearchTestProblem::reserve(ctx);
    EXPECT_EQ(ctx.l2_flush_bytes(), 0u) << "allocated with the arena, on first use";
    const std::string signature = problem_signature(ctx, problem);

    const auto forward = forward_candidates(ctx, problem);
    ASSERT_FALSE(forward.empty());
    EXPECT_TRUE(forward.front().valid());
    EXPECT_TRUE(std::isfinite(forward.front().time_ms)) << "the chosen candidate's cold median";
    EXPECT_GT(forward.front().time_ms, 0.0f);
    const auto filters = backward_filter_candidates(ctx, problem);
    ASSERT_FALSE(filters.empty());
    EXPECT_TRUE(filters.front().valid());
    EXPECT_TRUE(std::isfinite(filters.front().time_ms));

    flush_bytes = ctx.l2_flush_bytes();
    EXPECT_EQ(flush_bytes, 2 * device_l2_bytes()) << "twice the device's L2";
    EXPECT_GE(ctx.arena_peak_bytes(), static_cast<std::int64_t>(flush_bytes)) << "the flush buffer is search memory";

    // Recorded under the cold timing context only: a warm search never replays it.
    const std::string timing = graphs ? " timing=graphed" : " timing=eager";
    EXPECT_NE(cache.find("conv.forward " + signature + timing + " l2=cold"), nullptr);
    EXPECT_NE(cache.find("conv.backward-filter " + signature + timing + " l2=cold"), nullptr);
    EXPECT_EQ(cache.find("conv.forward " + signature + timing), nullptr);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  }  // the search context, and with it the flush buffer, ends here
  EXPECT_GT(flush_bytes, 0u);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

INSTANTIATE_TEST_SUITE_P(CudnnSearchL2, ColdSearch, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "graphed" : "eager"; });

// A whole cell searched cold: the decisions say so; warm ones do not.
TEST(CudnnSearchL2, AColdSearchIsInTheCellsDecisions) {
  SKIP_WITHOUT_GPU();
  const Network network = make_network("alexnet");
  for (const SearchL2 l2 : {SearchL2::cold, SearchL2::warm}) {
    EngineConfig config;
    config.seed = 42;
    CudnnSettings settings;
    settings.algorithm = AlgorithmPolicy::exhaustive;
    settings.cuda_graphs = true;
    settings.search_l2 = l2;
    auto engine = make_cudnn_engine(probe_gpu(0, ""), config, settings);
    auto session = engine->prepare(network, {"cudnn", "alexnet", Precision::tf32, 2, Phase::training, 0});
    const std::string d = session->record().decisions;
    EXPECT_EQ(d.find("search_l2=cold") != std::string::npos, l2 == SearchL2::cold) << d;
    EXPECT_NE(d.find("algo=exhaustive"), std::string::npos) << d;
    EXPECT_TRUE(session->check().finite) << d;
  }
}

}  // namespace
}  // namespace crossbench::cudnn
