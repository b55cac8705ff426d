// GPU telemetry through NVML, loaded at run time (dlopen "libnvidia-ml.so.1";
// no NVML header or import library is needed to build). Over the timed steps
// of a cell: the energy counter at the start and the end, and a sampling
// thread (every 10 ms) for SM and memory clocks, power, temperature and
// throttle reasons. Without NVML (or without the device in it) every field
// stays NaN and the run goes on. The energy counter advances in coarse steps
// (on the H200 it stood still over 15 steps of 1.5 ms): over less than a
// second, or when it did not move, the energy is the mean sampled power times
// the elapsed time instead.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "crossbench/engine.hpp"

namespace crossbench::cudnn {

class TelemetrySampler {
 public:
  // The device is found by UUID ("GPU-…"), else by PCI bus id.
  TelemetrySampler(const std::string& uuid, const std::string& pci_bus_id);
  ~TelemetrySampler();
  TelemetrySampler(const TelemetrySampler&) = delete;
  TelemetrySampler& operator=(const TelemetrySampler&) = delete;

  bool available() const { return device_ != nullptr; }
  std::string why_unavailable() const { return why_; }
  void begin();
  Telemetry end();

 private:
  struct Sample {
    double sm_mhz, memory_mhz, power_w, temperature_c;
    unsigned long long reasons;
  };
  Sample sample() const;
  void run();

  void* device_ = nullptr;  // nvmlDevice_t
  std::string why_;
  unsigned long long energy_begin_mj_ = 0;
  std::chrono::steady_clock::time_point begin_time_;
  bool energy_ok_ = false;
  std::vector<Sample> samples_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

// "NVML 12.580.82" or why NVML is not available, for the cube's attributes.
std::string nvml_version();

}  // namespace crossbench::cudnn
