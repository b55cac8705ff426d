// Where a step's time goes, from the separate profiling pass of --layer-times:
// the raw per-op samples an engine returns (Session::profile) and the
// per-layer medians the Runner makes of them (layer_medians, core's
// statistics). Its own header so that a CellResult can carry layer times
// without depending on the engine interface.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace crossbench {

struct LayerTime {
  std::string layer;          // the network's layer name
  std::string kind;           // its LayerKind ("convolution", ...)
  double forward_ms = 0;      // median over the profiling repetitions [ms]
  double backward_ms = 0;     // [ms]: input and weight gradients, and the weight update under --update sgd; 0 in inference
};

// The part of a step an op belongs to. A layer's forward time is its forward
// and loss ops; its backward time everything else it ran.
enum class OpStage : std::uint8_t { forward, loss, backward, update, bookkeeping };

// What both native engines tag each op of their op list with (their Op
// types derive from it): the profiler, CUDA-graph capture and data-parallel
// gradient readiness walk that list.
struct OpTag {
  std::string label;  // "conv1 backward filter": error messages and profiles
  int layer = 0;      // the network layer whose work this is
  OpStage stage = OpStage::forward;
};

// Session::profile(repetitions): every op of a step, in step order, tagged
// (layer, stage), and its time in each profiled repetition.
struct OpSamples {
  struct Layer {
    std::string name, kind;  // the network's layer name and LayerKind
  };
  std::vector<Layer> layers;               // every layer of the network, in order
  std::vector<OpTag> ops;                  // empty: the engine cannot profile; layer indexes `layers`
  std::vector<std::vector<double>> ms;     // [repetition][op] [ms]
};

// Per layer: the medians over the repetitions of its forward and backward
// sums (src/runner/runner.cpp, with core/statistics). Empty when no op was profiled.
std::vector<LayerTime> layer_medians(const OpSamples& samples);
// Per op, in step order: (label, median [ms]).
std::vector<std::pair<std::string, double>> op_medians(const OpSamples& samples);

}  // namespace crossbench
