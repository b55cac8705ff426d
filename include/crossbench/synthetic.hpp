// The one seeded generator of synthetic data: weights, inputs, labels and
// dropout masks. Counter-based (splitmix64 of seed, tensor id and element
// index), so any engine, in any language, on any device, reproduces the same
// values in any order. A worker in Python reproduces it with 64-bit integer
// arithmetic; tests/core/synthetic_test.cpp holds reference values.
//
// Canonical layouts: input NCHW; convolution weights OIHW; fully-connected
// weights (out, in) with `in` in (C, H, W) order; biases, batch-norm gamma/beta
// per channel. Engines that use another layout permute after generating.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "crossbench/network.hpp"

namespace crossbench::synthetic {

// Parameter slots of a layer (tensor id = (layer index + 1) * 16 + slot).
enum class Slot : std::uint64_t { weight = 0, bias = 1, bn_gamma = 2, bn_beta = 3, dropout_mask = 4 };

inline constexpr std::uint64_t input_tensor_id = 1;
inline constexpr std::uint64_t labels_tensor_id = 2;

std::uint64_t tensor_id(int layer_index, Slot slot);

// splitmix64 finaliser of (seed, tensor_id, index).
std::uint64_t hash(std::uint64_t seed, std::uint64_t tensor_id, std::uint64_t index);
// Uniform in [0, 1) from the top 24 bits of hash() (exactly representable in fp32).
float uniform01(std::uint64_t seed, std::uint64_t tensor_id, std::uint64_t index);
// Uniform in [-scale, scale): scale * (2 * uniform01 - 1).
void fill_uniform(std::span<float> out, std::uint64_t seed, std::uint64_t tensor_id, float scale);

// Weights: He-uniform, scale sqrt(6 / fan_in) (fan_in = in_channels * k * k, or
// in_features), so that deep ReLU networks without batch-norm keep their scale.
// Biases and batch-norm beta: 0. Batch-norm gamma: 1.
// Returns the canonical-layout values of `slot` of layer `layer_index`.
std::vector<float> parameter(const Network& network, int layer_index, Slot slot, std::uint64_t seed);
// Number of elements of `slot` of a layer (0 when the layer has no such parameter).
std::int64_t parameter_elements(const Network& network, int layer_index, Slot slot);

// Input batch, NCHW, uniform in [-1, 1).
std::vector<float> input(const Network& network, std::int64_t batch, std::uint64_t seed);
// Labels in [0, classes): hash(seed, labels_tensor_id, image) % classes.
std::vector<std::int32_t> labels(const Network& network, std::int64_t batch, std::uint64_t seed);

// Dropout keep-mask for one step: element i of a layer's output (NCHW over the
// batch) is kept when uniform01(seed, tensor_id(layer, dropout_mask) + (step << 32), i) >= rate.
// Kept elements are scaled by 1 / (1 - rate) (inverted dropout).
bool dropout_keep(std::uint64_t seed, int layer_index, std::uint64_t step, std::uint64_t index, double rate);

}  // namespace crossbench::synthetic
