// The kit's per-layer graph state (src/engines/kit/graph_state.hpp): consumer
// counts and needs-grad on real networks, the in-place rule and the
// gradient-contribution rule, element by element against the network's own
// description.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crossbench/network.hpp"
#include "engines/kit/graph_state.hpp"

namespace crossbench::kit {
namespace {

using State = LayerState<int>;  // the rules never look at the tensor type

std::vector<State> states_of(const Network& network, bool training) {
  std::vector<State> states(network.layers().size());
  mark_consumers_and_gradients(network, training, states);
  return states;
}

TEST(GraphState, ConsumersAreTheLayersThatReadEachOutput) {
  for (const std::string& name : network_names()) {
    const Network network = make_network(name);
    const std::vector<State> states = states_of(network, false);
    std::vector<int> readers(network.layers().size(), 0);
    for (const Layer& layer : network.layers())
      for (int from : layer.inputs) ++readers[static_cast<std::size_t>(from)];
    for (std::size_t i = 0; i < states.size(); ++i) {
      EXPECT_EQ(states[i].consumers, readers[i]) << name << " layer " << network.layers()[i].name;
      EXPECT_FALSE(states[i].needs_grad) << name << ": inference needs no gradient";
    }
  }
}

TEST(GraphState, TrainingNeedsGradientsFromTheFirstParameterOnUpToTheLoss) {
  for (const std::string& name : network_names()) {
    const Network network = make_network(name);
    const std::vector<State> states = states_of(network, true);
    const auto& layers = network.layers();
    EXPECT_FALSE(states.front().needs_grad) << name << ": the input needs no gradient";
    EXPECT_FALSE(states.back().needs_grad) << name << ": the loss is where gradients start";
    std::vector<bool> expected(layers.size(), false);
    for (std::size_t i = 1; i + 1 < layers.size(); ++i) {
      bool needs = layers[i].kind == LayerKind::convolution || layers[i].kind == LayerKind::fully_connected ||
                   layers[i].kind == LayerKind::batch_norm;
      for (int from : layers[i].inputs) needs = needs || expected[static_cast<std::size_t>(from)];
      expected[i] = needs;
      EXPECT_EQ(states[i].needs_grad, expected[i]) << name << " layer " << layers[i].name;
    }
  }
}

TEST(GraphState, InPlaceOnlyOverASoleReaderOfExclusiveBytesThatNoBackwardReads) {
  State input;
  input.consumers = 1;
  EXPECT_TRUE(can_overwrite(input, 3));
  EXPECT_FALSE(can_overwrite(input, 0)) << "the network input is reused by every step";
  State shared = input;
  shared.consumers = 2;
  EXPECT_FALSE(can_overwrite(shared, 3)) << "a residual shortcut is read again";
  State read_back = input;
  read_back.value_needed = true;
  EXPECT_FALSE(can_overwrite(read_back, 3)) << "a backward op reads the value";
  State view = input;
  view.exclusive = false;
  EXPECT_FALSE(can_overwrite(view, 3)) << "the bytes hold another live value";
}

TEST(GraphState, TheFirstContributionWritesAndLaterOnesAccumulate) {
  State fan_out;
  EXPECT_EQ(take_contribution(fan_out), Contribution::first_writes);
  EXPECT_EQ(take_contribution(fan_out), Contribution::later_accumulates);
  EXPECT_EQ(take_contribution(fan_out), Contribution::later_accumulates);
  EXPECT_EQ(fan_out.contributions, 3);
}

}  // namespace
}  // namespace crossbench::kit
