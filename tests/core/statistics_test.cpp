#include "crossbench/statistics.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace crossbench {
namespace {

TEST(Statistics, KnownSampleSet) {
  // 1..10 ms in shuffled order: values checked against numpy (np.percentile, np.std(ddof=1)).
  const std::vector<double> samples{7, 3, 10, 1, 5, 9, 2, 8, 4, 6};
  const Statistics s = summarize(samples);
  EXPECT_DOUBLE_EQ(s.median_ms, 5.5);
  EXPECT_DOUBLE_EQ(s.mean_ms, 5.5);
  EXPECT_NEAR(s.std_ms, 3.0276503540974917, 1e-12);
  EXPECT_DOUBLE_EQ(s.min_ms, 1);
  EXPECT_DOUBLE_EQ(s.max_ms, 10);
  EXPECT_NEAR(s.p05_ms, 1.45, 1e-12);
  EXPECT_NEAR(s.p95_ms, 9.55, 1e-12);
  // n = 10: ranks floor(5 - 3.099) = 1 and ceil(5 + 3.099) + 1 = 10 → [1, 10].
  EXPECT_DOUBLE_EQ(s.ci_low_ms, 1);
  EXPECT_DOUBLE_EQ(s.ci_high_ms, 10);
}

TEST(Statistics, OddCountMedianAndSingleSample) {
  const std::vector<double> odd{4, 1, 3};
  EXPECT_DOUBLE_EQ(summarize(odd).median_ms, 3);
  const std::vector<double> one{2.5};
  const Statistics s = summarize(one);
  EXPECT_DOUBLE_EQ(s.median_ms, 2.5);
  EXPECT_TRUE(std::isnan(s.std_ms));
  EXPECT_TRUE(std::isnan(s.ci_low_ms));
  EXPECT_TRUE(std::isinf(relative_ci_half_width(s)));
}

TEST(Statistics, EmptyIsAllNaN) {
  const Statistics s = summarize({});
  EXPECT_TRUE(std::isnan(s.median_ms));
  EXPECT_TRUE(std::isnan(s.mean_ms));
}

TEST(Statistics, ConfidenceIntervalOfTheMedianCoversAndNarrows) {
  // 100 samples 1..100: ranks floor(50 - 9.8) = 40 and ceil(50 + 9.8) + 1 = 61.
  std::vector<double> samples(100);
  for (int i = 0; i < 100; ++i) samples[static_cast<std::size_t>(i)] = i + 1;
  const Statistics s = summarize(samples);
  EXPECT_DOUBLE_EQ(s.ci_low_ms, 40);
  EXPECT_DOUBLE_EQ(s.ci_high_ms, 61);
  EXPECT_LE(s.ci_low_ms, s.median_ms);
  EXPECT_GE(s.ci_high_ms, s.median_ms);
  EXPECT_NEAR(relative_ci_half_width(s), 10.5 / 50.5, 1e-12);
}

TEST(Statistics, CoverageOfTheMedianIntervalIsAbout95Percent) {
  // Normal samples with true median 10: the interval should hold it ~95% of the time.
  std::mt19937_64 generator(7);
  std::normal_distribution<double> normal(10.0, 1.0);
  int covered = 0;
  const int trials = 2000;
  for (int trial = 0; trial < trials; ++trial) {
    std::vector<double> samples(101);
    for (auto& value : samples) value = normal(generator);
    const Statistics s = summarize(samples);
    covered += s.ci_low_ms <= 10.0 && 10.0 <= s.ci_high_ms;
  }
  const double coverage = static_cast<double>(covered) / trials;
  EXPECT_GT(coverage, 0.93);
  EXPECT_LT(coverage, 0.99);
}

}  // namespace
}  // namespace crossbench
