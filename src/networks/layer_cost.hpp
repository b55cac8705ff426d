// The cost model of one layer (internal to src/networks): FLOPs, parameters and
// activation bytes per image, from the layer's kind, parameters, output shape
// and input shapes.
#pragma once

#include <vector>

#include "crossbench/network.hpp"

namespace crossbench {

// `input_shapes` are the output shapes of the layer's inputs, in order.
LayerCost layer_cost(const Layer& layer, const std::vector<TensorShape>& input_shapes);

// Training FLOPs of one layer per image (forward + backward), from its forward FLOPs:
// convolution and fully_connected: forward + data gradient + weight gradient = 3 × forward,
// except when the layer reads the network input (layer 0), which needs no data gradient: 2 ×.
// Every other layer: forward + one backward of about the same cost = 2 × forward.
double layer_training_flops(const Layer& layer);

}  // namespace crossbench
