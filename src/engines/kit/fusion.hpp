// The one fusion pass of the native engines (DESIGN.md "Fusion"): it reads a
// network and a cell and proposes fused groups of layers, asks the engine
// whether it can lower each one, and returns the groups taken and, for each
// group not taken, the reason. It is pure: no library call, no tensor; the
// engines only lower what it returns, and `decisions` prints exactly it.
//
// A group is a chain of layers whose intermediate outputs have one reader
// each, so nothing outside the group sees a value the fusion never writes:
//
//   conv_bias_relu    convolution (+ its bias) + relu
//   conv_bias_relu_pool  training: convolution (+ its bias) + relu + max pool
//   conv_bn_relu      inference: convolution + batch-norm folded into it (+ relu)
//   conv_bn_add_relu  inference: convolution + batch-norm folded into it + residual add + relu
//   bn_relu           training: batch-norm (batch statistics) + relu
//   bn_add_relu       training: batch-norm + residual add + relu
//   add_relu          residual add + relu
//   fc_bias_relu      fully-connected (+ its bias) + relu
//
// Each group stands for its forward and its backward counterpart (dReLU
// folded into the producer's data gradient, dBN + dAdd + dReLU in one pass;
// conv_bias_relu_pool: the max pool's backward writes the relu's input
// gradient, the dReLU read from the pool's argmax, as the relu's output is
// the pool's input). Proposals are made from the output end: a relu is
// claimed by the longest chain that holds it (bn_add_relu or conv_bn_add_relu
// before add_relu, conv_bn_relu before conv_bias_relu, conv_bias_relu_pool
// before conv_bias_relu), and the next-longest is proposed when the engine
// refuses. conv_bn_add_relu's convolution is the add's input side that runs
// after the other input (the skip connection) exists, so the anchor can read
// it: conv3 in an identity block, the projection's convolution in a block
// whose conv3 comes first.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "crossbench/network.hpp"

namespace crossbench::kit {

enum class FusedKind {
  conv_bias_relu,
  conv_bn_relu,
  bn_relu,
  bn_add_relu,
  add_relu,
  fc_bias_relu,
  conv_bn_add_relu,
  conv_bias_relu_pool
};
[[nodiscard]] std::string_view to_string(FusedKind kind);

struct FusedGroup {
  FusedKind kind = FusedKind::conv_bias_relu;
  std::vector<int> layers;  // in network order; the first is the anchor that lowers the group
  int relu = -1;            // the relu at its end (before the pool in conv_bias_relu_pool), or -1 (conv_bn_relu without one)
  int batch_norm = -1;      // conv_bn_relu, bn_relu, bn_add_relu, conv_bn_add_relu
  int add = -1;             // bn_add_relu, add_relu, conv_bn_add_relu
  int residual = -1;        // bn_add_relu, conv_bn_add_relu: the add's other input (the skip connection)
  int pool = -1;            // conv_bias_relu_pool: the max pool, the relu's only reader
  [[nodiscard]] int anchor() const { return layers.front(); }
  [[nodiscard]] bool contains(int layer) const;
};

// What the planner asks an engine about one proposed group: nullopt when it
// can lower it for this cell, else the reason it cannot.
using CanLower = std::function<std::optional<std::string>(const FusedGroup&)>;

struct FusionRefusal {
  FusedGroup group;
  std::string reason;
};

class FusionPlan {
 public:
  FusionPlan() = default;
  FusionPlan(std::size_t layer_count, std::vector<FusedGroup> groups, std::vector<FusionRefusal> refused);

  [[nodiscard]] const std::vector<FusedGroup>& groups() const { return groups_; }
  [[nodiscard]] const std::vector<FusionRefusal>& refused() const { return refused_; }
  // The group a layer belongs to, or nullptr.
  [[nodiscard]] const FusedGroup* group_of(int layer) const;
  // Whether `layer` is part of a group of `kind`.
  [[nodiscard]] bool in(int layer, FusedKind kind) const;
  // "fusions=conv_bias_relu:12,bn_add_relu:16;refused=bn_relu(bn1+relu1):reason,..." with layer names.
  [[nodiscard]] std::string decisions(const Network& network) const;
  // Counts per kind, for tests and the summary.
  [[nodiscard]] int count(FusedKind kind) const;

 private:
  std::vector<FusedGroup> groups_;
  std::vector<FusionRefusal> refused_;
  std::vector<int> group_of_;  // per layer: index into groups_, or -1
};

// The pass. `training`: the cell's phase. Layers are never in two groups.
[[nodiscard]] FusionPlan plan_fusions(const Network& network, bool training, const CanLower& can_lower);

}  // namespace crossbench::kit
