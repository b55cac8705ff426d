#include "crossbench/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace crossbench {

double percentile_of_sorted(std::span<const double> sorted, double q) {
  if (sorted.empty()) return not_a_number;
  const double position = q * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<std::size_t>(std::floor(position));
  const auto above = std::min(below + 1, sorted.size() - 1);
  const double fraction = position - static_cast<double>(below);
  return sorted[below] + fraction * (sorted[above] - sorted[below]);
}

void median_confidence_interval(std::span<const double> sorted, double& low, double& high) {
  const auto n = static_cast<double>(sorted.size());
  if (sorted.size() < 2) {
    low = high = not_a_number;
    return;
  }
  // The number of samples below the median is Binomial(n, 1/2); its 95% band
  // is n/2 ± 1.96·√n/2. Ranks are 1-based order statistics.
  const double half_band = 1.959963984540054 * std::sqrt(n) / 2.0;
  const double low_rank = std::floor(n / 2.0 - half_band);
  const double high_rank = std::ceil(n / 2.0 + half_band) + 1.0;
  const auto clamp_index = [&](double rank) {
    return static_cast<std::size_t>(std::clamp(rank, 1.0, n) - 1.0);
  };
  low = sorted[clamp_index(low_rank)];
  high = sorted[clamp_index(high_rank)];
}

Statistics summarize(std::span<const double> samples_ms) {
  Statistics statistics;
  if (samples_ms.empty()) return statistics;
  std::vector<double> sorted(samples_ms.begin(), samples_ms.end());
  std::sort(sorted.begin(), sorted.end());
  const auto n = static_cast<double>(sorted.size());
  statistics.median_ms = percentile_of_sorted(sorted, 0.5);
  statistics.mean_ms = std::accumulate(sorted.begin(), sorted.end(), 0.0) / n;
  if (sorted.size() > 1) {
    double squares = 0;
    for (double value : sorted) squares += (value - statistics.mean_ms) * (value - statistics.mean_ms);
    statistics.std_ms = std::sqrt(squares / (n - 1.0));
  }
  statistics.min_ms = sorted.front();
  statistics.max_ms = sorted.back();
  statistics.p05_ms = percentile_of_sorted(sorted, 0.05);
  statistics.p95_ms = percentile_of_sorted(sorted, 0.95);
  median_confidence_interval(sorted, statistics.ci_low_ms, statistics.ci_high_ms);
  return statistics;
}

double relative_ci_half_width(const Statistics& statistics) {
  const double half_width = (statistics.ci_high_ms - statistics.ci_low_ms) / 2.0;
  if (!std::isfinite(half_width) || !(statistics.median_ms > 0))
    return std::numeric_limits<double>::infinity();
  return half_width / statistics.median_ms;
}

}  // namespace crossbench
