#include "engines/kit/fusion.hpp"

#include <algorithm>
#include <map>
#include <sstream>

namespace crossbench::kit {

std::string_view to_string(FusedKind kind) {
  switch (kind) {
    case FusedKind::conv_bias_relu: return "conv_bias_relu";
    case FusedKind::conv_bn_relu: return "conv_bn_relu";
    case FusedKind::bn_relu: return "bn_relu";
    case FusedKind::bn_add_relu: return "bn_add_relu";
    case FusedKind::add_relu: return "add_relu";
    case FusedKind::fc_bias_relu: return "fc_bias_relu";
    case FusedKind::conv_bn_add_relu: return "conv_bn_add_relu";
    case FusedKind::conv_bias_relu_pool: return "conv_bias_relu_pool";
  }
  return "?";
}

bool FusedGroup::contains(int layer) const { return std::find(layers.begin(), layers.end(), layer) != layers.end(); }

FusionPlan::FusionPlan(std::size_t layer_count, std::vector<FusedGroup> groups, std::vector<FusionRefusal> refused)
    : groups_(std::move(groups)), refused_(std::move(refused)), group_of_(layer_count, -1) {
  for (std::size_t g = 0; g < groups_.size(); ++g)
    for (int layer : groups_[g].layers) group_of_[static_cast<std::size_t>(layer)] = static_cast<int>(g);
}

const FusedGroup* FusionPlan::group_of(int layer) const {
  if (layer < 0 || static_cast<std::size_t>(layer) >= group_of_.size()) return nullptr;
  const int g = group_of_[static_cast<std::size_t>(layer)];
  return g < 0 ? nullptr : &groups_[static_cast<std::size_t>(g)];
}

bool FusionPlan::in(int layer, FusedKind kind) const {
  const FusedGroup* group = group_of(layer);
  return group != nullptr && group->kind == kind;
}

int FusionPlan::count(FusedKind kind) const {
  return static_cast<int>(std::count_if(groups_.begin(), groups_.end(), [&](const FusedGroup& g) { return g.kind == kind; }));
}

std::string FusionPlan::decisions(const Network& network) const {
  // Taken groups are counted per kind (a ResNet-152 has hundreds); every refusal is named with its reason,
  // refusals of one kind with one reason once, with their count.
  std::map<std::string, int> taken;
  for (const FusedGroup& g : groups_) ++taken[std::string(to_string(g.kind))];
  std::ostringstream text;
  text << "fusions=";
  if (taken.empty()) text << "none";
  bool first = true;
  for (const auto& [kind, n] : taken) {
    text << (first ? "" : ",") << kind << ":" << n;
    first = false;
  }
  // Per (kind, reason), in order of first appearance: the first group's layers and the count.
  std::vector<std::string> keys;
  std::vector<std::pair<std::string, int>> reasons;
  for (const FusionRefusal& r : refused_) {
    const std::string key = std::string(to_string(r.group.kind)) + "\n" + r.reason;
    const auto at = std::find(keys.begin(), keys.end(), key);
    if (at != keys.end()) {
      ++reasons[static_cast<std::size_t>(at - keys.begin())].second;
      continue;
    }
    std::string layers;
    for (int layer : r.group.layers)
      layers += (layers.empty() ? "" : "+") + network.layers()[static_cast<std::size_t>(layer)].name;
    keys.push_back(key);
    reasons.emplace_back(std::string(to_string(r.group.kind)) + "[" + layers + "](" + r.reason + ")", 1);
  }
  if (!reasons.empty()) {
    text << ";refused=";
    for (std::size_t i = 0; i < reasons.size(); ++i)
      text << (i ? "," : "") << reasons[i].first << (reasons[i].second > 1 ? " x" + std::to_string(reasons[i].second) : "");
  }
  return text.str();
}

namespace {

class Planner {
 public:
  Planner(const Network& network, bool training, const CanLower& can_lower)
      : network_(network), training_(training), can_lower_(can_lower), taken_(network.layers().size(), false),
        readers_(network.layers().size(), 0), reader_(network.layers().size(), -1) {
    for (int index = 0; index < static_cast<int>(network.layers().size()); ++index)
      for (int from : layer(index).inputs) {
        ++readers_[static_cast<std::size_t>(from)];
        reader_[static_cast<std::size_t>(from)] = index;
      }
  }

  FusionPlan run() {
    const int count = static_cast<int>(network_.layers().size());
    // Relu-ended chains, each relu claimed by its longest chain the engine lowers.
    for (int index = 1; index < count; ++index)
      if (kind(index) == LayerKind::relu) claim_relu_chain(index);
    // Inference: a batch-norm with no relu after it still folds into its convolution.
    if (!training_)
      for (int index = 1; index < count; ++index)
        if (kind(index) == LayerKind::batch_norm && !taken(index)) {
          const int conv = sole_producer(index, LayerKind::convolution);
          if (conv >= 0 && !taken(conv)) offer(group(FusedKind::conv_bn_relu, {conv, index}, -1, index));
        }
    return FusionPlan(network_.layers().size(), std::move(groups_), std::move(refused_));
  }

 private:
  LayerKind kind(int index) const { return network_.layers()[static_cast<std::size_t>(index)].kind; }
  const Layer& layer(int index) const { return network_.layers()[static_cast<std::size_t>(index)]; }
  bool taken(int index) const { return taken_[static_cast<std::size_t>(index)]; }
  int readers(int index) const { return readers_[static_cast<std::size_t>(index)]; }

  // The layer that alone reads `index`'s output when it is of `reader_kind`, not yet in a group; else -1.
  int sole_reader(int index, LayerKind reader_kind) const {
    if (readers(index) != 1) return -1;
    const int to = reader_[static_cast<std::size_t>(index)];
    if (kind(to) != reader_kind || taken(to) || layer(to).inputs.size() != 1) return -1;
    return to;
  }

  // The input of `index` when it is of `producer_kind`, not yet in a group, not
  // the network input, and read by `index` alone; else -1.
  int sole_producer(int index, LayerKind producer_kind) const {
    const int from = layer(index).inputs.front();
    if (from <= 0 || kind(from) != producer_kind || readers(from) != 1 || taken(from)) return -1;
    return from;
  }

  static FusedGroup group(FusedKind kind, std::vector<int> layers, int relu, int batch_norm = -1, int add = -1,
                          int residual = -1) {
    FusedGroup g;
    g.kind = kind;
    g.layers = std::move(layers);
    g.relu = relu;
    g.batch_norm = batch_norm;
    g.add = add;
    g.residual = residual;
    return g;
  }

  // Asks the engine; takes the group or records why not. True when taken.
  bool offer(FusedGroup g) {
    if (std::optional<std::string> reason = can_lower_(g)) {
      refused_.push_back({std::move(g), std::move(*reason)});
      return false;
    }
    for (int layer : g.layers) taken_[static_cast<std::size_t>(layer)] = true;
    groups_.push_back(std::move(g));
    return true;
  }

  void claim_relu_chain(int relu) {
    const int from = layer(relu).inputs.front();
    if (from <= 0 || readers(from) != 1 || taken(from)) return;
    switch (kind(from)) {
      case LayerKind::convolution: {
        // Training: a max pool that alone reads the relu takes the dReLU into its backward.
        const int pool = training_ ? sole_reader(relu, LayerKind::max_pool) : -1;
        if (pool >= 0) {
          FusedGroup g = group(FusedKind::conv_bias_relu_pool, {from, relu, pool}, relu);
          g.pool = pool;
          if (offer(std::move(g))) return;
        }
        offer(group(FusedKind::conv_bias_relu, {from, relu}, relu));
        return;
      }
      case LayerKind::fully_connected:
        offer(group(FusedKind::fc_bias_relu, {from, relu}, relu));
        return;
      case LayerKind::batch_norm: {
        if (!training_) {
          const int conv = sole_producer(from, LayerKind::convolution);
          if (conv >= 0) offer(group(FusedKind::conv_bn_relu, {conv, from, relu}, relu, from));
          return;
        }
        offer(group(FusedKind::bn_relu, {from, relu}, relu, from));
        return;
      }
      case LayerKind::add: {
        const Layer& add = layer(from);
        if (training_ && add.inputs.size() == 2 && add.inputs[0] != add.inputs[1]) {
          // The batch-norm side: the first input that is a batch-norm read by the add alone.
          for (int side = 0; side < 2; ++side) {
            const int bn = add.inputs[static_cast<std::size_t>(side)];
            const int residual = add.inputs[static_cast<std::size_t>(1 - side)];
            if (bn <= 0 || kind(bn) != LayerKind::batch_norm || readers(bn) != 1 || taken(bn)) continue;
            if (offer(group(FusedKind::bn_add_relu, {bn, from, relu}, relu, bn, from, residual))) return;
            break;
          }
        }
        if (!training_ && offer_conv_bn_add_relu(from, relu)) return;
        offer(group(FusedKind::add_relu, {from, relu}, relu, -1, from));
        return;
      }
      default:
        return;  // pooling, concat, ...: no fusion ends in their relu
    }
  }

  // Inference: convolution → batch-norm (folded) → add → relu, on the side of the add whose convolution
  // runs after the other input (the residual) exists. True when taken; a refusal is recorded.
  bool offer_conv_bn_add_relu(int add_index, int relu) {
    const Layer& add = layer(add_index);
    if (add.inputs.size() != 2 || add.inputs[0] == add.inputs[1]) return false;
    for (int side = 0; side < 2; ++side) {
      const int bn = add.inputs[static_cast<std::size_t>(side)];
      const int residual = add.inputs[static_cast<std::size_t>(1 - side)];
      if (bn <= 0 || kind(bn) != LayerKind::batch_norm || readers(bn) != 1 || taken(bn)) continue;
      const int conv = sole_producer(bn, LayerKind::convolution);
      if (conv < 0 || residual > conv) continue;
      return offer(group(FusedKind::conv_bn_add_relu, {conv, bn, add_index, relu}, relu, bn, add_index, residual));
    }
    return false;
  }

  const Network& network_;
  bool training_;
  const CanLower& can_lower_;
  std::vector<bool> taken_;
  std::vector<int> readers_;
  std::vector<int> reader_;  // per layer: a layer that reads its output (the only one where readers_ is 1), or -1
  std::vector<FusedGroup> groups_;
  std::vector<FusionRefusal> refused_;
};

}  // namespace

FusionPlan plan_fusions(const Network& network, bool training, const CanLower& can_lower) {
  return Planner(network, training, can_lower).run();
}

}  // namespace crossbench::kit
