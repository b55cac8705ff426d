// The engine-independent layer graph, the nine networks of DESIGN.md and their cost model.
//
// Shapes are per image (channels, height, width); the batch is a property of a
// cell, not of a network. Layers are in topological order: a layer's inputs
// are always earlier layers. Layer 0 is the input; the last layer is the
// softmax-cross-entropy loss.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace crossbench {

enum class LayerKind {
  input,
  convolution,
  max_pool,
  avg_pool,
  lrn,
  relu,
  batch_norm,
  dropout,
  concat,          // along channels
  add,             // element-wise, residual
  fully_connected, // input taken as flattened (C, H, W) in that order
  flatten,
  softmax_cross_entropy,  // loss over the classes; its output is the scalar loss
};

std::string_view to_string(LayerKind kind);
std::optional<LayerKind> layer_kind_from_string(std::string_view name);

// Per-image tensor shape; a fully-connected output is (features, 1, 1).
struct TensorShape {
  std::int64_t channels = 0;
  std::int64_t height = 1;
  std::int64_t width = 1;
  std::int64_t elements() const { return channels * height * width; }
  bool operator==(const TensorShape&) const = default;
};

struct LayerParams {
  std::int64_t out_channels = 0;  // convolution: filters; fully_connected: output features
  std::int64_t kernel = 0;        // convolution, pooling: square kernel size
  std::int64_t stride = 1;        // convolution, pooling
  std::int64_t padding = 0;       // convolution, pooling: symmetric, each side
  bool bias = false;              // convolution, fully_connected
  bool ceil_mode = false;         // pooling: output size rounds up (Caffe GoogLeNet)
  std::int64_t lrn_size = 5;      // lrn: across channels
  double lrn_alpha = 1e-4;
  double lrn_beta = 0.75;
  double lrn_k = 1.0;
  double dropout_rate = 0.5;      // dropout: probability of zeroing
  double bn_epsilon = 1e-5;       // batch_norm
  double bn_momentum = 0.1;       // batch_norm: running-statistics update (PyTorch convention)
};

// Cost of one layer for one image, forward pass.
struct LayerCost {
  double forward_flops = 0;            // 2 × multiply-adds (convolution, fully_connected); element ops otherwise
  std::int64_t parameters = 0;         // trainable parameters (weights + biases; BN: gamma + beta)
  std::int64_t activation_bytes = 0;   // bytes of the layer's output, fp32
};

struct Layer {
  std::string name;
  LayerKind kind = LayerKind::input;
  std::vector<int> inputs;  // indices of earlier layers
  LayerParams params;
  TensorShape output;       // per image
  LayerCost cost;
};

class Network {
 public:
  Network() = default;
  Network(std::string name, std::vector<Layer> layers);  // validates: topological order, one input, loss last

  const std::string& name() const { return name_; }
  const std::vector<Layer>& layers() const { return layers_; }
  const TensorShape& input_shape() const { return layers_.front().output; }
  std::int64_t classes() const;             // features entering the loss
  int logits_layer() const;                 // the layer feeding the loss

  double forward_flops_per_image() const;   // sum of layer forward FLOPs
  // Forward + backward (data and weight gradients): about 3 × forward, computed per layer.
  double training_flops_per_image() const;
  std::int64_t parameters() const;
  std::int64_t activation_bytes_per_image() const;

 private:
  std::string name_;
  std::vector<Layer> layers_;
};

// Builds a Network layer by layer, inferring shapes and costs. Each method
// returns the new layer's index. Names are generated when empty.
class NetworkBuilder {
 public:
  NetworkBuilder(std::string network_name, TensorShape input);
  int input() const { return 0; }
  int convolution(int from, std::int64_t out_channels, std::int64_t kernel, std::int64_t stride = 1,
                  std::int64_t padding = 0, bool bias = true, std::string name = {});
  int max_pool(int from, std::int64_t kernel, std::int64_t stride, std::int64_t padding = 0,
               bool ceil_mode = false, std::string name = {});
  int avg_pool(int from, std::int64_t kernel, std::int64_t stride, std::int64_t padding = 0,
               bool ceil_mode = false, std::string name = {});
  int lrn(int from, std::int64_t size, double alpha, double beta, double k, std::string name = {});
  int relu(int from, std::string name = {});
  int batch_norm(int from, std::string name = {});
  int dropout(int from, double rate, std::string name = {});
  int concat(const std::vector<int>& from, std::string name = {});
  int add(int a, int b, std::string name = {});
  int fully_connected(int from, std::int64_t out_features, bool bias = true, std::string name = {});
  int flatten(int from, std::string name = {});
  // Adds the loss after `from` and returns the finished network.
  Network finish_with_loss(int from);

 private:
  int append(Layer layer);
  std::string name_;
  std::vector<Layer> layers_;
};

// The networks of DESIGN.md, in the order `crossbench list networks` prints them.
const std::vector<std::string>& network_names();
// Throws UsageError naming the unknown network and listing the valid ones.
[[nodiscard]] Network make_network(std::string_view name);

// The layer graph as JSON (`crossbench export-network`), and back (workers, tests).
nlohmann::json to_json(const Network& network);
[[nodiscard]] Network network_from_json(const nlohmann::json& json);

}  // namespace crossbench
