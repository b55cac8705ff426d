// The telemetry sampler: NVML (core/nvml.hpp) on the rank's device around the timed steps.
#include "crossbench/telemetry.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "core/nvml.hpp"

namespace crossbench {

std::string nvml_version() {
  nvml::Library& n = nvml::library();
  if (!n.usable()) return "unavailable (" + n.why() + ")";
  char text[96] = {};
  if (n.driver_version != nullptr && n.driver_version(text, sizeof text) == 0) return std::string("driver ") + text;
  return "available";
}

Telemetry summarize_telemetry(const std::vector<TelemetrySample>& samples, double seconds,
                              std::optional<double> counter_energy_j, bool reasons_known) {
  Telemetry t;
  double sm = 0, memory = 0, power = 0;
  int sm_count = 0, memory_count = 0, power_count = 0;
  double hottest = NAN;
  bool throttled = false;
  for (const TelemetrySample& s : samples) {
    if (std::isfinite(s.sm_mhz)) sm += s.sm_mhz, ++sm_count;
    if (std::isfinite(s.memory_mhz)) memory += s.memory_mhz, ++memory_count;
    if (std::isfinite(s.power_w)) power += s.power_w, ++power_count;
    if (std::isfinite(s.temperature_c)) hottest = std::isfinite(hottest) ? std::max(hottest, s.temperature_c) : s.temperature_c;
    throttled = throttled || (s.reasons & kThrottleReasons) != 0;
  }
  if (sm_count > 0) t.mean_sm_clock_mhz = sm / sm_count;
  if (memory_count > 0) t.mean_memory_clock_mhz = memory / memory_count;
  if (power_count > 0) t.mean_power_w = power / power_count;
  if (counter_energy_j && seconds >= 1.0) t.energy_j = *counter_energy_j;
  else if (power_count > 0) t.energy_j = t.mean_power_w * seconds;  // see summarize_telemetry's comment
  t.max_temperature_c = hottest;
  t.throttled = reasons_known ? (throttled ? 1 : 0) : -1;
  t.samples = static_cast<int>(samples.size());
  return t;
}

TelemetrySampler::TelemetrySampler(const Device& device) {
  if (device.kind != DeviceKind::gpu) {
    why_ = "the device is a CPU";
    return;
  }
  const nvml::Library& n = nvml::library();
  if (!n.usable()) {
    why_ = n.why();
    return;
  }
  device_ = n.find_device(device.uuid, device.pci_bus_id);
  if (device_ == nullptr) why_ = "NVML does not know the device " + device.uuid + " (" + device.pci_bus_id + ")";
}

TelemetrySampler::~TelemetrySampler() { stop_thread(); }

void TelemetrySampler::stop_thread() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

TelemetrySample TelemetrySampler::sample() const {
  const nvml::Library& n = nvml::library();
  TelemetrySample s{NAN, NAN, NAN, NAN, 0};
  unsigned int value = 0;
  if (n.clock != nullptr && n.clock(device_, nvml::kClockSm, &value) == 0) s.sm_mhz = value;
  if (n.clock != nullptr && n.clock(device_, nvml::kClockMemory, &value) == 0) s.memory_mhz = value;
  if (n.power != nullptr && n.power(device_, &value) == 0) s.power_w = value / 1e3;
  if (n.temperature != nullptr && n.temperature(device_, nvml::kTemperatureGpu, &value) == 0) s.temperature_c = value;
  unsigned long long reasons = 0;
  if (n.reasons != nullptr && n.reasons(device_, &reasons) == 0) s.reasons = reasons;
  return s;
}

void TelemetrySampler::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    lock.unlock();
    const TelemetrySample s = sample();
    lock.lock();
    samples_.push_back(s);
    wake_.wait_for(lock, std::chrono::milliseconds(10), [this] { return stop_; });
  }
}

void TelemetrySampler::begin() {
  if (!available()) return;
  stop_thread();
  const nvml::Library& n = nvml::library();
  samples_.clear();
  stop_ = false;
  energy_ok_ = n.energy != nullptr && n.energy(device_, &energy_begin_mj_) == 0;
  begin_time_ = std::chrono::steady_clock::now();
  thread_ = std::thread([this] { run(); });
}

Telemetry TelemetrySampler::end() {
  if (!available() || !thread_.joinable()) return {};
  stop_thread();
  const nvml::Library& n = nvml::library();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin_time_).count();
  unsigned long long energy_end_mj = 0;
  std::optional<double> counter_energy_j;
  if (energy_ok_ && n.energy(device_, &energy_end_mj) == 0 && energy_end_mj > energy_begin_mj_)
    counter_energy_j = static_cast<double>(energy_end_mj - energy_begin_mj_) / 1e3;
  samples_.push_back(sample());  // at least one sample, however short the steps
  return summarize_telemetry(samples_, seconds, counter_energy_j, n.reasons != nullptr);
}

}  // namespace crossbench
