// Network: a validated layer graph and its totals.
#include <set>

#include "layer_cost.hpp"
#include "crossbench/error.hpp"
#include "crossbench/network.hpp"

namespace crossbench {
namespace {

[[noreturn]] void reject(const std::string& network, const std::string& why) {
  throw Error("invalid network '" + network + "': " + why);
}

std::string describe_layer(const Layer& layer, std::size_t index) {
  return "layer " + std::to_string(index) + " '" + layer.name + "' (" + std::string(to_string(layer.kind)) + ")";
}

// How many inputs a kind takes: {minimum, maximum}.
std::pair<std::size_t, std::size_t> input_count_range(LayerKind kind) {
  switch (kind) {
    case LayerKind::input: return {0, 0};
    case LayerKind::add: return {2, 2};
    case LayerKind::concat: return {1, static_cast<std::size_t>(-1)};
    default: return {1, 1};
  }
}

void validate(const std::string& name, const std::vector<Layer>& layers) {
  if (layers.size() < 2) reject(name, "a network needs at least an input and a loss layer");
  if (layers.front().kind != LayerKind::input) reject(name, "layer 0 must be the input");
  if (layers.back().kind != LayerKind::softmax_cross_entropy)
    reject(name, "the last layer must be the softmax_cross_entropy loss");
  std::set<std::string> names;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const Layer& layer = layers[i];
    if (layer.name.empty()) reject(name, describe_layer(layer, i) + " has no name");
    if (!names.insert(layer.name).second) reject(name, "two layers are named '" + layer.name + "'");
    if (i > 0 && layer.kind == LayerKind::input)
      reject(name, describe_layer(layer, i) + ": only layer 0 may be an input");
    if (i + 1 < layers.size() && layer.kind == LayerKind::softmax_cross_entropy)
      reject(name, describe_layer(layer, i) + ": only the last layer may be the loss");
    const auto [least, most] = input_count_range(layer.kind);
    if (layer.inputs.size() < least || layer.inputs.size() > most)
      reject(name, describe_layer(layer, i) + " has " + std::to_string(layer.inputs.size()) + " inputs");
    for (int from : layer.inputs)
      if (from < 0 || static_cast<std::size_t>(from) >= i)
        reject(name, describe_layer(layer, i) + " reads layer " + std::to_string(from) +
                         ", which is not an earlier layer (layers must be in topological order)");
  }
}

}  // namespace

Network::Network(std::string name, std::vector<Layer> layers) : name_(std::move(name)), layers_(std::move(layers)) {
  validate(name_, layers_);
}

int Network::logits_layer() const { return layers_.back().inputs.front(); }

std::int64_t Network::classes() const { return layers_.at(static_cast<std::size_t>(logits_layer())).output.elements(); }

double Network::forward_flops_per_image() const {
  double flops = 0;
  for (const Layer& layer : layers_) flops += layer.cost.forward_flops;
  return flops;
}

double Network::training_flops_per_image() const {
  double flops = 0;
  for (const Layer& layer : layers_) flops += layer_training_flops(layer);
  return flops;
}

std::int64_t Network::parameters() const {
  std::int64_t count = 0;
  for (const Layer& layer : layers_) count += layer.cost.parameters;
  return count;
}

std::int64_t Network::activation_bytes_per_image() const {
  std::int64_t bytes = 0;
  for (const Layer& layer : layers_) bytes += layer.cost.activation_bytes;
  return bytes;
}

}  // namespace crossbench
