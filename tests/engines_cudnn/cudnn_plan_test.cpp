// The cuDNN engine's build phase on a CPU (label `cpu`): building the ops and
// the memory plan of a cell makes no CUDA or cuDNN call, so every network,
// precision, layout and phase can be planned here. Checks that the plan is
// complete (every layer that needs a gradient gets one), that buffers are
// reused, and the decisions the builder makes (in-place relus, concat slices).
#include <gtest/gtest.h>

#include "crossbench/engine.hpp"
#include "crossbench/network.hpp"
#include "engines/cudnn/graph.hpp"
#include "engines_cudnn/tiny_networks.hpp"

namespace crossbench::cudnn {
namespace {

struct Plan {
  DevicePool pool;
  std::vector<Op> ops;
  std::vector<Parameter> parameters;
  std::vector<std::unique_ptr<LayerImpl>> impls;
  std::int64_t bytes = 0;
  std::unique_ptr<Builder> builder;
};

std::unique_ptr<Plan> plan(const Network& network, Precision precision, Phase phase, std::int64_t batch,
                           Layout layout = Layout::automatic) {
  auto p = std::make_unique<Plan>();
  static EngineConfig config;
  config.layout = layout;
  static CellSpec cell;
  cell = {"cudnn", network.name(), precision, batch, phase, 0};
  p->builder = std::make_unique<Builder>(network, cell, config, p->pool, p->ops, p->parameters, p->impls);
  build_graph(*p->builder);
  p->bytes = p->pool.plan();
  return p;
}

TEST(CudnnPlan, TheEngineIsInTheCatalogue) {
  bool built = false;
  for (const EngineInfo& info : engine_catalog()) built = built || (info.name == "cudnn" && info.built);
  EXPECT_TRUE(built);
}

TEST(CudnnPlan, EveryNetworkPlansInEveryConfiguration) {
  for (const std::string& name : network_names()) {
    const Network network = make_network(name);
    for (Precision precision : {Precision::fp32, Precision::bf16})
      for (Phase phase : {Phase::inference, Phase::training}) {
        std::unique_ptr<Plan> p;
        ASSERT_NO_THROW(p = plan(network, precision, phase, 64)) << name;
        EXPECT_LT(p->bytes, p->pool.unshared_bytes()) << name << ": buffers are reused";
        if (phase == Phase::training) {
          std::size_t gradients = 0;
          for (const Parameter& q : p->parameters) gradients += q.gradient.valid();
          EXPECT_EQ(gradients, p->parameters.size()) << name;
        }
        std::cerr << name << " " << to_string(precision) << " " << to_string(phase) << " b64: " << p->ops.size()
                  << " ops, plan " << p->bytes / double(1 << 20) << " MiB (no reuse "
                  << p->pool.unshared_bytes() / double(1 << 20) << " MiB)\n";
      }
  }
}

TEST(CudnnPlan, TinyNetworksPlanInBothLayouts) {
  for (const tiny::Case& c : tiny::cases())
    for (Layout layout : {Layout::nchw, Layout::nhwc})
      for (Phase phase : {Phase::inference, Phase::training})
        EXPECT_NO_THROW(plan(c.build(), Precision::fp32, phase, tiny::kBatch, layout)) << c.name;
}

TEST(CudnnPlan, GoogLeNetBranchesWriteIntoTheirConcatSliceInNchw) {
  const Network network = make_network("googlenet");
  auto nchw = plan(network, Precision::fp32, Phase::training, 8, Layout::nchw);
  auto nhwc = plan(network, Precision::fp32, Phase::training, 8, Layout::nhwc);
  auto copies = [](const Plan& p) {
    int n = 0;
    for (const Op& op : p.ops) n += op.label.find("forward copy") != std::string::npos;
    return n;
  };
  EXPECT_EQ(copies(*nchw), 0) << "every branch is placed in its slice";
  EXPECT_EQ(copies(*nhwc), 9 * 4) << "NHWC copies each branch of the nine inception modules";
}

TEST(CudnnPlan, ResNetRunsReluAndAddInPlace) {
  const Network network = make_network("resnet50");
  auto p = plan(network, Precision::fp32, Phase::training, 8);
  int in_place_relus = 0, relus = 0, in_place_adds = 0, adds = 0;
  for (std::size_t i = 0; i < network.layers().size(); ++i) {
    const LayerKind kind = network.layers()[i].kind;
    const LayerState& s = p->builder->states[i];
    if (kind == LayerKind::relu) {
      ++relus;
      in_place_relus += s.in_place;
    }
    if (kind == LayerKind::add) {
      ++adds;
      in_place_adds += s.in_place;
    }
  }
  EXPECT_EQ(in_place_relus, relus);
  EXPECT_EQ(in_place_adds, adds);
  int gradient_copies = 0;
  for (const Op& op : p->ops) gradient_copies += op.label.find("backward (") != std::string::npos;
  EXPECT_EQ(gradient_copies, 0) << "residual gradients are shared, not copied";
}

}  // namespace
}  // namespace crossbench::cudnn
