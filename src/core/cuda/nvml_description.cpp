#include "core/cuda/nvml_description.hpp"

#include <dlfcn.h>

#include <array>
#include <memory>

namespace crossbench {
namespace {

using nvmlReturn_t = int;  // NVML_SUCCESS = 0
using nvmlDevice_t = void*;
using nvmlEnableState_t = int;  // NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1
constexpr nvmlReturn_t kSuccess = 0;
constexpr int kClockSm = 1, kClockMemory = 2;  // nvmlClockType_t (graphics = 0)

struct LibraryCloser {
  void operator()(void* library) const { dlclose(library); }
};

// The NVML entry points used here, with the types of nvml.h (stable C ABI).
class Nvml {
 public:
  Nvml() : library_(dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) {
    if (!library_) {
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
    if (init_ == nullptr || init_() != kSuccess) {
      why_ = "nvmlInit_v2 failed";
      return;
    }
    initialised_ = true;
  }
  ~Nvml() {
    if (initialised_ && shutdown_ != nullptr) shutdown_();  // NVML counts inits: other users keep theirs
  }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  bool usable() const { return initialised_; }
  const std::string& why() const { return why_; }

  nvmlReturn_t (*by_uuid)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*by_pci)(const char*, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*enforced_power_limit)(nvmlDevice_t, unsigned*) = nullptr;  // [mW]
  nvmlReturn_t (*driver_version)(char*, unsigned) = nullptr;
  nvmlReturn_t (*applications_clock)(nvmlDevice_t, int, unsigned*) = nullptr;  // [MHz]
  nvmlReturn_t (*auto_boost)(nvmlDevice_t, nvmlEnableState_t*, nvmlEnableState_t*) = nullptr;
  nvmlReturn_t (*persistence)(nvmlDevice_t, nvmlEnableState_t*) = nullptr;
  nvmlReturn_t (*ecc_mode)(nvmlDevice_t, nvmlEnableState_t*, nvmlEnableState_t*) = nullptr;

 private:
  template <typename F>
  void bind(F& function, const char* name) {
    function = reinterpret_cast<F>(dlsym(library_.get(), name));
  }
  std::unique_ptr<void, LibraryCloser> library_;
  nvmlReturn_t (*init_)() = nullptr;
  nvmlReturn_t (*shutdown_)() = nullptr;
  bool initialised_ = false;
  std::string why_;
};

// "on"/"off" from an enable state, or "unsupported" when the call failed or is missing.
template <typename Call>
std::string state_text(Call call) {
  nvmlEnableState_t state = 0;
  if (!call(&state)) return "unsupported";
  return state != 0 ? "on" : "off";
}

}  // namespace

std::string describe_with_nvml(Device& device) {
  const Nvml nvml;
  if (!nvml.usable()) return nvml.why();
  nvmlDevice_t handle = nullptr;
  if (!(nvml.by_uuid && nvml.by_uuid(device.uuid.c_str(), &handle) == kSuccess) &&
      !(nvml.by_pci && nvml.by_pci(device.pci_bus_id.c_str(), &handle) == kSuccess))
    return "device " + device.uuid + " (" + device.pci_bus_id + ") not found in NVML";

  std::array<char, 96> text{};  // NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96
  if (nvml.uuid && nvml.uuid(handle, text.data(), static_cast<unsigned>(text.size())) == kSuccess) device.uuid = text.data();
  unsigned milliwatts = 0;
  if (nvml.enforced_power_limit && nvml.enforced_power_limit(handle, &milliwatts) == kSuccess)
    device.power_limit_w = milliwatts / 1e3;
  text.fill(0);
  if (nvml.driver_version && nvml.driver_version(text.data(), static_cast<unsigned>(text.size())) == kSuccess)
    device.driver = std::string("NVIDIA driver ") + text.data() + "; " + device.driver;
  unsigned mhz = 0;
  if (nvml.applications_clock && nvml.applications_clock(handle, kClockSm, &mhz) == kSuccess) device.application_sm_clock_mhz = mhz;
  if (nvml.applications_clock && nvml.applications_clock(handle, kClockMemory, &mhz) == kSuccess)
    device.application_memory_clock_mhz = mhz;
  const std::string boost = state_text([&](nvmlEnableState_t* state) {
    nvmlEnableState_t default_state = 0;
    return nvml.auto_boost && nvml.auto_boost(handle, state, &default_state) == kSuccess;
  });
  const std::string persistence = state_text(
      [&](nvmlEnableState_t* state) { return nvml.persistence && nvml.persistence(handle, state) == kSuccess; });
  device.clock_policy = "auto boost " + boost + "; persistence " + persistence;
  device.ecc = state_text([&](nvmlEnableState_t* state) {
    nvmlEnableState_t pending = 0;
    return nvml.ecc_mode && nvml.ecc_mode(handle, state, &pending) == kSuccess;
  });
  return "";
}

}  // namespace crossbench
