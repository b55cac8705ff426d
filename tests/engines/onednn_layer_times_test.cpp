// OnednnSession::profile (--layer-times), as the Runner's layer_medians sees it: every layer of the network in
// network order, non-negative times, backward 0 in inference and present in
// training, and a profile pass that leaves the model as it found it.
#include <gtest/gtest.h>

#include <string>

#include "crossbench/engine.hpp"
#include "engines/onednn/onednn_session.hpp"

namespace crossbench {
namespace {

CellSpec alexnet_cell(Phase phase) { return {"onednn", "alexnet", Precision::fp32, 1, phase, 0}; }

EngineConfig one_thread(Update update = Update::none) {
  EngineConfig config;
  config.threads = 1;  // a shared 2-core machine: see OnednnRealNetwork
  config.update = update;
  return config;
}

void expect_every_layer_in_order(const Network& network, const std::vector<LayerTime>& times) {
  ASSERT_EQ(times.size(), network.layers().size());
  for (std::size_t l = 0; l < times.size(); ++l) {
    EXPECT_EQ(times[l].layer, network.layers()[l].name);
    EXPECT_EQ(times[l].kind, to_string(network.layers()[l].kind));
    EXPECT_GE(times[l].forward_ms, 0) << times[l].layer;
    EXPECT_GE(times[l].backward_ms, 0) << times[l].layer;
  }
}

TEST(OnednnLayerTimes, InferenceHasEveryLayerAndNoBackward) {
  const Network network = make_network("alexnet");
  onednn::OnednnSession session(network, alexnet_cell(Phase::inference), one_thread());
  const std::vector<LayerTime> times = layer_medians(session.profile(3));
  expect_every_layer_in_order(network, times);
  for (const LayerTime& t : times) {
    EXPECT_EQ(t.backward_ms, 0) << t.layer;
    if (t.kind == "convolution" || t.kind == "fully_connected") EXPECT_GT(t.forward_ms, 0) << t.layer;
  }
}

TEST(OnednnLayerTimes, TrainingHasBackwardAndLeavesTheModelAsItWas) {
  const Network network = make_network("alexnet");
  onednn::OnednnSession session(network, alexnet_cell(Phase::training), one_thread());
  const OutputCheck before = session.check();
  const std::vector<LayerTime> times = layer_medians(session.profile(2));
  expect_every_layer_in_order(network, times);
  for (const LayerTime& t : times)
    if (t.kind == "convolution" || t.kind == "fully_connected") {
      EXPECT_GT(t.forward_ms, 0) << t.layer;
      EXPECT_GT(t.backward_ms, 0) << t.layer << ": weight gradients at least";
    }
  EXPECT_GT(times.back().forward_ms, 0) << "the loss (and its gradient) is the loss layer's forward";
  const OutputCheck after = session.check();  // no update: profiling changed nothing
  EXPECT_EQ(before.loss, after.loss);
  EXPECT_EQ(before.gradient_norms, after.gradient_norms);
}

TEST(OnednnLayerTimes, SgdUpdateCountsInTheBackwardOfItsLayer) {
  const Network network = make_network("alexnet");
  onednn::OnednnSession session(network, alexnet_cell(Phase::training), one_thread(Update::sgd));
  const std::vector<LayerTime> times = layer_medians(session.profile(1));
  expect_every_layer_in_order(network, times);
  // conv1 has no input gradient: its backward is its weight gradient and update.
  EXPECT_GT(times[1].backward_ms, 0) << times[1].layer;
}

}  // namespace
}  // namespace crossbench
