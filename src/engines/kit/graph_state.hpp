// Per-layer graph state both native engines build with: who reads a layer's
// output, whether a gradient must flow through it, whether a consumer may
// write over it (in place), and the gradient-contribution rule. The tensors
// are the engine's (LayerState<Tensor>); the rules are written once here.
#pragma once

#include <algorithm>
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

// Inference's other case (conv_bn_add_relu's sum post-op, which accumulates into the residual's bytes):
// layer `writer` may write over `input`'s output though other layers read it, when each of them runs
// before `writer` (the forward runs in network order) except `reads_the_result`, the layer that then
// reads what `writer` wrote there (the group's add). `writer` itself must not read it, it is not the
// network input, and its bytes hold nothing else. Training never: backward ops read saved values.
inline bool can_overwrite_once_read(const Network& network, const LayerFlags& input, int input_index, int writer,
                                    int reads_the_result, bool training) {
  if (training || input_index == 0 || input.value_needed || !input.exclusive) return false;
  const auto& layers = network.layers();
  for (int reader = 0; reader < static_cast<int>(layers.size()); ++reader) {
    const auto& inputs = layers[static_cast<std::size_t>(reader)].inputs;
    if (reader == reads_the_result || std::find(inputs.begin(), inputs.end(), input_index) == inputs.end()) continue;
    if (reader >= writer) return false;  // still to run (or `writer` itself reads it)
  }
  return true;
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
