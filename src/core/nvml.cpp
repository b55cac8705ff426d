#include "core/nvml.hpp"

#include <dlfcn.h>

namespace crossbench::nvml {

template <typename F>
void Library::bind(F& function, const char* name) {
  function = reinterpret_cast<F>(dlsym(library_, name));
}

Library::Library() : library_(dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) {
  if (library_ == nullptr) {
    why_ = "libnvidia-ml.so.1 not found";
    return;
  }
  bind(init_, "nvmlInit_v2");
  bind(shutdown_, "nvmlShutdown");
  bind(by_uuid, "nvmlDeviceGetHandleByUUID");
  bind(by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
  bind(uuid, "nvmlDeviceGetUUID");
  bind(enforced_power_limit, "nvmlDeviceGetEnforcedPowerLimit");
  bind(driver_version, "nvmlSystemGetDriverVersion");
  bind(applications_clock, "nvmlDeviceGetApplicationsClock");
  bind(auto_boost, "nvmlDeviceGetAutoBoostedClocksEnabled");
  bind(persistence, "nvmlDeviceGetPersistenceMode");
  bind(ecc_mode, "nvmlDeviceGetEccMode");
  bind(clock, "nvmlDeviceGetClockInfo");
  bind(power, "nvmlDeviceGetPowerUsage");
  bind(temperature, "nvmlDeviceGetTemperature");
  bind(reasons, "nvmlDeviceGetCurrentClocksEventReasons");
  if (reasons == nullptr) bind(reasons, "nvmlDeviceGetCurrentClocksThrottleReasons");
  bind(energy, "nvmlDeviceGetTotalEnergyConsumption");
  bind(processes, "nvmlDeviceGetComputeRunningProcesses_v3");
  if (processes == nullptr) bind(processes, "nvmlDeviceGetComputeRunningProcesses_v2");
  if (processes == nullptr) {
    bind(processes, "nvmlDeviceGetComputeRunningProcesses");
    processes_v1 = processes != nullptr;
  }
  bind(memory_info, "nvmlDeviceGetMemoryInfo");
  if (init_ == nullptr || init_() != kSuccess) {
    why_ = "nvmlInit_v2 failed";
    return;
  }
  initialised_ = true;
}

Library::~Library() {
  if (initialised_ && shutdown_ != nullptr) shutdown_();
  // The library stays loaded: other threads may be past their last call.
}

DeviceHandle Library::find_device(const std::string& uuid_text, const std::string& pci_bus_id) const {
  DeviceHandle handle = nullptr;
  if (by_uuid != nullptr && !uuid_text.empty() && by_uuid(uuid_text.c_str(), &handle) == kSuccess) return handle;
  if (by_pci != nullptr && !pci_bus_id.empty() && by_pci(pci_bus_id.c_str(), &handle) == kSuccess) return handle;
  return nullptr;
}

Library& library() {
  static Library instance;
  return instance;
}

}  // namespace crossbench::nvml
