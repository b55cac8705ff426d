// The key that lets a session's identical convolutions share one Graph API graph (graph_problem_key,
// GraphConvolutionCache): the same for identical problems wherever their tensors live, different for
// every change the graph depends on. Label `cpu`: host arithmetic, no cuDNN call.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engines/cudnn/graph_convolution_cache.hpp"
#include "engines/cudnn/graph_refusal.hpp"

namespace crossbench::cudnn {
namespace {

// A ResNet bottleneck's last 1x1 convolution with its residual epilogue (bf16, NHWC, batch 8).
GraphConvolutionProblem residual_block(int buffer) {
  GraphConvolutionProblem p;
  p.direction = GraphDirection::forward;
  p.precision = Precision::bf16;
  p.x = Tensor::packed({8, 64, 56, 56}, DType::bf16, true);
  p.w = Tensor::packed({256, 64, 1, 1}, DType::bf16, true);
  p.y = Tensor::packed({8, 256, 56, 56}, DType::bf16, true);
  p.bias = Tensor::packed({1, 256, 1, 1}, DType::bf16, false);
  p.residual = Tensor::packed({8, 256, 56, 56}, DType::bf16, true);
  p.bias_relu = true;
  p.padding = 0;
  p.stride = 1;
  p.workspace_limit_bytes = std::int64_t{1} << 30;
  // Where the tensors live: different for every layer of a session, never in the key.
  for (Tensor* t : {&p.x, &p.w, &p.y, &p.bias, &p.residual}) {
    t->buffer = buffer++;
    t->offset = 4096 * buffer;
  }
  return p;
}

TEST(GraphProblemKey, IsTheSameForIdenticalLayersElsewhereInMemory) {
  EXPECT_EQ(graph_problem_key(residual_block(0)), graph_problem_key(residual_block(17)));
}

TEST(GraphProblemKey, DiffersForEveryChangeTheGraphDependsOn) {
  const std::vector<std::pair<std::string, std::function<void(GraphConvolutionProblem&)>>> changes{
      {"direction", [](GraphConvolutionProblem& p) { p.direction = GraphDirection::backward_data; }},
      {"precision", [](GraphConvolutionProblem& p) { p.precision = Precision::fp16; }},
      {"x dims", [](GraphConvolutionProblem& p) { p.x.dims[0] = 16; }},
      {"x layout", [](GraphConvolutionProblem& p) { p.x.strides = Tensor::packed(p.x.dims, p.x.type, false).strides; }},
      {"x type", [](GraphConvolutionProblem& p) { p.x.type = DType::f16; }},
      {"w dims", [](GraphConvolutionProblem& p) { p.w.dims[2] = p.w.dims[3] = 3; }},
      {"w type", [](GraphConvolutionProblem& p) { p.w.type = DType::f32; }},
      {"y strides", [](GraphConvolutionProblem& p) { p.y.strides[0] *= 2; }},  // a concat slice
      {"bias type", [](GraphConvolutionProblem& p) { p.bias.type = DType::f32; }},
      {"residual strides", [](GraphConvolutionProblem& p) { p.residual.strides[0] *= 2; }},
      {"no residual", [](GraphConvolutionProblem& p) { p.residual = Tensor(); }},
      {"no epilogue", [](GraphConvolutionProblem& p) { p.bias_relu = false; }},
      {"statistics", [](GraphConvolutionProblem& p) {  // the plain forward that also writes y's sums
         p.bias_relu = false;
         p.residual = Tensor();
         p.statistics = true;
       }},
      {"padding", [](GraphConvolutionProblem& p) { p.padding = 1; }},
      {"stride", [](GraphConvolutionProblem& p) { p.stride = 2; }},
      {"workspace limit", [](GraphConvolutionProblem& p) { p.workspace_limit_bytes /= 2; }},
  };
  const std::string original = graph_problem_key(residual_block(0));
  std::vector<std::string> keys{original};
  for (const auto& [what, change] : changes) {
    GraphConvolutionProblem changed = residual_block(0);
    change(changed);
    const std::string key = graph_problem_key(changed);
    EXPECT_NE(key, original) << what << " is not in the key: " << key;
    for (std::size_t i = 0; i + 1 < keys.size(); ++i) EXPECT_NE(key, keys[i + 1]) << what << " collides with another change";
    keys.push_back(key);
  }
}

// Without the epilogue the graph reads neither bias nor residual: two plain convolutions that differ only
// in the bias tensor their layers hold share the graph.
TEST(GraphProblemKey, LeavesOutWhatTheGraphDoesNotRead) {
  GraphConvolutionProblem a = residual_block(0), b = residual_block(0);
  a.bias_relu = b.bias_relu = false;
  b.bias = Tensor::packed({1, 512, 1, 1}, DType::f32, false);
  b.residual = Tensor();
  EXPECT_EQ(graph_problem_key(a), graph_problem_key(b));
}

// engine.graph_from_cache creates a replay's graph with the configuration its cached plan name spells
// (cudnn-frontend's engine tag): the engine's global index, then each knob's backend type and choice.
TEST(GraphPlanName, SpellsTheEngineAndItsKnobs) {
  const auto configuration = parse_graph_plan_name("eng41_k2=7_k13=1_k14=-1_k17=0");
  ASSERT_TRUE(configuration.has_value());
  EXPECT_EQ(configuration->engine, 41);
  const std::vector<std::pair<int, std::int64_t>> knobs{{2, 7}, {13, 1}, {14, -1}, {17, 0}};
  EXPECT_EQ(configuration->knobs, knobs);
  const auto bare = parse_graph_plan_name("eng0");  // an engine without knobs
  ASSERT_TRUE(bare.has_value());
  EXPECT_EQ(bare->engine, 0);
  EXPECT_TRUE(bare->knobs.empty());
}

TEST(GraphPlanName, RefusesWhatIsNoEngineTag) {
  // plan_name()'s fallback for a plan it cannot name, the frontend's own error tags, and damaged names.
  for (const char* name : {"", "plan3", "INVALID_ENGINE_NAME_CFG", "eng", "engx", "eng41_", "eng41_k2", "eng41_k2=",
                           "eng41_k2=-", "eng41_k=3", "eng41_k2=7x", "eng41 k2=7", "eng-1", "eng41_k2=7_",
                           "eng99999999999999999999", "IMPLICIT_GEMM/tc"})
    EXPECT_FALSE(parse_graph_plan_name(name).has_value()) << '"' << name << '"';
}

TEST(GraphRuntimeCompiled, IsTheResidualGraphAndTheStatistics) {
  GraphConvolutionProblem p = residual_block(0);
  EXPECT_TRUE(graph_runtime_compiled(p));
  p.residual = Tensor();
  EXPECT_FALSE(graph_runtime_compiled(p)) << "conv + bias + relu has precompiled engines";
  p.bias_relu = false;
  p.statistics = true;
  EXPECT_TRUE(graph_runtime_compiled(p));
}


// A refusal reads as one line in a layer's decisions: cuDNN's log of every engine it tried (here as the
// H100 wrote it for the statistics graph, bench/results/2026-12-12/call70h) becomes the call, its message
// and each engine's first reason.
TEST(GraphRefusalSummary, KeepsTheCallTheMessageAndEachEnginesFirstReason) {
  const std::string refusal =
      "cuDNN Graph API call `g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK})` failed at "
      "/work/main/src/engines/cudnn/graph_api_convolution.cpp:156 on process 560 on host vm: No valid engine "
      "configs for __\n"
      "{\"engineId\":0,\"smVersion\":900,\"knobChoices\":{}}\n"
      "Warning: CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH; Reason: engine_iface->getStatus()\n"
      "Warning: CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH; Reason: status\n"
      "\n"
      "{\"engineId\":3,\"smVersion\":900,\"knobChoices\":{\"CUDNN_KNOB_TYPE_SPLIT_K_SLC\":-1}}\n"
      "Warning: CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE; Reason: mathPrec != CUDNN_DATA_FLOAT\n"
      "Warning: CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE; Reason: check_genstats_support_fort(node)\n"
      "\n"
      "{\"engineId\":1,\"smVersion\":900,\"knobChoices\":{}}\n"
      "Warning: CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE; Reason: !isTypeSupported\n"
      "Warning: CUDNN_STATUS_NOT_SUPPORTED; Reason: finalize_internal()\n"
      "\n"
      "{\"engineId\":1,\"smVersion\":900,\"knobChoices\":{}}\n"
      "Warning: CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE; Reason: !isTypeSupported\n"
      ");";
  EXPECT_EQ(graph_refusal_summary(refusal),
            "cuDNN Graph API call `g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK})` failed: "
            "No valid engine configs for __ [engine 0: engine_iface->getStatus(); engine 3: mathPrec != "
            "CUDNN_DATA_FLOAT; engine 1: !isTypeSupported]");
}

TEST(GraphRefusalSummary, LeavesAOneLineErrorAsItIsAndBoundsAnyOther) {
  EXPECT_EQ(graph_refusal_summary("cuDNN Graph API: a convolution's statistics (genstats) are built for the plain "
                                  "forward only"),
            "cuDNN Graph API: a convolution's statistics (genstats) are built for the plain forward only");
  // A refusal with no engine blocks (check_support's "Deselecting execution plan" lines): its first line.
  EXPECT_EQ(graph_refusal_summary("cuDNN Graph API call `g.check_support(handle)` failed at a.cpp:125 on rank 0 on "
                                  "host vm: [cudnn_frontend] Error: No execution plans support the graph.\nPlan at "
                                  "index 0: Deselecting execution plan\nPlan at index 1: Deselecting execution plan"),
            "cuDNN Graph API call `g.check_support(handle)` failed: [cudnn_frontend] Error: No execution plans support "
            "the graph.");
  const std::string endless = "x" + std::string(5000, 'y') + "\n" + std::string(5000, 'z');
  const std::string summary = graph_refusal_summary(endless);
  EXPECT_EQ(summary.size(), kRefusalSummaryLimit);
  EXPECT_EQ(summary.substr(summary.size() - 3), "...");
  EXPECT_EQ(graph_refusal_summary(""), "");
}

}  // namespace
}  // namespace crossbench::cudnn
