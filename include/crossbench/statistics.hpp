// Summary statistics of per-step times (DESIGN.md "Measurement").
#pragma once

#include <cstddef>
#include <limits>
#include <span>

namespace crossbench {

inline constexpr double not_a_number = std::numeric_limits<double>::quiet_NaN();

struct Statistics {
  double median_ms = not_a_number;
  double mean_ms = not_a_number;
  double std_ms = not_a_number;   // sample standard deviation (n - 1)
  double min_ms = not_a_number;
  double max_ms = not_a_number;
  double p05_ms = not_a_number;   // percentiles: linear interpolation between order statistics
  double p95_ms = not_a_number;
  double ci_low_ms = not_a_number;   // distribution-free 95% confidence interval of the median
  double ci_high_ms = not_a_number;
};

// Percentile q in [0, 1] of sorted samples, linear interpolation (numpy's default).
double percentile_of_sorted(std::span<const double> sorted, double q);
// 95% CI of the median from order statistics: ranks n/2 ∓ 1.96·√n/2 (binomial,
// normal approximation), clamped to the sample; [NaN, NaN] for fewer than 2 samples.
void median_confidence_interval(std::span<const double> sorted, double& low, double& high);
[[nodiscard]] Statistics summarize(std::span<const double> samples_ms);
// (ci_high - ci_low) / 2 / median; +inf when undefined.
double relative_ci_half_width(const Statistics& statistics);

}  // namespace crossbench
