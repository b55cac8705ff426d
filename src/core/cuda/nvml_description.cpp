#include "core/cuda/nvml_description.hpp"

#include <array>

#include "core/nvml.hpp"

namespace crossbench {
namespace {

using nvml::EnableState;
using nvml::kSuccess;

// "on"/"off" from an enable state, or "unsupported" when the call failed or is missing.
template <typename Call>
std::string state_text(Call call) {
  EnableState state = 0;
  if (!call(&state)) return "unsupported";
  return state != 0 ? "on" : "off";
}

}  // namespace

std::string describe_with_nvml(Device& device) {
  const nvml::Library& library = nvml::library();
  if (!library.usable()) return library.why();
  const nvml::DeviceHandle handle = library.find_device(device.uuid, device.pci_bus_id);
  if (handle == nullptr) return "device " + device.uuid + " (" + device.pci_bus_id + ") not found in NVML";

  std::array<char, 96> text{};  // NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96
  if (library.uuid && library.uuid(handle, text.data(), static_cast<unsigned>(text.size())) == kSuccess) device.uuid = text.data();
  unsigned milliwatts = 0;
  if (library.enforced_power_limit && library.enforced_power_limit(handle, &milliwatts) == kSuccess)
    device.power_limit_w = milliwatts / 1e3;
  text.fill(0);
  if (library.driver_version && library.driver_version(text.data(), static_cast<unsigned>(text.size())) == kSuccess)
    device.driver = std::string("NVIDIA driver ") + text.data() + "; " + device.driver;
  unsigned mhz = 0;
  if (library.applications_clock && library.applications_clock(handle, nvml::kClockSm, &mhz) == kSuccess) device.application_sm_clock_mhz = mhz;
  if (library.applications_clock && library.applications_clock(handle, nvml::kClockMemory, &mhz) == kSuccess)
    device.application_memory_clock_mhz = mhz;
  const std::string boost = state_text([&](EnableState* state) {
    EnableState default_state = 0;
    return library.auto_boost && library.auto_boost(handle, state, &default_state) == kSuccess;
  });
  const std::string persistence = state_text(
      [&](EnableState* state) { return library.persistence && library.persistence(handle, state) == kSuccess; });
  device.clock_policy = "auto boost " + boost + "; persistence " + persistence;
  device.ecc = state_text([&](EnableState* state) {
    EnableState pending = 0;
    return library.ecc_mode && library.ecc_mode(handle, state, &pending) == kSuccess;
  });
  return "";
}

}  // namespace crossbench
