// The GPU part of the system description, from NVML (loaded at run time with
// dlopen("libnvidia-ml.so.1"): nothing NVML is needed to build).
#pragma once

#include <string>

#include "crossbench/device.hpp"

namespace crossbench {

// Finds `device` in NVML by its UUID, else by its PCI bus id, and fills the
// UUID as NVML prints it, the enforced power limit, the driver version, the
// application clocks, the clock policy and ECC. Returns "" when it did, else
// why not (no NVML, device not found): the fields keep their "unknown" values.
std::string describe_with_nvml(Device& device);

}  // namespace crossbench
