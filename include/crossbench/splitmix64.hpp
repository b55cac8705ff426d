// splitmix64, written once for the host (src/networks/synthetic.cpp) and the
// device (the cuDNN engine's fill kernels): the synthetic generator's streams
// must agree bit for bit on both (formulas in synthetic.hpp).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define CROSSBENCH_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define CROSSBENCH_HOST_DEVICE inline
#endif

namespace crossbench::splitmix64 {

constexpr std::uint64_t kGoldenGamma = 0x9E3779B97F4A7C15ULL;  // splitmix64's increment

// The splitmix64 finaliser (Steele, Lea and Flood 2014; Vigna's constants).
CROSSBENCH_HOST_DEVICE std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The state of the stream of one tensor: element i is output i of that stream.
CROSSBENCH_HOST_DEVICE std::uint64_t stream_state(std::uint64_t seed, std::uint64_t tensor_id) {
  return mix(seed ^ (tensor_id * kGoldenGamma));
}

CROSSBENCH_HOST_DEVICE std::uint64_t stream_element(std::uint64_t state, std::uint64_t index) {
  return mix(state + (index + 1) * kGoldenGamma);
}

// The top 24 bits as a float in [0, 1): exact (24 bits times a power of two).
CROSSBENCH_HOST_DEVICE float to_unit_interval(std::uint64_t bits) {
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
}

}  // namespace crossbench::splitmix64
