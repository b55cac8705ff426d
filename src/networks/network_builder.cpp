// NetworkBuilder: appends layers, infers each output shape (per image) and cost.
//
// Output size of convolution and pooling (PyTorch and Caffe agree):
//   floor mode: out = floor((in + 2 * padding - kernel) / stride) + 1
//   ceil mode:  out = ceil((in + 2 * padding - kernel) / stride) + 1, then one less when the
//               last window would start at or beyond in + padding (inside the right padding
//               only), so that every window overlaps the input or its left padding.
#include "layer_cost.hpp"
#include "crossbench/error.hpp"
#include "crossbench/network.hpp"

namespace crossbench {
namespace {

std::int64_t divide_rounding_up(std::int64_t numerator, std::int64_t denominator) {
  return (numerator + denominator - 1) / denominator;
}

// Window output size along one spatial dimension; 0 when no window fits.
std::int64_t window_output_size(std::int64_t in, std::int64_t kernel, std::int64_t stride, std::int64_t padding,
                                bool ceil_mode) {
  const std::int64_t span = in + 2 * padding - kernel;
  if (span < 0) return 0;
  if (!ceil_mode) return span / stride + 1;
  std::int64_t out = divide_rounding_up(span, stride) + 1;
  if ((out - 1) * stride >= in + padding) --out;
  return out;
}

}  // namespace

NetworkBuilder::NetworkBuilder(std::string network_name, TensorShape input) : name_(std::move(network_name)) {
  if (input.channels <= 0 || input.height <= 0 || input.width <= 0)
    throw Error("network '" + name_ + "': the input shape must be positive, got " + std::to_string(input.channels) +
                "x" + std::to_string(input.height) + "x" + std::to_string(input.width));
  Layer layer;
  layer.name = "input";
  layer.kind = LayerKind::input;
  layer.output = input;
  append(std::move(layer));
}

namespace {

struct LayerDraft {
  const std::string& network;
  Layer layer;
  [[noreturn]] void fail(const std::string& why) const {
    const std::string label = layer.name.empty() ? std::string(to_string(layer.kind)) : "'" + layer.name + "'";
    throw Error("network '" + network + "': cannot add " + std::string(to_string(layer.kind)) + " layer " + label +
                ": " + why);
  }
};

std::string shape_text(const TensorShape& shape) {
  return std::to_string(shape.channels) + "x" + std::to_string(shape.height) + "x" + std::to_string(shape.width);
}

}  // namespace

// Every method below checks its arguments, fills a Layer and hands it to append(),
// which checks the input indices, infers the shape and computes the cost.
int NetworkBuilder::append(Layer layer) {
  LayerDraft draft{name_, std::move(layer)};
  Layer& l = draft.layer;
  const int index = static_cast<int>(layers_.size());
  std::vector<TensorShape> input_shapes;
  for (int from : l.inputs) {
    if (from < 0 || from >= index)
      draft.fail("input index " + std::to_string(from) + " is out of range (the network has " +
                 std::to_string(index) + " layers so far)");
    input_shapes.push_back(layers_[static_cast<std::size_t>(from)].output);
  }
  if (l.name.empty()) l.name = std::string(to_string(l.kind)) + std::to_string(index);

  const LayerParams& p = l.params;
  auto check_window = [&] {
    if (p.kernel <= 0) draft.fail("kernel must be positive");
    if (p.stride <= 0) draft.fail("stride must be positive");
    if (p.padding < 0) draft.fail("padding must not be negative");
    const bool pooling = l.kind == LayerKind::max_pool || l.kind == LayerKind::avg_pool;
    if (pooling && 2 * p.padding > p.kernel) draft.fail("padding must be at most half the kernel");
    const TensorShape& in = input_shapes.front();
    const std::int64_t height = window_output_size(in.height, p.kernel, p.stride, p.padding, p.ceil_mode);
    const std::int64_t width = window_output_size(in.width, p.kernel, p.stride, p.padding, p.ceil_mode);
    if (height <= 0 || width <= 0)
      draft.fail("kernel " + std::to_string(p.kernel) + " does not fit the padded input " + shape_text(in));
    return std::pair{height, width};
  };

  switch (l.kind) {
    case LayerKind::input:
      break;  // shape given by the constructor
    case LayerKind::convolution: {
      if (p.out_channels <= 0) draft.fail("out_channels must be positive");
      const auto [height, width] = check_window();
      l.output = {p.out_channels, height, width};
      break;
    }
    case LayerKind::max_pool:
    case LayerKind::avg_pool: {
      const auto [height, width] = check_window();
      l.output = {input_shapes.front().channels, height, width};
      break;
    }
    case LayerKind::lrn:
      if (p.lrn_size <= 0) draft.fail("size must be positive");
      l.output = input_shapes.front();
      break;
    case LayerKind::dropout:
      if (!(p.dropout_rate >= 0 && p.dropout_rate < 1)) draft.fail("rate must be in [0, 1)");
      l.output = input_shapes.front();
      break;
    case LayerKind::relu:
    case LayerKind::batch_norm:
      l.output = input_shapes.front();
      break;
    case LayerKind::concat: {
      if (input_shapes.empty()) draft.fail("concat needs at least one input");
      l.output = input_shapes.front();
      l.output.channels = 0;
      for (const TensorShape& in : input_shapes) {
        if (in.height != l.output.height || in.width != l.output.width)
          draft.fail("inputs differ in height or width (" + shape_text(input_shapes.front()) + " and " +
                     shape_text(in) + ")");
        l.output.channels += in.channels;
      }
      break;
    }
    case LayerKind::add:
      if (input_shapes.size() != 2) draft.fail("add needs exactly two inputs");
      if (!(input_shapes[0] == input_shapes[1]))
        draft.fail("inputs differ in shape (" + shape_text(input_shapes[0]) + " and " + shape_text(input_shapes[1]) +
                   ")");
      l.output = input_shapes[0];
      break;
    case LayerKind::fully_connected:
      if (p.out_channels <= 0) draft.fail("out_features must be positive");
      l.output = {p.out_channels, 1, 1};
      break;
    case LayerKind::flatten:
      l.output = {input_shapes.front().elements(), 1, 1};
      break;
    case LayerKind::softmax_cross_entropy:
      l.output = {1, 1, 1};  // the scalar loss
      break;
  }
  l.cost = layer_cost(l, input_shapes);
  layers_.push_back(std::move(l));
  return index;
}

namespace {

Layer make_layer(LayerKind kind, std::vector<int> inputs, std::string name, LayerParams params = {}) {
  Layer layer;
  layer.kind = kind;
  layer.inputs = std::move(inputs);
  layer.name = std::move(name);
  layer.params = params;
  return layer;
}

LayerParams window_params(std::int64_t kernel, std::int64_t stride, std::int64_t padding, bool ceil_mode) {
  LayerParams params;
  params.kernel = kernel;
  params.stride = stride;
  params.padding = padding;
  params.ceil_mode = ceil_mode;
  return params;
}

}  // namespace

int NetworkBuilder::convolution(int from, std::int64_t out_channels, std::int64_t kernel, std::int64_t stride,
                                std::int64_t padding, bool bias, std::string name) {
  LayerParams params = window_params(kernel, stride, padding, false);
  params.out_channels = out_channels;
  params.bias = bias;
  return append(make_layer(LayerKind::convolution, {from}, std::move(name), params));
}

int NetworkBuilder::max_pool(int from, std::int64_t kernel, std::int64_t stride, std::int64_t padding, bool ceil_mode,
                             std::string name) {
  return append(make_layer(LayerKind::max_pool, {from}, std::move(name),
                           window_params(kernel, stride, padding, ceil_mode)));
}

int NetworkBuilder::avg_pool(int from, std::int64_t kernel, std::int64_t stride, std::int64_t padding, bool ceil_mode,
                             std::string name) {
  return append(make_layer(LayerKind::avg_pool, {from}, std::move(name),
                           window_params(kernel, stride, padding, ceil_mode)));
}

int NetworkBuilder::lrn(int from, std::int64_t size, double alpha, double beta, double k, std::string name) {
  LayerParams params;
  params.lrn_size = size;
  params.lrn_alpha = alpha;
  params.lrn_beta = beta;
  params.lrn_k = k;
  return append(make_layer(LayerKind::lrn, {from}, std::move(name), params));
}

int NetworkBuilder::relu(int from, std::string name) {
  return append(make_layer(LayerKind::relu, {from}, std::move(name)));
}

int NetworkBuilder::batch_norm(int from, std::string name) {
  return append(make_layer(LayerKind::batch_norm, {from}, std::move(name)));
}

int NetworkBuilder::dropout(int from, double rate, std::string name) {
  LayerParams params;
  params.dropout_rate = rate;
  return append(make_layer(LayerKind::dropout, {from}, std::move(name), params));
}

int NetworkBuilder::concat(const std::vector<int>& from, std::string name) {
  return append(make_layer(LayerKind::concat, from, std::move(name)));
}

int NetworkBuilder::add(int a, int b, std::string name) {
  return append(make_layer(LayerKind::add, {a, b}, std::move(name)));
}

int NetworkBuilder::fully_connected(int from, std::int64_t out_features, bool bias, std::string name) {
  LayerParams params;
  params.out_channels = out_features;
  params.bias = bias;
  return append(make_layer(LayerKind::fully_connected, {from}, std::move(name), params));
}

int NetworkBuilder::flatten(int from, std::string name) {
  return append(make_layer(LayerKind::flatten, {from}, std::move(name)));
}

Network NetworkBuilder::finish_with_loss(int from) {
  append(make_layer(LayerKind::softmax_cross_entropy, {from}, "loss"));
  return Network(name_, std::move(layers_));
}

}  // namespace crossbench
