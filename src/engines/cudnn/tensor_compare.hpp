// Device tensors compared: read back to the host as float (the session's
// accessors for the tests, cudnn_session.cpp), or held on the device and
// compared there (the agreement check every measured choice passes before it
// replaces another, layer_convolution.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "crossbench/cell.hpp"
#include "engines/cudnn/tensor.hpp"

namespace crossbench::cudnn {

// The logical elements of `t` (fp32, bf16 or fp16, any strides) whose first
// element is at `first` in device memory, as float in N, C, H, W index order.
// Synchronous: waits for `stream` first.
std::vector<float> host_floats(const void* first, const Tensor& t, cudaStream_t stream, const char* what);

// Whether every value is finite (no NaN, no infinity).
[[nodiscard]] bool all_finite(const std::vector<float>& values);

// The largest |got - want| over the largest |want| (infinity where either
// holds a NaN or an infinity): how far apart two computations of one tensor are.
[[nodiscard]] double relative_difference(const std::vector<float>& want, const std::vector<float>& got);

// The largest relative_difference a measured plan may have from the legacy
// algorithm on the same data: another summation order, or another algorithm of
// the same math, stays far below it (fp32 1e-3, tf32 1e-2, 16-bit 5e-2), while
// a plan that reads memory it did not write, or writes too little, does not.
[[nodiscard]] double plan_agreement_bound(Precision precision);

// engine.conv_statistics: how far a statistics plan's per-channel sums (Σy, then Σy², C floats each) are
// from the reference sums of its own output over `rows` values a channel (C doubles each, in the same
// order): per channel the mean's difference in standard deviations of the reference and the biased
// variance's relative difference, the worst over the channels (what a batch-norm would normalise with;
// the sums' own rounding does not enter twice); infinity for a non-finite plan value; NaN where every
// reference variance is 0 or not finite (nothing to hold them to). Plain arithmetic: tested on the CPU.
[[nodiscard]] double statistics_agreement(const std::vector<float>& plan_sums, const std::vector<double>& reference_sums,
                                          std::int64_t rows);
// Its bound: the plan's statistics normalise within a thousandth of a standard deviation of its output's
// own (the fp32 sums' rounding over a ResNet-50 layer at batch 256 is about 1e-6 of that).
inline constexpr double kStatisticsAgreementBound = 1e-3;

// A relative_difference as the algorithm cache keeps it (JSON has no infinity, and a null there reads
// as "not measured"): at most kFarApart, NaN kept. difference_text writes it back: "inf" from
// kFarApart on, else three significant digits.
inline constexpr double kFarApart = 1e30;
[[nodiscard]] float cacheable_difference(double difference);
[[nodiscard]] std::string difference_text(double difference);

// A tensor's values at one place in device memory, copied aside on the device into `storage`
// (at least t.span_bytes()): how far what that place holds later is from them
// (relative_difference's measure, compared on the device by kernels::differences, with its three
// `counters` in device memory; infinity for any non-finite pair). No tensor crosses to the host: a
// cold search checks every convolution's output (VGG's conv1: 822 MB in fp32). Owns nothing.
class DeviceReference {
 public:
  DeviceReference(const void* at, const Tensor& t, void* storage, unsigned* counters, cudaStream_t stream);
  // Synchronous (waits for `stream`).
  [[nodiscard]] double difference_from(const void* got) const;

 private:
  void* values_;
  unsigned* counters_;
  Tensor layout_;
  cudaStream_t stream_;
};

}  // namespace crossbench::cudnn
