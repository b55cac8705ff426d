// The names of the layer kinds: used by `crossbench describe` and by the JSON
// graph that workers read, so they are part of the worker contract.
#include <array>

#include "crossbench/network.hpp"

namespace crossbench {
namespace {

// Indexed by LayerKind; keep in the enum's order.
constexpr std::array<std::string_view, 13> kLayerKindNames{
    "input", "convolution", "max_pool", "avg_pool", "lrn", "relu", "batch_norm",
    "dropout", "concat", "add", "fully_connected", "flatten", "softmax_cross_entropy"};

static_assert(static_cast<std::size_t>(LayerKind::softmax_cross_entropy) + 1 == kLayerKindNames.size(),
              "every LayerKind needs a name");

}  // namespace

std::string_view to_string(LayerKind kind) { return kLayerKindNames.at(static_cast<std::size_t>(kind)); }

std::optional<LayerKind> layer_kind_from_string(std::string_view name) {
  for (std::size_t i = 0; i < kLayerKindNames.size(); ++i)
    if (kLayerKindNames[i] == name) return static_cast<LayerKind>(i);
  return std::nullopt;
}

}  // namespace crossbench
