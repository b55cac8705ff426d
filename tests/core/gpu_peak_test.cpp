// The planner's fp32 peak of a GPU from its SMs, clock and generation, against the vendors'
// data sheets (the same figures as analysis/crossbench_analysis/peaks.csv): every generation
// the CUDA 11.8, 12 and 13 builds serve, Kepler to Blackwell.
#include <gtest/gtest.h>

#include <string>

#include "crossbench/device.hpp"

namespace crossbench {
namespace {

struct DataSheet {
  std::string model;
  int major, minor, sms;
  double boost_mhz;       // the clock cudaDevAttrClockRate reports [MHz]
  double fp32_tflops;     // data sheet [TFLOP/s]
};

TEST(GpuPeak, MatchesTheDataSheets) {
  const DataSheet sheets[] = {
      {"Tesla K40 (875 MHz boost)", 3, 5, 15, 875, 5.04},
      {"GeForce GTX TITAN X", 5, 2, 24, 1075, 6.6},
      {"GeForce GTX 1080", 6, 1, 20, 1733, 8.87},
      {"TITAN X (Pascal)", 6, 1, 28, 1531, 10.97},
      {"Tesla P100 SXM2", 6, 0, 56, 1480, 10.6},
      {"Tesla V100 SXM2", 7, 0, 80, 1530, 15.7},
      {"Tesla T4", 7, 5, 40, 1590, 8.1},
      {"A100 SXM4", 8, 0, 108, 1410, 19.5},
      {"L40S", 8, 9, 142, 2520, 91.6},
      {"H100 SXM5", 9, 0, 132, 1980, 67.0},
  };
  for (const DataSheet& s : sheets)
    EXPECT_NEAR(gpu_peak_fp32_tflops(s.major, s.minor, s.sms, s.boost_mhz), s.fp32_tflops, 0.01 * s.fp32_tflops)
        << s.model;
}

TEST(GpuPeak, LanesPerGeneration) {
  EXPECT_EQ(gpu_fp32_lanes_per_sm(3, 7), 192);   // K80
  EXPECT_EQ(gpu_fp32_lanes_per_sm(5, 0), 128);   // Maxwell
  EXPECT_EQ(gpu_fp32_lanes_per_sm(7, 2), 64);    // Xavier
  EXPECT_EQ(gpu_fp32_lanes_per_sm(8, 6), 128);   // GA10x
  EXPECT_EQ(gpu_fp32_lanes_per_sm(10, 0), 128);  // B200
  EXPECT_EQ(gpu_fp32_lanes_per_sm(12, 0), 128);  // RTX 50
}

}  // namespace
}  // namespace crossbench
