#include "engines/cudnn/tensor_compare.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/cuda/cuda_check.hpp"
#include "crossbench/error.hpp"
#include "engines/cudnn/kernels_elementwise.hpp"

namespace crossbench::cudnn {

namespace {

float bits_to_float(const unsigned char* at, DType type) {
  if (type == DType::f32) {
    float value;
    std::memcpy(&value, at, sizeof value);
    return value;
  }
  std::uint16_t bits;
  std::memcpy(&bits, at, sizeof bits);
  if (type == DType::bf16) {
    __nv_bfloat16_raw raw;
    raw.x = bits;
    return __bfloat162float(__nv_bfloat16(raw));
  }
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}

// Calls visit(element offset) for t's elements in N, C, H, W order.
template <typename Visit>
void for_each_element(const Tensor& t, Visit&& visit) {
  for (std::int64_t n = 0; n < t.dims[0]; ++n)
    for (std::int64_t c = 0; c < t.dims[1]; ++c)
      for (std::int64_t h = 0; h < t.dims[2]; ++h)
        for (std::int64_t w = 0; w < t.dims[3]; ++w)
          visit(n * t.strides[0] + c * t.strides[1] + h * t.strides[2] + w * t.strides[3]);
}

void require_float_type(const Tensor& t, const char* what) {
  if (t.type != DType::f32 && t.type != DType::bf16 && t.type != DType::f16)
    throw Error(std::string("cuDNN engine: ") + what + " reads fp32, bf16 or fp16 tensors only");
}

}  // namespace

std::vector<float> host_floats(const void* first, const Tensor& t, cudaStream_t stream, const char* what) {
  require_float_type(t, what);
  const auto span = static_cast<std::size_t>(t.span_bytes());
  std::vector<unsigned char> bytes(span);
  CB_CHECK_CUDA(cudaStreamSynchronize(stream));
  CB_CHECK_CUDA(cudaMemcpy(bytes.data(), first, span, cudaMemcpyDeviceToHost));
  const auto element = static_cast<std::int64_t>(size_of(t.type));
  std::vector<float> values;
  values.reserve(static_cast<std::size_t>(t.elements()));
  for_each_element(t, [&](std::int64_t at) { values.push_back(bits_to_float(bytes.data() + at * element, t.type)); });
  return values;
}

bool all_finite(const std::vector<float>& values) {
  return std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); });
}

double relative_difference(const std::vector<float>& want, const std::vector<float>& got) {
  if (want.size() != got.size()) return std::numeric_limits<double>::infinity();
  double largest = 0, worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(want[i]) || !std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    largest = std::max(largest, std::fabs(static_cast<double>(want[i])));
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
  }
  return largest > 0 ? worst / largest : worst;
}

double statistics_agreement(const std::vector<float>& plan_sums, const std::vector<double>& reference_sums,
                            std::int64_t rows) {
  const std::size_t channels = reference_sums.size() / 2;
  if (rows < 1 || channels == 0 || plan_sums.size() != 2 * channels || reference_sums.size() != 2 * channels)
    return std::numeric_limits<double>::infinity();
  const auto n = static_cast<double>(rows);
  double worst = NAN;
  for (std::size_t c = 0; c < channels; ++c) {
    const double mean = reference_sums[c] / n;
    const double variance = reference_sums[channels + c] / n - mean * mean;
    if (!std::isfinite(variance) || !(variance > 0)) continue;
    const double plan_sum = plan_sums[c], plan_squares = plan_sums[channels + c];
    if (!std::isfinite(plan_sum) || !std::isfinite(plan_squares)) return std::numeric_limits<double>::infinity();
    const double plan_mean = plan_sum / n;
    const double plan_variance = plan_squares / n - plan_mean * plan_mean;
    const double off = std::max(std::abs(plan_mean - mean) / std::sqrt(variance), std::abs(plan_variance - variance) / variance);
    worst = std::isnan(worst) ? off : std::max(worst, off);
  }
  return worst;
}

float cacheable_difference(double difference) {
  return std::isnan(difference) ? NAN : static_cast<float>(std::min(difference, kFarApart));
}

std::string difference_text(double difference) {
  if (difference >= kFarApart * (1 - 1e-6)) return "inf";
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", difference);
  return text;
}

double plan_agreement_bound(Precision precision) {
  switch (precision) {
    case Precision::fp32: return 1e-3;
    case Precision::tf32: return 1e-2;
    default: return 5e-2;
  }
}

DeviceReference::DeviceReference(const void* at, const Tensor& t, void* storage, unsigned* counters,
                                 cudaStream_t stream)
    : values_(storage), counters_(counters), layout_(t), stream_(stream) {
  CB_CHECK_CUDA(cudaMemcpyAsync(values_, at, static_cast<std::size_t>(t.span_bytes()), cudaMemcpyDeviceToDevice, stream_));
}

double DeviceReference::difference_from(const void* got) const {
  CB_CHECK_CUDA(cudaMemsetAsync(counters_, 0, 3 * sizeof(unsigned), stream_));
  kernels::differences(values_, got, layout_.type, layout_.dims, layout_.strides, counters_, stream_);
  unsigned bits[3];
  CB_CHECK_CUDA(cudaMemcpyAsync(bits, counters_, sizeof bits, cudaMemcpyDeviceToHost, stream_));
  CB_CHECK_CUDA(cudaStreamSynchronize(stream_));
  if (bits[2] > 0) return std::numeric_limits<double>::infinity();
  float largest, worst;
  std::memcpy(&largest, &bits[0], sizeof largest);
  std::memcpy(&worst, &bits[1], sizeof worst);
  return largest > 0 ? static_cast<double>(worst) / largest : static_cast<double>(worst);
}

}  // namespace crossbench::cudnn
