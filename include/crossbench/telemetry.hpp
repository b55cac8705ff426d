// GPU telemetry over a cell's timed steps, for every engine (DESIGN.md
// "Measurement"): the Runner starts a TelemetrySampler on the rank's device
// right before the first timed step and stops it after the last one, whether
// the steps run in this process (native engines) or in a framework worker
// bound to the same GPU.
//
// NVML is loaded at run time (dlopen "libnvidia-ml.so.1"; no NVML header or
// import library is needed to build, so this compiles and links everywhere).
// Over the timed steps: the energy counter at the start and the end, and a
// sampling thread (every 10 ms) for SM and memory clocks, power, temperature
// and throttle reasons. Without NVML (or without the device in it) every
// field stays NaN and the run goes on.
#pragma once

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "crossbench/device.hpp"
#include "crossbench/measure.hpp"

namespace crossbench {

// One reading of the device's sensors; NaN where a sensor could not be read.
struct TelemetrySample {
  double sm_mhz, memory_mhz, power_w, temperature_c;  // [MHz], [MHz], [W], [°C]
  unsigned long long reasons;                         // NVML clocks-event (throttle) reason bits
};

// NVML's throttle reasons that mean the device slowed itself down: software
// power cap, hardware slowdown, software/hardware thermal, power brake.
inline constexpr unsigned long long kThrottleReasons = 0x4ULL | 0x8ULL | 0x20ULL | 0x40ULL | 0x80ULL;

// The Telemetry of a span of `seconds` [s] from its samples. `counter_energy_j`
// is the energy counter's difference [J] when it moved over at least a second;
// otherwise (the counter advances in coarse steps: on the H200 it stood still
// over 15 steps of 1.5 ms) the energy is the mean sampled power times the
// span. `reasons_known`: whether throttle reasons could be read at all.
Telemetry summarize_telemetry(const std::vector<TelemetrySample>& samples, double seconds,
                              std::optional<double> counter_energy_j, bool reasons_known);

class TelemetrySampler {
 public:
  // The device is found by UUID ("GPU-…"), else by PCI bus id. A CPU device
  // (or a GPU NVML does not know) gives an unavailable sampler.
  // interval: between two clock/power/temperature samples during the timed steps
  // (measure.telemetry_interval_ms); zero: one sample as they begin and one as they
  // end, and no sampling thread beside the steps.
  explicit TelemetrySampler(const Device& device, std::chrono::milliseconds interval = std::chrono::milliseconds(10));
  ~TelemetrySampler();
  TelemetrySampler(const TelemetrySampler&) = delete;
  TelemetrySampler& operator=(const TelemetrySampler&) = delete;

  bool available() const { return device_ != nullptr; }
  std::string why_unavailable() const { return why_; }
  void begin();     // right before the first timed step
  Telemetry end();  // after the last timed step has finished; all NaN when unavailable

 private:
  TelemetrySample sample() const;
  void run();
  void stop_thread();

  void* device_ = nullptr;  // nvmlDevice_t
  std::string why_;
  unsigned long long energy_begin_mj_ = 0;  // [mJ]
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point begin_time_;
  bool energy_ok_ = false;
  bool begun_ = false;  // begin() ran on an available sampler and end() has not
  std::vector<TelemetrySample> samples_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

// Nothing outlives its cell, GPU memory included (DESIGN.md "Measurement"):
// after every cell of every engine the rank's GPU memory in use is back
// within kGpuMemoryMarginBytes of its level before the cell, or the cell
// fails with that reason. The margin [bytes] holds what a process keeps for
// its life by design and grows lazily: kernels loaded on first use (CUDA's
// lazy module loading, cuDNN's runtime-compiled fusions), library handles'
// workspaces. A leaked activation of one seed2017 cell is larger.
inline constexpr double kGpuMemoryMarginBytes = 256.0 * 1024 * 1024;

// The GPU memory in use on `device` [bytes] and what was measured: this
// process's (NVML per-process used memory; 0 without a context), or, in a
// nested PID namespace, where NVML's pids are the host's, the whole device's
// (then a worker kept across cells counts too). NaN for a CPU or without NVML.
struct GpuMemoryReading {
  double bytes = NAN;
  std::string source;
  bool per_process = false;  // NVML listed this process: `bytes` is its own
  bool any_listed = false;   // NVML listed any process on the device
  bool device_wide = false;  // the device's whole used memory (in a PID namespace)
};
GpuMemoryReading gpu_memory_in_use(const Device& device);

// Empty when `after_bytes` is within `margin_bytes` of `before_bytes` (or
// either is unknown); else the reason a cell fails, with both levels in MiB.
std::string gpu_memory_leak(double before_bytes, double after_bytes, double margin_bytes);

// Reads the level when built (before a cell); leak_after() reads it again,
// for up to `settle` while it is above the margin (the driver frees an
// ended worker's memory shortly after its exit), and says what leaked. A
// cell that made the process's first CUDA context is not held to the level
// before it (the context is the process's, for its life; the next cell is).
class GpuMemoryWatch {
 public:
  explicit GpuMemoryWatch(const Device& device);
  std::string leak_after(std::chrono::milliseconds settle = std::chrono::seconds(5)) const;

 private:
  Device device_;
  GpuMemoryReading before_;
};

// "driver 580.82" or why NVML is not available, for the cube's attributes.
std::string nvml_version();

}  // namespace crossbench
