// The seeded counter-based generator of synthetic data (see synthetic.hpp for the
// exact formulas that a Python port reproduces).
#include "crossbench/synthetic.hpp"

#include <algorithm>
#include <cmath>

#include "crossbench/error.hpp"
#include "crossbench/splitmix64.hpp"

namespace crossbench::synthetic {
namespace {

using splitmix64::stream_element;
using splitmix64::stream_state;
using splitmix64::to_unit_interval;

const Layer& layer_at(const Network& network, int layer_index) {
  if (layer_index < 0 || static_cast<std::size_t>(layer_index) >= network.layers().size())
    throw Error("synthetic: layer index " + std::to_string(layer_index) + " is out of range for network '" +
                network.name() + "' (" + std::to_string(network.layers().size()) + " layers)");
  return network.layers()[static_cast<std::size_t>(layer_index)];
}

// Elements of the layer's (first) input, per image: the fan-in of a fully-connected layer.
std::int64_t input_elements(const Network& network, const Layer& layer) {
  return network.layers().at(static_cast<std::size_t>(layer.inputs.front())).output.elements();
}

std::int64_t input_channels(const Network& network, const Layer& layer) {
  return network.layers().at(static_cast<std::size_t>(layer.inputs.front())).output.channels;
}

// He-uniform fan-in of a layer's weight.
std::int64_t weight_fan_in(const Network& network, const Layer& layer) {
  if (layer.kind == LayerKind::convolution) return input_channels(network, layer) * layer.params.kernel * layer.params.kernel;
  return input_elements(network, layer);
}

}  // namespace

std::uint64_t tensor_id(int layer_index, Slot slot) {
  if (layer_index < 0) throw Error("synthetic: negative layer index " + std::to_string(layer_index));
  return (static_cast<std::uint64_t>(layer_index) + 1) * 16 + static_cast<std::uint64_t>(slot);
}

std::uint64_t hash(std::uint64_t seed, std::uint64_t tensor_id, std::uint64_t index) {
  return stream_element(stream_state(seed, tensor_id), index);
}

float uniform01(std::uint64_t seed, std::uint64_t tensor_id, std::uint64_t index) {
  return to_unit_interval(hash(seed, tensor_id, index));
}

void fill_uniform(std::span<float> out, std::uint64_t seed, std::uint64_t tensor_id, float scale,
                  std::uint64_t first_index) {
  const std::uint64_t state = stream_state(seed, tensor_id);
  for (std::size_t i = 0; i < out.size(); ++i) {
    // 2u - 1 is exact in fp32 (u has 24 significant bits); the product rounds once.
    const float centred = 2.0f * to_unit_interval(stream_element(state, first_index + i)) - 1.0f;
    out[i] = scale * centred;
  }
}

std::int64_t parameter_elements(const Network& network, int layer_index, Slot slot) {
  const Layer& layer = layer_at(network, layer_index);
  const LayerParams& p = layer.params;
  switch (layer.kind) {
    case LayerKind::convolution:
      if (slot == Slot::weight) return p.out_channels * input_channels(network, layer) * p.kernel * p.kernel;
      if (slot == Slot::bias) return p.bias ? p.out_channels : 0;
      return 0;
    case LayerKind::fully_connected:
      if (slot == Slot::weight) return p.out_channels * input_elements(network, layer);
      if (slot == Slot::bias) return p.bias ? p.out_channels : 0;
      return 0;
    case LayerKind::batch_norm:
      if (slot == Slot::bn_gamma || slot == Slot::bn_beta) return layer.output.channels;
      return 0;
    default:
      return 0;
  }
}

std::vector<float> parameter(const Network& network, int layer_index, Slot slot, std::uint64_t seed) {
  const std::int64_t elements = parameter_elements(network, layer_index, slot);
  std::vector<float> values(static_cast<std::size_t>(elements), 0.0f);
  if (elements == 0) return values;
  const Layer& layer = layer_at(network, layer_index);
  switch (slot) {
    case Slot::weight: {
      const auto scale = static_cast<float>(std::sqrt(6.0 / static_cast<double>(weight_fan_in(network, layer))));
      fill_uniform(values, seed, tensor_id(layer_index, slot), scale);
      break;
    }
    case Slot::bn_gamma:
      std::fill(values.begin(), values.end(), 1.0f);
      break;
    case Slot::bias:
    case Slot::bn_beta:
    case Slot::dropout_mask:
      break;  // zeros
  }
  return values;
}

std::vector<float> input(const Network& network, std::int64_t batch, std::uint64_t seed, std::int64_t first_image) {
  if (batch <= 0) throw Error("synthetic: batch must be positive, got " + std::to_string(batch));
  if (first_image < 0) throw Error("synthetic: first image must not be negative, got " + std::to_string(first_image));
  const std::int64_t per_image = network.input_shape().elements();
  std::vector<float> values(static_cast<std::size_t>(batch * per_image));
  fill_uniform(values, seed, input_tensor_id, 1.0f, static_cast<std::uint64_t>(first_image * per_image));
  return values;
}

std::vector<std::int32_t> labels(const Network& network, std::int64_t batch, std::uint64_t seed,
                                 std::int64_t first_image) {
  if (batch <= 0) throw Error("synthetic: batch must be positive, got " + std::to_string(batch));
  const auto classes = static_cast<std::uint64_t>(network.classes());
  std::vector<std::int32_t> values(static_cast<std::size_t>(batch));
  const std::uint64_t state = stream_state(seed, labels_tensor_id);
  for (std::size_t image = 0; image < values.size(); ++image)
    values[image] = static_cast<std::int32_t>(stream_element(state, static_cast<std::uint64_t>(first_image) + image) % classes);
  return values;
}

bool dropout_keep(std::uint64_t seed, int layer_index, std::uint64_t step, std::uint64_t index, double rate) {
  const std::uint64_t id = tensor_id(layer_index, Slot::dropout_mask) + (step << 32);
  return static_cast<double>(uniform01(seed, id, index)) >= rate;
}

}  // namespace crossbench::synthetic
