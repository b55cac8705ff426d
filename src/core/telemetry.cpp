// The telemetry sampler: NVML (core/nvml.hpp) on the rank's device around the timed steps.
#include "crossbench/telemetry.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <thread>

#include "core/nvml.hpp"

namespace crossbench {
namespace {

// nvml.h's nvmlProcessInfo_t (v2/v3) and nvmlProcessInfo_v1_t.
struct NvmlProcess {
  unsigned int pid;
  unsigned long long used_bytes;
  unsigned int gpu_instance, compute_instance;
};
struct NvmlProcessV1 {
  unsigned int pid;
  unsigned long long used_bytes;
};
constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;
constexpr nvml::Return kNvmlInsufficientSize = 7;

nvml::DeviceHandle device_handle(const Device& device) {
  const nvml::Library& n = nvml::library();
  if (!n.usable() || device.kind != DeviceKind::gpu) return nullptr;
  return n.find_device(device.uuid, device.pci_bus_id);
}

// NVML's per-process used memory of `pid` on `handle` [bytes]: nullopt when
// NVML does not list the process (no context there, or a PID namespace that
// NVML's host pids do not match), NaN when it lists it without a number.
std::optional<double> process_memory(nvml::DeviceHandle handle, unsigned int pid, bool& listed_any) {
  const nvml::Library& n = nvml::library();
  if (n.processes == nullptr) return std::nullopt;
  for (unsigned int capacity = 64; capacity <= 65536; capacity *= 4) {
    unsigned int count = capacity;
    std::vector<NvmlProcess> infos(n.processes_v1 ? 0 : capacity);
    std::vector<NvmlProcessV1> infos_v1(n.processes_v1 ? capacity : 0);
    const nvml::Return status = n.processes(handle, &count, n.processes_v1 ? static_cast<void*>(infos_v1.data())
                                                                           : static_cast<void*>(infos.data()));
    if (status == kNvmlInsufficientSize) continue;
    if (status != 0) return std::nullopt;
    listed_any = count > 0;
    for (unsigned int i = 0; i < count; ++i) {
      const unsigned int listed_pid = n.processes_v1 ? infos_v1[i].pid : infos[i].pid;
      const unsigned long long used = n.processes_v1 ? infos_v1[i].used_bytes : infos[i].used_bytes;
      if (listed_pid == pid) return used == kNvmlValueNotAvailable ? NAN : static_cast<double>(used);
    }
    return std::nullopt;
  }
  return std::nullopt;
}

std::string mib_text(double bytes) {
  char text[48];
  std::snprintf(text, sizeof text, "%.0f MiB", bytes / (1024.0 * 1024.0));
  return text;
}

}  // namespace

// Whether this process runs in a nested PID namespace (a container): NVML
// then reports the host's pids, which match none of ours ("NSpid:" in
// /proc/self/status lists one pid per namespace level).
bool in_nested_pid_namespace() {
  FILE* status = std::fopen("/proc/self/status", "re");
  if (status == nullptr) return false;
  char line[256];
  bool nested = false;
  while (std::fgets(line, sizeof line, status) != nullptr) {
    if (std::strncmp(line, "NSpid:", 6) != 0) continue;
    int fields = 0;
    for (char* word = std::strtok(line + 6, " \t\n"); word != nullptr; word = std::strtok(nullptr, " \t\n")) ++fields;
    nested = fields > 1;
    break;
  }
  std::fclose(status);
  return nested;
}

GpuMemoryReading gpu_memory_in_use(const Device& device) {
  GpuMemoryReading reading;
  const nvml::DeviceHandle handle = device_handle(device);
  if (handle == nullptr) return reading;
  bool listed_any = false;
  const auto mine = process_memory(handle, static_cast<unsigned int>(::getpid()), listed_any);
  reading.any_listed = listed_any;
  if (!in_nested_pid_namespace()) {
    // This process's own memory; a live worker's is its own (worker_per_cell =
    // false keeps its pools on purpose) and a per-cell worker has ended.
    reading.per_process = mine.has_value();
    reading.bytes = mine ? *mine : 0.0;  // not listed: no context, nothing held
    reading.source = "this process (NVML per-process)";
    return reading;
  }
  // NVML's pids are the host's: the device's whole used memory stands for
  // this process (one rank per GPU, as binding makes it).
  struct {
    unsigned long long total, free, used;
  } memory{};
  if (nvml::library().memory_info != nullptr && nvml::library().memory_info(handle, &memory) == 0) {
    reading.bytes = static_cast<double>(memory.used);
    reading.source = "the whole device (a PID namespace hides this process from NVML)";
    reading.device_wide = true;
  }
  return reading;
}

std::string gpu_memory_leak(double before_bytes, double after_bytes, double margin_bytes) {
  if (!std::isfinite(before_bytes) || !std::isfinite(after_bytes)) return {};  // NVML cannot say: nothing to hold it to
  if (after_bytes <= before_bytes + margin_bytes) return {};
  return "GPU memory not given back: " + mib_text(after_bytes) + " in use after the cell, " + mib_text(before_bytes) +
         " before it (" + mib_text(after_bytes - before_bytes) + " more; the margin is " + mib_text(margin_bytes) + ")";
}

GpuMemoryWatch::GpuMemoryWatch(const Device& device) : device_(device), before_(gpu_memory_in_use(device)) {}

std::string GpuMemoryWatch::leak_after(std::chrono::milliseconds settle) const {
  if (!std::isfinite(before_.bytes)) return {};
  // The driver frees an ended process's memory, and a stream's deferred frees,
  // a little after the fact: a leak is a level still above the margin after `settle`.
  const auto deadline = std::chrono::steady_clock::now() + settle;
  while (true) {
    const GpuMemoryReading after = gpu_memory_in_use(device_);
    // The cell made this process's first context (listed now, not before; or,
    // seen device-wide, the first process on the device): the context is the
    // process's for its life, and the next cell is held to the level with it.
    if (after.device_wide != before_.device_wide) return {};  // not the same measure
    if (!after.device_wide && !before_.per_process && after.per_process) return {};
    if (after.device_wide && !before_.any_listed && after.any_listed) return {};
    std::string leak = gpu_memory_leak(before_.bytes, after.bytes, kGpuMemoryMarginBytes);
    if (leak.empty()) return {};
    if (std::chrono::steady_clock::now() >= deadline) return leak + "; measured for " + after.source;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

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
    if (std::isfinite(s.sm_mhz)) {
      sm += s.sm_mhz, ++sm_count;
      if (!(s.sm_mhz >= t.min_sm_clock_mhz)) t.min_sm_clock_mhz = s.sm_mhz;  // NaN until the first
    }
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

TelemetrySampler::TelemetrySampler(const Device& device, std::chrono::milliseconds interval) : interval_(interval) {
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
    wake_.wait_for(lock, interval_, [this] { return stop_; });
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
  begun_ = true;
  if (interval_.count() > 0) {
    thread_ = std::thread([this] { run(); });
  } else {
    samples_.push_back(sample());  // the steps' start; end() adds their end
  }
}

Telemetry TelemetrySampler::end() {
  if (!available() || !begun_) return {};
  begun_ = false;
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
