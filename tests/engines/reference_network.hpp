// A straightforward reference executor of a Network in double precision:
// plain loops, NCHW, written from the layer definitions (PyTorch semantics),
// used to check the oneDNN engine layer by layer.
#pragma once

#include <cstdint>
#include <vector>

#include "crossbench/network.hpp"
#include "crossbench/synthetic.hpp"

namespace crossbench::testing {

struct ReferenceParameter {
  int layer;
  synthetic::Slot slot;
  std::vector<double> value, gradient;
};

struct ReferenceResult {
  std::vector<std::vector<double>> outputs;    // per layer, NCHW over the batch
  std::vector<std::vector<double>> gradients;  // per layer, d loss / d output (training)
  std::vector<ReferenceParameter> parameters;  // layer order: weight, bias, gamma, beta
  double loss = 0;
  double logits_checksum = 0;
};

// One forward (and backward when `training`) with dropout mask `step`, seed as the engine.
ReferenceResult run_reference(const Network& network, std::int64_t batch, std::uint64_t seed, bool training,
                              std::uint64_t step = 0);

}  // namespace crossbench::testing
