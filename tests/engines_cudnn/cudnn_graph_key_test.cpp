// The key that lets a session's identical convolutions share one Graph API graph (graph_problem_key,
// GraphConvolutionCache): the same for identical problems wherever their tensors live, different for
// every change the graph depends on. Label `cpu`: host arithmetic, no cuDNN call.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engines/cudnn/graph_api_convolution.hpp"

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

}  // namespace
}  // namespace crossbench::cudnn
