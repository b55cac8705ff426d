// One layer's share of a step, from the separate profiling pass of
// --layer-times (Session::layer_times). Its own header so that a CellResult
// can carry layer times without depending on the engine interface.
#pragma once

#include <string>

namespace crossbench {

struct LayerTime {
  std::string layer;          // the network's layer name
  std::string kind;           // its LayerKind ("convolution", ...)
  double forward_ms = 0;      // median over the profiling repetitions [ms]
  double backward_ms = 0;     // [ms]: input and weight gradients, and the weight update under --update sgd; 0 in inference
};

}  // namespace crossbench
