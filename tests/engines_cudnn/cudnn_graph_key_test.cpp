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

}  // namespace
}  // namespace crossbench::cudnn
