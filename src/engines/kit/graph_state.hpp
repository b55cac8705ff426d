// Per-layer graph state both native engines build with: who reads a layer's
// output, whether a gradient must flow through it, whether a consumer may
// write over it (in place), and the gradient-contribution rule. The tensors
// are the engine's (LayerState<Tensor>); the rules are written once here.
#pragma once

#include <optional>
#include <vector>

#include "crossbench/network.hpp"

namespace crossbench::kit {

// What the rules read and write of one layer's state.
struct LayerFlags {
  int consumers = 0;          // layers that read this layer's output
  int contributions = 0;      // gradient contributions received so far (backward order)
  bool needs_grad = false;    // a weight at or before this layer needs a gradient through it
  bool value_needed = false;  // a backward op reads the output's bytes as this value
  bool exclusive = true;      // the output's bytes hold no other live value
  bool in_place = false;      // relu/add: writes its output over its (first) input
};

// One layer's output and (training) the gradient of the loss with respect to it.
template <typename Tensor>
struct LayerState : LayerFlags {
  Tensor out;                  // may be a view of another layer's bytes
  std::optional<Tensor> grad;  // made by its first contribution
};

inline bool has_parameters(LayerKind kind) {
  return kind == LayerKind::convolution || kind == LayerKind::fully_connected || kind == LayerKind::batch_norm;
}

// Counts every layer's consumers and, in training, marks the layers a
// gradient must flow through: those with parameters and everything after
// them, up to (not including) the loss. states[i] is layer i's state.
template <typename State>
void mark_consumers_and_gradients(const Network& network, bool training, std::vector<State>& states) {
  const int count = static_cast<int>(network.layers().size());
  auto layer = [&](int index) -> const Layer& { return network.layers()[static_cast<std::size_t>(index)]; };
  auto state = [&](int index) -> LayerFlags& { return states[static_cast<std::size_t>(index)]; };
  for (int index = 0; index < count; ++index)
    for (int from : layer(index).inputs) ++state(from).consumers;
  if (!training) return;
  for (int index = 1; index < count; ++index) {
    bool needs = has_parameters(layer(index).kind);
    for (int from : layer(index).inputs) needs = needs || state(from).needs_grad;
    state(index).needs_grad = needs && layer(index).kind != LayerKind::softmax_cross_entropy;
  }
}

// Writing a layer's output over its input (torchvision's ReLU(inplace=True)
// and `out += identity`) is safe when nothing else reads the input: it is not
// the network input (layer 0, reused every step), this layer is its only
// consumer, no backward op reads it as a value, and its bytes hold nothing else.
inline bool can_overwrite(const LayerFlags& input, int input_index) {
  return input_index != 0 && input.consumers == 1 && !input.value_needed && input.exclusive;
}

// The gradient-contribution rule: tensors read by several layers (residual
// adds, inception fan-out) get the sum of their consumers' gradients. The
// first contribution (in backward order) writes the gradient, later ones
// accumulate into it. Counts the contribution and says which it is.
enum class Contribution { first_writes, later_accumulates };
inline Contribution take_contribution(LayerFlags& state) {
  return state.contributions++ == 0 ? Contribution::first_writes : Contribution::later_accumulates;
}

}  // namespace crossbench::kit
