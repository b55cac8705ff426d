// engine.conv_statistics: how the search holds a statistics plan's sums (Σy, Σy² per channel, fp32) to
// the sums of its own output (fp64): statistics_agreement, the worst over the channels of the mean's
// difference in standard deviations and the variance's relative difference. Label `cpu`: host arithmetic.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engines/cudnn/tensor_compare.hpp"

namespace crossbench::cudnn {
namespace {

// Two channels over 1000 rows: means 5 and -2, variances 4 and 0.25 (E[y²] = var + mean²).
constexpr std::int64_t kRows = 1000;
std::vector<double> reference() {
  return {5.0 * kRows, -2.0 * kRows, (4.0 + 25.0) * kRows, (0.25 + 4.0) * kRows};
}
std::vector<float> as_plan(const std::vector<double>& sums) { return {sums.begin(), sums.end()}; }

TEST(StatisticsAgreement, SumsRoundedToFp32AgreeFarWithinTheBound) {
  const double off = statistics_agreement(as_plan(reference()), reference(), kRows);
  EXPECT_LT(off, 1e-6) << "one fp32 rounding of each sum";
  EXPECT_LT(off, kStatisticsAgreementBound);
}

TEST(StatisticsAgreement, AMeanOffByAHundredthOfASigmaIsTheDifference) {
  std::vector<double> plan = reference();
  plan[1] += 0.01 * 0.5 * kRows;                  // channel 1's mean, 0.01 of its standard deviation (0.5)
  plan[3] += (std::pow(-2.0 + 0.005, 2) - 4.0) * kRows;  // ... with its E[y²] moved alike: the variance unchanged
  EXPECT_NEAR(statistics_agreement(as_plan(plan), reference(), kRows), 0.01, 1e-4);
}

TEST(StatisticsAgreement, AVarianceOffByOnePercentIsTheDifference) {
  std::vector<double> plan = reference();
  plan[2] += 0.01 * 4.0 * kRows;  // channel 0's variance, 1% more
  EXPECT_NEAR(statistics_agreement(as_plan(plan), reference(), kRows), 0.01, 1e-5);
  EXPECT_GT(statistics_agreement(as_plan(plan), reference(), kRows), kStatisticsAgreementBound);
}

TEST(StatisticsAgreement, GarbageIsInfinitelyFarAndNothingToHoldToIsNaN) {
  std::vector<float> plan = as_plan(reference());
  plan[0] = std::numeric_limits<float>::quiet_NaN();  // a plan that did not write its sum
  EXPECT_TRUE(std::isinf(statistics_agreement(plan, reference(), kRows)));
  // A constant output (every variance 0): nothing to normalise by, so no verdict (not taken either).
  const std::vector<double> flat{3.0 * kRows, 3.0 * kRows, 9.0 * kRows, 9.0 * kRows};
  EXPECT_TRUE(std::isnan(statistics_agreement(as_plan(flat), flat, kRows)));
  // Sizes that do not match: no agreement.
  EXPECT_TRUE(std::isinf(statistics_agreement({1.0f}, reference(), kRows)));
  EXPECT_TRUE(std::isinf(statistics_agreement(as_plan(reference()), reference(), 0)));
}

}  // namespace
}  // namespace crossbench::cudnn
