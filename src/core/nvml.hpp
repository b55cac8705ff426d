// NVML, loaded at run time (dlopen("libnvidia-ml.so.1"): nothing NVML is
// needed to build): the one process-wide binding of the entry points that the
// device description (core/cuda/nvml_description.cpp), the telemetry
// sampler and the GPU memory check after each cell (core/telemetry.cpp) call, declared with the types of nvml.h (a
// stable C ABI since NVML 4; the _v2 names since CUDA 5).
#pragma once

#include <string>

namespace crossbench::nvml {

using Return = int;                // nvmlReturn_t
using DeviceHandle = void*;        // nvmlDevice_t
using EnableState = int;           // nvmlEnableState_t: 0 disabled, 1 enabled
inline constexpr Return kSuccess = 0;                  // NVML_SUCCESS
inline constexpr int kClockSm = 1, kClockMemory = 2;   // nvmlClockType_t (graphics = 0)
inline constexpr int kTemperatureGpu = 0;              // nvmlTemperatureSensors_t

class Library {
 public:
  Library();
  ~Library();  // nvmlShutdown (NVML counts inits: other users keep theirs); the library stays loaded
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  [[nodiscard]] bool usable() const { return initialised_; }
  [[nodiscard]] const std::string& why() const { return why_; }  // why not usable
  // The device with this UUID, else this PCI bus id; nullptr when NVML knows neither.
  [[nodiscard]] DeviceHandle find_device(const std::string& uuid, const std::string& pci_bus_id) const;

  // Entry points; nullptr where the driver lacks one.
  Return (*by_uuid)(const char*, DeviceHandle*) = nullptr;
  Return (*by_pci)(const char*, DeviceHandle*) = nullptr;
  Return (*uuid)(DeviceHandle, char*, unsigned) = nullptr;
  Return (*enforced_power_limit)(DeviceHandle, unsigned*) = nullptr;  // [mW]
  Return (*driver_version)(char*, unsigned) = nullptr;
  Return (*applications_clock)(DeviceHandle, int, unsigned*) = nullptr;  // [MHz]
  Return (*auto_boost)(DeviceHandle, EnableState*, EnableState*) = nullptr;
  Return (*persistence)(DeviceHandle, EnableState*) = nullptr;
  Return (*ecc_mode)(DeviceHandle, EnableState*, EnableState*) = nullptr;
  Return (*clock)(DeviceHandle, int, unsigned*) = nullptr;  // [MHz]
  Return (*power)(DeviceHandle, unsigned*) = nullptr;       // [mW]
  Return (*temperature)(DeviceHandle, int, unsigned*) = nullptr;  // [°C]
  Return (*reasons)(DeviceHandle, unsigned long long*) = nullptr;  // clock event (throttle) reasons
  Return (*energy)(DeviceHandle, unsigned long long*) = nullptr;   // [mJ] since the driver loaded
  // nvmlDeviceGetComputeRunningProcesses_v3/_v2 (nvmlProcessInfo_t), or the v1 form
  // (nvmlProcessInfo_v1_t: pid, bytes) when processes_v1 is set.
  Return (*processes)(DeviceHandle, unsigned*, void*) = nullptr;
  bool processes_v1 = false;
  Return (*memory_info)(DeviceHandle, void*) = nullptr;  // nvmlDeviceGetMemoryInfo: total, free, used [bytes]

 private:
  template <typename F>
  void bind(F& function, const char* name);
  void* library_ = nullptr;
  Return (*init_)() = nullptr;
  Return (*shutdown_)() = nullptr;
  bool initialised_ = false;
  std::string why_;
};

// The process's NVML: loaded and initialised on first use, shut down at exit.
[[nodiscard]] Library& library();

}  // namespace crossbench::nvml
