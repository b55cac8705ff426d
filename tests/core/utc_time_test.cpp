// The one time stamp (src/core/utc_time.hpp): written by utc_now(), read back
// as a cell's wall time by the plan's calibration.
#include "core/utc_time.hpp"

#include <cmath>
#include <regex>

#include <gtest/gtest.h>

namespace crossbench {
namespace {

TEST(UtcNow, IsIso8601WithMillisecondsInUtc) {
  EXPECT_TRUE(std::regex_match(utc_now(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)"))) << utc_now();
}

TEST(UtcSecondsBetween, ReadsWhatUtcNowWrites) {
  EXPECT_DOUBLE_EQ(utc_seconds_between("2026-12-02T14:45:42.254Z", "2026-12-02T14:46:43.004Z"), 60.75);
  // Across a day, a month and a year, and a fraction of other lengths (or none).
  EXPECT_NEAR(utc_seconds_between("2026-12-31T23:59:59.5Z", "2027-01-01T00:00:00.25Z"), 0.75, 1e-9);
  EXPECT_DOUBLE_EQ(utc_seconds_between("2026-02-28T00:00:00Z", "2026-03-01T00:00:00Z"), 86400.0);
  const std::string now = utc_now();
  EXPECT_DOUBLE_EQ(utc_seconds_between(now, now), 0.0);
}

TEST(UtcSecondsBetween, IsNotANumberForAnythingElse) {
  for (const char* bad : {"", "2026-12-02 14:45:42.254Z", "2026-12-02T14:45:42.254", "2026-12-02T14:45:42.254+01:00",
                          "2026-13-02T14:45:42Z", "2026-12-02T25:45:42Z", "yesterday", "2026-12-02T14:45:42.25xZ"})
    EXPECT_TRUE(std::isnan(utc_seconds_between(bad, "2026-12-02T14:45:42.254Z"))) << bad;
  EXPECT_TRUE(std::isnan(utc_seconds_between("2026-12-02T14:45:42.254Z", "")));
}

}  // namespace
}  // namespace crossbench
