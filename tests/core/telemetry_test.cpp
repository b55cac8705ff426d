// The Runner's telemetry (src/core/telemetry.cpp): the summary of sensor
// samples, and the sampler on this machine's device. The NVML part skips,
// with the reason, where there is no NVML or no GPU.
#include "crossbench/telemetry.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "crossbench/device.hpp"

namespace crossbench {
namespace {

TEST(SummarizeTelemetry, MeansHottestAndThrottleFromTheSamples) {
  const std::vector<TelemetrySample> samples{{1980, 2619, 600, 55, 0}, {1800, 2619, 700, 61, 0x4}, {NAN, 2619, NAN, NAN, 0}};
  const Telemetry t = summarize_telemetry(samples, 2.0, 1234.5, true);
  EXPECT_DOUBLE_EQ(t.mean_sm_clock_mhz, (1980.0 + 1800.0) / 2);  // NaN readings are skipped, not zeros
  EXPECT_DOUBLE_EQ(t.min_sm_clock_mhz, 1800.0);  // the lowest reading: a dip the mean would hide
  EXPECT_DOUBLE_EQ(t.mean_memory_clock_mhz, 2619.0);
  EXPECT_DOUBLE_EQ(t.mean_power_w, 650.0);
  EXPECT_DOUBLE_EQ(t.max_temperature_c, 61.0);
  EXPECT_EQ(t.throttled, 1);  // 0x4: software power cap
  EXPECT_EQ(t.samples, 3);
  EXPECT_DOUBLE_EQ(t.energy_j, 1234.5);  // the counter, over at least a second
}

TEST(SummarizeTelemetry, ShortSpansTakePowerTimesTime) {
  // Under a second the energy counter is too coarse: mean power x span.
  const std::vector<TelemetrySample> samples{{1980, 2619, 500, 50, 0}, {1980, 2619, 700, 50, 0x1}};
  const Telemetry t = summarize_telemetry(samples, 0.25, 99.0, true);
  EXPECT_DOUBLE_EQ(t.energy_j, 600.0 * 0.25);
  EXPECT_EQ(t.throttled, 0);  // 0x1 (GPU idle) is not a slowdown
  const Telemetry no_counter = summarize_telemetry(samples, 3.0, std::nullopt, true);
  EXPECT_DOUBLE_EQ(no_counter.energy_j, 600.0 * 3.0);
}

TEST(SummarizeTelemetry, NothingReadableStaysUnknown) {
  const Telemetry t = summarize_telemetry({{NAN, NAN, NAN, NAN, 0}}, 5.0, std::nullopt, false);
  EXPECT_TRUE(std::isnan(t.mean_sm_clock_mhz));
  EXPECT_TRUE(std::isnan(t.min_sm_clock_mhz));
  EXPECT_TRUE(std::isnan(t.energy_j));
  EXPECT_TRUE(std::isnan(t.max_temperature_c));
  EXPECT_EQ(t.throttled, -1);
}

TEST(TelemetrySampler, ACpuDeviceHasNoSamplerAndAllUnknown) {
  TelemetrySampler sampler(probe_cpu(1, ""));
  EXPECT_FALSE(sampler.available());
  EXPECT_EQ(sampler.why_unavailable(), "the device is a CPU");
  sampler.begin();
  const Telemetry t = sampler.end();
  EXPECT_TRUE(std::isnan(t.energy_j));
  EXPECT_TRUE(std::isnan(t.mean_sm_clock_mhz));
  EXPECT_EQ(t.throttled, -1);
  EXPECT_EQ(t.samples, 0);
}

TEST(TelemetrySampler, SamplesTheRanksGpuThroughNvml) {
  if (visible_gpu_count() == 0) GTEST_SKIP() << "no GPU visible to this process";
  const Device gpu = probe_gpu(0, "");
  TelemetrySampler sampler(gpu);
  if (!sampler.available()) GTEST_SKIP() << "NVML unavailable: " << sampler.why_unavailable();
  sampler.begin();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const Telemetry t = sampler.end();
  EXPECT_GE(t.samples, 2);
  EXPECT_GT(t.mean_sm_clock_mhz, 0);
  EXPECT_GT(t.energy_j, 0);
  EXPECT_NE(t.throttled, -1);
}

TEST(TelemetrySampler, AZeroIntervalSamplesTheEndsOnlyWithNoThreadBetween) {
  if (visible_gpu_count() == 0) GTEST_SKIP() << "no GPU visible to this process";
  const Device gpu = probe_gpu(0, "");
  TelemetrySampler sampler(gpu, std::chrono::milliseconds(0));  // measure.telemetry_interval_ms = 0
  if (!sampler.available()) GTEST_SKIP() << "NVML unavailable: " << sampler.why_unavailable();
  sampler.begin();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // 10 samples at the default interval
  const Telemetry t = sampler.end();
  EXPECT_EQ(t.samples, 2);
  EXPECT_GT(t.mean_sm_clock_mhz, 0);
  EXPECT_GT(t.energy_j, 0);
  EXPECT_TRUE(std::isnan(sampler.end().energy_j));  // ended: a second end() measures nothing
}

TEST(TelemetrySampler, AGpuNvmlDoesNotKnowIsUnavailableWithTheReason) {
  Device unknown;
  unknown.kind = DeviceKind::gpu;
  unknown.uuid = "GPU-00000000-0000-0000-0000-000000000000";
  unknown.pci_bus_id = "00000000:FF:1F.7";
  TelemetrySampler sampler(unknown);
  EXPECT_FALSE(sampler.available());
  // Either NVML is missing (this machine) or it does not know that device.
  EXPECT_FALSE(sampler.why_unavailable().empty());
  EXPECT_TRUE(std::isnan(sampler.end().energy_j));
  EXPECT_NE(nvml_version(), "");
}

TEST(GpuMemoryLeak, WithinTheMarginIsNoLeak) {
  const double mib = 1024.0 * 1024.0;
  EXPECT_EQ(gpu_memory_leak(1000 * mib, 1000 * mib, kGpuMemoryMarginBytes), "");
  EXPECT_EQ(gpu_memory_leak(1000 * mib, 1000 * mib + kGpuMemoryMarginBytes, kGpuMemoryMarginBytes), "");
  EXPECT_EQ(gpu_memory_leak(1000 * mib, 10 * mib, kGpuMemoryMarginBytes), "");  // less after: given back
}

TEST(GpuMemoryLeak, AboveTheMarginNamesBothLevelsAndTheMargin) {
  const double mib = 1024.0 * 1024.0;
  const std::string leak = gpu_memory_leak(1000 * mib, 1300 * mib, 256 * mib);
  EXPECT_NE(leak.find("GPU memory not given back"), std::string::npos) << leak;
  EXPECT_NE(leak.find("1300 MiB in use after the cell, 1000 MiB before"), std::string::npos) << leak;
  EXPECT_NE(leak.find("300 MiB more; the margin is 256 MiB"), std::string::npos) << leak;
}

TEST(GpuMemoryLeak, UnknownLevelsAreNotHeldToAnything) {
  EXPECT_EQ(gpu_memory_leak(NAN, 1e12, kGpuMemoryMarginBytes), "");
  EXPECT_EQ(gpu_memory_leak(0, NAN, kGpuMemoryMarginBytes), "");
}

TEST(GpuMemoryWatch, ACpuHasNothingToLeak) {
  Device cpu;
  cpu.kind = DeviceKind::cpu;
  EXPECT_TRUE(std::isnan(gpu_memory_in_use(cpu).bytes));
  EXPECT_EQ(GpuMemoryWatch(cpu).leak_after(std::chrono::milliseconds(0)), "");
}

TEST(GpuMemoryWatch, TheRanksGpuIsReadWithinTheMarginOfItself) {
  if (visible_gpu_count() == 0) GTEST_SKIP() << "no GPU visible to this process";
  const Device gpu = probe_gpu(0, "");
  const GpuMemoryReading reading = gpu_memory_in_use(gpu);
  if (!std::isfinite(reading.bytes)) GTEST_SKIP() << "NVML unavailable";
  // Probing need not make a context (CUDA's lazy loading): a process NVML does
  // not list holds nothing, and reads 0 (seen on the H200, 2026-12-02).
  EXPECT_GE(reading.bytes, 0) << reading.source;
  EXPECT_EQ(GpuMemoryWatch(gpu).leak_after(std::chrono::milliseconds(0)), "");
}

}  // namespace
}  // namespace crossbench
