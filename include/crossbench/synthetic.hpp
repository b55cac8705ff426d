// The one seeded generator of synthetic data: weights, inputs, labels and
// dropout masks. Counter-based (splitmix64 of seed, tensor id and element
// index), so any engine, in any language, on any device, reproduces the same
// values in any order. A worker in Python reproduces it with 64-bit integer
// arithmetic; tests/networks/synthetic_test.cpp holds reference values.
//
// Canonical layouts: input NCHW; convolution weights OIHW; fully-connected
// weights (out, in) with `in` in (C, H, W) order; biases, batch-norm gamma/beta
// per channel. Engines that use another layout permute after generating.
//
// Exact definition (all arithmetic on uint64, wrapping modulo 2^64):
//
//   G = 0x9E3779B97F4A7C15
//   mix(z):  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
//            z = (z ^ (z >> 27)) * 0x94D049BB133111EB
//            return z ^ (z >> 31)                        (the splitmix64 finaliser)
//   hash(seed, tensor_id, index) = mix(mix(seed ^ (tensor_id * G)) + (index + 1) * G)
//
// i.e. element `index` of a tensor is output number `index` of a splitmix64
// stream whose state starts at mix(seed ^ tensor_id * G).
//
//   uniform01 = float(hash >> 40) * 2^-24                        (exact in fp32 and fp64)
//   fill_uniform element i = fp32(scale) * fp32(2 * uniform01 - 1)  (one fp32 rounding: the product)
//   He weights: scale = fp32(sqrt(6.0 / fan_in)), sqrt in fp64, index i = flat index in the
//   canonical layout; tensor id = tensor_id(layer, Slot::weight).
//   input element i (flat NCHW over the batch) = fill_uniform(seed, input_tensor_id, scale 1).
//   label of image n = hash(seed, labels_tensor_id, n) % classes.
//   dropout: kept when fp64(uniform01(seed, tensor_id(layer, dropout_mask) + (step << 32), i)) >= rate.
//
// Python: M = 2**64 - 1; mix with `& M` after each multiply; or numpy uint64 arrays.
// Reference values (tests/networks/synthetic_test.cpp holds them):
//   hash(0, 0, 0)                           = 0xE220A8397B1DCDAF  (splitmix64's first output from 0)
//   hash(42, 1, 0)                          = 0x57E1FABA65107204
//   hash(42, 1, 1)                          = 0xF4ABD143FEB24055
//   hash(42, 2, 7)                          = 0x3E3E0F26E4519090
//   hash(42, 32, 12345)                     = 0x12942C75268F5C0E
//   hash(7, 21474836548, 999999)            = 0x26AE80A0805402C2  (tensor_id(3, dropout_mask) + (5 << 32))
//   hash(2^64 - 1, 123456789, 2^40)         = 0xFFC0BD699750FDE5
//   alexnet, seed 42, conv1 (layer 1, fan_in 363) weights [0], [1], [2], [23231] as fp32 bits:
//     0x3ADEAE2D, 0x3D77DE0A, 0x3D11A220, 0xBDC24908; labels(batch 4) = 931, 375, 603, 663;
//     input [0], [1] = -0.313416243, 0.911493421.
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
// Uniform in [-scale, scale): scale * (2 * uniform01 - 1); out[i] is element first_index + i.
void fill_uniform(std::span<float> out, std::uint64_t seed, std::uint64_t tensor_id, float scale,
                  std::uint64_t first_index = 0);

// Weights: He-uniform, scale sqrt(6 / fan_in) (fan_in = in_channels * k * k, or
// in_features), so that deep ReLU networks without batch-norm keep their scale.
// Biases and batch-norm beta: 0. Batch-norm gamma: 1.
// Returns the canonical-layout values of `slot` of layer `layer_index` (empty when the layer
// has no such parameter; throws Error for a layer index out of range).
std::vector<float> parameter(const Network& network, int layer_index, Slot slot, std::uint64_t seed);
// Number of elements of `slot` of a layer (0 when the layer has no such parameter).
std::int64_t parameter_elements(const Network& network, int layer_index, Slot slot);

// Input batch, NCHW, uniform in [-1, 1): images first_image .. first_image + batch - 1
// of the one endless synthetic batch (a data-parallel rank trains its shard of it).
std::vector<float> input(const Network& network, std::int64_t batch, std::uint64_t seed, std::int64_t first_image = 0);
// Labels in [0, classes): hash(seed, labels_tensor_id, image) % classes, same images.
std::vector<std::int32_t> labels(const Network& network, std::int64_t batch, std::uint64_t seed,
                                 std::int64_t first_image = 0);

// Dropout keep-mask for one step: element i of a layer's output (NCHW over the
// batch) is kept when uniform01(seed, tensor_id(layer, dropout_mask) + (step << 32), i) >= rate.
// Kept elements are scaled by 1 / (1 - rate) (inverted dropout).
bool dropout_keep(std::uint64_t seed, int layer_index, std::uint64_t step, std::uint64_t index, double rate);

}  // namespace crossbench::synthetic
