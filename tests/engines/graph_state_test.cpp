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

// Inference's other in-place rule (conv_bn_add_relu's sum post-op): a residual read by b1 and by the add
// may be written over by b3, which runs after b1 and does not read it; not by a convolution that reads it,
// nor while a later layer still reads it, nor in training, nor the network input, nor shared bytes.
TEST(GraphState, OverwriteOnceReadOnlyAfterEveryOtherReaderRan) {
  NetworkBuilder b("once_read", {4, 6, 6});
  const int stem = b.convolution(b.input(), 8, 1, 1, 0, false, "stem");
  const int residual = b.relu(stem, "residual");
  const int b1 = b.convolution(residual, 4, 1, 1, 0, false, "b1");
  const int b3 = b.convolution(b1, 8, 1, 1, 0, false, "b3");
  const int add = b.add(b3, residual, "add");
  const int reads_residual = b.convolution(add, 8, 1, 1, 0, false, "c");
  const int add2 = b.add(reads_residual, add, "add2");
  const int late = b.convolution(residual, 8, 1, 1, 0, false, "late");  // reads the residual after add2
  const Network network = b.finish_with_loss(b.fully_connected(b.flatten(b.add(add2, late, "add3")), 3, true, "fc"));
  std::vector<State> states = states_of(network, false);
  auto once_read = [&](int input, int writer, int reader, bool training = false) {
    return can_overwrite_once_read(network, states[static_cast<std::size_t>(input)], input, writer, reader, training);
  };
  // `residual` is read by b1, add and late: late runs after b3, so not even b3 may write over it.
  EXPECT_FALSE(once_read(residual, b3, add)) << "late still reads it";
  EXPECT_TRUE(once_read(residual, late + 1, add)) << "every other reader ran";
  EXPECT_TRUE(once_read(add, add2, add2)) << "c read it before";
  EXPECT_FALSE(once_read(add, reads_residual, add2)) << "the writer reads it itself";
  EXPECT_FALSE(once_read(add, add2, add2, true)) << "training: backward ops read saved values";
  EXPECT_FALSE(once_read(0, b1, stem)) << "the network input is reused by every step";
  states[static_cast<std::size_t>(add)].exclusive = false;
  EXPECT_FALSE(once_read(add, add2, add2)) << "the bytes hold another live value";
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
