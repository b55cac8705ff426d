// NVML through dlopen: the few entry points we use, declared here with the
// types of nvml.h (stable C ABI since NVML 4; the _v2 names since CUDA 5).
#include "engines/cudnn/telemetry.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace crossbench::cudnn {
namespace {

using nvmlReturn_t = int;  // NVML_SUCCESS = 0
using nvmlDevice_t = void*;
constexpr int kNvmlClockSm = 1, kNvmlClockMemory = 2;  // nvmlClockType_t
constexpr int kNvmlTemperatureGpu = 0;                 // nvmlTemperatureSensors_t
// nvmlClocksEventReasons: the ones that mean the device slowed itself down
// (software power cap, hardware slowdown, software/hardware thermal, power brake).
constexpr unsigned long long kThrottleReasons = 0x4ULL | 0x8ULL | 0x20ULL | 0x40ULL | 0x80ULL;

struct Nvml {
  void* library = nullptr;
  bool initialised = false;
  std::string why;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*by_uuid)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*by_pci)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned int*) = nullptr;  // [mW]
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned int*) = nullptr;
  nvmlReturn_t (*reasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long*) = nullptr;  // [mJ] since driver load
  nvmlReturn_t (*driver_version)(char*, unsigned int) = nullptr;

  template <typename F>
  void bind(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(library, name));
  }

  Nvml() {
    library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      why = "libnvidia-ml.so.1 not found";
      return;
    }
    bind(init, "nvmlInit_v2");
    bind(shutdown, "nvmlShutdown");
    bind(by_uuid, "nvmlDeviceGetHandleByUUID");
    bind(by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    bind(clock, "nvmlDeviceGetClockInfo");
    bind(power, "nvmlDeviceGetPowerUsage");
    bind(temperature, "nvmlDeviceGetTemperature");
    bind(reasons, "nvmlDeviceGetCurrentClocksEventReasons");
    if (reasons == nullptr) bind(reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
    bind(energy, "nvmlDeviceGetTotalEnergyConsumption");
    bind(driver_version, "nvmlSystemGetDriverVersion");
    if (init == nullptr || init() != 0) {
      why = "nvmlInit_v2 failed";
      return;
    }
    initialised = true;
  }
  ~Nvml() {
    if (initialised && shutdown != nullptr) shutdown();
    // The library stays loaded: other threads may be past their last call.
  }
};

Nvml& nvml() {
  static Nvml instance;
  return instance;
}

}  // namespace

std::string nvml_version() {
  Nvml& n = nvml();
  if (!n.initialised) return "unavailable (" + n.why + ")";
  char text[96] = {};
  if (n.driver_version != nullptr && n.driver_version(text, sizeof text) == 0) return std::string("driver ") + text;
  return "available";
}

TelemetrySampler::TelemetrySampler(const std::string& uuid, const std::string& pci_bus_id) {
  Nvml& n = nvml();
  if (!n.initialised) {
    why_ = n.why;
    return;
  }
  nvmlDevice_t device = nullptr;
  if (n.by_uuid != nullptr && !uuid.empty() && n.by_uuid(uuid.c_str(), &device) == 0) device_ = device;
  else if (n.by_pci != nullptr && !pci_bus_id.empty() && n.by_pci(pci_bus_id.c_str(), &device) == 0) device_ = device;
  else why_ = "NVML does not know the device " + uuid + " (" + pci_bus_id + ")";
}

TelemetrySampler::~TelemetrySampler() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
}

TelemetrySampler::Sample TelemetrySampler::sample() const {
  Nvml& n = nvml();
  Sample s{NAN, NAN, NAN, NAN, 0};
  unsigned int value = 0;
  if (n.clock != nullptr && n.clock(device_, kNvmlClockSm, &value) == 0) s.sm_mhz = value;
  if (n.clock != nullptr && n.clock(device_, kNvmlClockMemory, &value) == 0) s.memory_mhz = value;
  if (n.power != nullptr && n.power(device_, &value) == 0) s.power_w = value / 1e3;
  if (n.temperature != nullptr && n.temperature(device_, kNvmlTemperatureGpu, &value) == 0) s.temperature_c = value;
  unsigned long long reasons = 0;
  if (n.reasons != nullptr && n.reasons(device_, &reasons) == 0) s.reasons = reasons;
  return s;
}

void TelemetrySampler::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    lock.unlock();
    const Sample s = sample();
    lock.lock();
    samples_.push_back(s);
    wake_.wait_for(lock, std::chrono::milliseconds(10), [this] { return stop_; });
  }
}

void TelemetrySampler::begin() {
  if (!available()) return;
  if (thread_.joinable()) (void)end();
  Nvml& n = nvml();
  samples_.clear();
  stop_ = false;
  energy_ok_ = n.energy != nullptr && n.energy(device_, &energy_begin_mj_) == 0;
  begin_time_ = std::chrono::steady_clock::now();
  thread_ = std::thread([this] { run(); });
}

Telemetry TelemetrySampler::end() {
  Telemetry t;
  if (!available() || !thread_.joinable()) return t;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  Nvml& n = nvml();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin_time_).count();
  unsigned long long energy_end_mj = 0;
  if (energy_ok_ && n.energy(device_, &energy_end_mj) == 0 && energy_end_mj > energy_begin_mj_ && seconds >= 1.0)
    t.energy_j = static_cast<double>(energy_end_mj - energy_begin_mj_) / 1e3;
  samples_.push_back(sample());  // at least one sample, however short the steps
  double sm = 0, memory = 0, power = 0;
  int sm_count = 0, memory_count = 0, power_count = 0;
  double hottest = NAN;
  bool throttled = false;
  for (const Sample& s : samples_) {
    if (std::isfinite(s.sm_mhz)) sm += s.sm_mhz, ++sm_count;
    if (std::isfinite(s.memory_mhz)) memory += s.memory_mhz, ++memory_count;
    if (std::isfinite(s.power_w)) power += s.power_w, ++power_count;
    if (std::isfinite(s.temperature_c)) hottest = std::isfinite(hottest) ? std::max(hottest, s.temperature_c) : s.temperature_c;
    throttled = throttled || (s.reasons & kThrottleReasons) != 0;
  }
  if (sm_count > 0) t.mean_sm_clock_mhz = sm / sm_count;
  if (memory_count > 0) t.mean_memory_clock_mhz = memory / memory_count;
  if (power_count > 0) t.mean_power_w = power / power_count;
  if (std::isnan(t.energy_j) && power_count > 0) t.energy_j = t.mean_power_w * seconds;  // see telemetry.hpp
  t.max_temperature_c = hottest;
  t.throttled = n.reasons != nullptr ? (throttled ? 1 : 0) : -1;
  t.samples = static_cast<int>(samples_.size());
  return t;
}

}  // namespace crossbench::cudnn
