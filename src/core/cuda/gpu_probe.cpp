// GPU probe through the CUDA runtime (never the driver API: only a stub exists on build machines).
#include <unistd.h>

#include <array>
#include <cstdio>

#include "core/cuda/cuda_check.hpp"
#include "core/cuda/nvml_description.hpp"
#include "crossbench/device.hpp"

namespace crossbench {

int visible_gpu_count() {
  int count = 0;
  // No driver or no device (cudaErrorNoDevice, cudaErrorInsufficientDriver):
  // the rank measures the CPU instead, so this is not an error.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

Device probe_gpu(int gpu_ordinal, const std::string& tag) {
  cudaDeviceProp properties{};
  CB_CHECK_CUDA(cudaGetDeviceProperties(&properties, gpu_ordinal));
  Device device;
  device.kind = DeviceKind::gpu;
  device.model = properties.name;
  device.memory_bytes = static_cast<std::int64_t>(properties.totalGlobalMem);
  device.compute_units = properties.multiProcessorCount;
  device.architecture = std::to_string(properties.major) + std::to_string(properties.minor);
  device.tag = tag;
  device.native_bf16 = properties.major >= 8;
  int sm_clock_khz = 0, memory_clock_khz = 0;
  CB_CHECK_CUDA(cudaDeviceGetAttribute(&sm_clock_khz, cudaDevAttrClockRate, gpu_ordinal));
  CB_CHECK_CUDA(cudaDeviceGetAttribute(&memory_clock_khz, cudaDevAttrMemoryClockRate, gpu_ordinal));
  device.sm_clock_mhz = sm_clock_khz / 1e3;
  device.memory_clock_mhz = memory_clock_khz / 1e3;
  device.peak_fp32_tflops =
      gpu_peak_fp32_tflops(properties.major, properties.minor, device.compute_units, device.sm_clock_mhz);
  std::array<char, 64> bus_id{};
  CB_CHECK_CUDA(cudaDeviceGetPCIBusId(bus_id.data(), static_cast<int>(bus_id.size()), gpu_ordinal));
  device.pci_bus_id = bus_id.data();
  // "GPU-" + 32 hex digits + 4 dashes = 40 characters and the terminating NUL.
  std::array<char, 48> uuid{};
  const auto& bytes = properties.uuid.bytes;
  std::snprintf(uuid.data(), uuid.size(), "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                bytes[0] & 0xff, bytes[1] & 0xff, bytes[2] & 0xff, bytes[3] & 0xff, bytes[4] & 0xff,
                bytes[5] & 0xff, bytes[6] & 0xff, bytes[7] & 0xff, bytes[8] & 0xff, bytes[9] & 0xff,
                bytes[10] & 0xff, bytes[11] & 0xff, bytes[12] & 0xff, bytes[13] & 0xff, bytes[14] & 0xff,
                bytes[15] & 0xff);
  device.uuid = uuid.data();
  int driver_version = 0;
  CB_CHECK_CUDA(cudaDriverGetVersion(&driver_version));
  device.driver = "CUDA driver " + std::to_string(driver_version / 1000) + "." + std::to_string(driver_version % 1000 / 10);
  device.index = gpu_ordinal;
  std::array<char, 256> host{};
  device.host = gethostname(host.data(), host.size() - 1) == 0 ? host.data() : "unknown";
  describe_host(device);
  // NVML's UUID, power limit, driver, clocks and ECC; without NVML those stay unknown
  // (0, "") and the clock policy says why.
  if (const std::string why = describe_with_nvml(device); !why.empty()) device.clock_policy = "unknown: " + why;
  return device;
}

}  // namespace crossbench
