#include "layer_cost.hpp"

namespace crossbench {
namespace {

constexpr std::int64_t kBytesPerFp32 = 4;

// Batch-norm at inference is a per-channel scale and shift (1 multiply + 1 add per element).
constexpr double kBatchNormFlopsPerElement = 2;
// Softmax cross-entropy: exp, sum and normalise per class (the log and the pick are per image).
constexpr double kSoftmaxFlopsPerClass = 3;

}  // namespace

LayerCost layer_cost(const Layer& layer, const std::vector<TensorShape>& input_shapes) {
  LayerCost cost;
  const auto output_elements = static_cast<double>(layer.output.elements());
  const LayerParams& p = layer.params;
  switch (layer.kind) {
    case LayerKind::input:
    case LayerKind::flatten:  // a view: no arithmetic
    case LayerKind::concat:   // a copy: no arithmetic
      break;
    case LayerKind::convolution: {
      const std::int64_t in_channels = input_shapes.at(0).channels;
      const std::int64_t weights = p.out_channels * in_channels * p.kernel * p.kernel;
      const double macs_per_output = static_cast<double>(in_channels * p.kernel * p.kernel);
      cost.forward_flops = 2 * macs_per_output * output_elements;  // bias add not counted
      cost.parameters = weights + (p.bias ? p.out_channels : 0);
      break;
    }
    case LayerKind::fully_connected: {
      const std::int64_t in_features = input_shapes.at(0).elements();
      cost.forward_flops = 2 * static_cast<double>(in_features) * static_cast<double>(p.out_channels);
      cost.parameters = in_features * p.out_channels + (p.bias ? p.out_channels : 0);
      break;
    }
    case LayerKind::max_pool:
    case LayerKind::avg_pool:  // one compare (or add) per window element
      cost.forward_flops = static_cast<double>(p.kernel * p.kernel) * output_elements;
      break;
    case LayerKind::lrn:  // a sum of squares over `size` channels per element
      cost.forward_flops = static_cast<double>(p.lrn_size) * output_elements;
      break;
    case LayerKind::relu:
    case LayerKind::dropout:  // one multiply by the mask
    case LayerKind::add:
      cost.forward_flops = output_elements;
      break;
    case LayerKind::batch_norm:
      cost.forward_flops = kBatchNormFlopsPerElement * output_elements;
      cost.parameters = 2 * layer.output.channels;  // gamma and beta
      break;
    case LayerKind::softmax_cross_entropy:
      cost.forward_flops = kSoftmaxFlopsPerClass * static_cast<double>(input_shapes.at(0).elements());
      break;
  }
  cost.activation_bytes = layer.output.elements() * kBytesPerFp32;
  return cost;
}

double layer_training_flops(const Layer& layer) {
  const bool has_weights = layer.kind == LayerKind::convolution || layer.kind == LayerKind::fully_connected;
  if (!has_weights) return 2 * layer.cost.forward_flops;
  const bool reads_network_input = !layer.inputs.empty() && layer.inputs.front() == 0;
  return (reads_network_input ? 2 : 3) * layer.cost.forward_flops;
}

}  // namespace crossbench
