// What a rank measures on: one GPU, or the CPU cores of its binding.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace crossbench {

enum class DeviceKind : std::uint8_t { cpu, gpu };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  std::string model;                 // "NVIDIA H200", "Intel(R) Xeon(R) Platinum 8480+"
  std::int64_t memory_bytes = 0;     // device memory (GPU) or physical memory (CPU)
  int compute_units = 0;             // SMs (GPU) or threads of the rank's binding (CPU)
  std::string architecture;          // compute capability "9.0" (GPU) or best ISA "avx512_core_amx" (CPU)
  std::string tag;                   // --device-tag / CROSSBENCH_DEVICE_TAG, may be empty
  double peak_fp32_tflops = 0;       // estimate used by the planner's cost model [TFLOP/s]
  bool native_bf16 = false;          // hardware bf16 arithmetic
  // Per-rank facts (not part of the key):
  std::string host;
  int index = -1;                    // GPU ordinal as the rank sees it; -1 for the CPU
  std::string uuid;
  std::string pci_bus_id;
  std::string driver;                // driver version (GPU) or kernel release (CPU)
  double sm_clock_mhz = 0;           // max SM clock (GPU) or nominal core clock (CPU) [MHz]
  double memory_clock_mhz = 0;       // [MHz], 0 if unknown
  double power_limit_w = 0;          // enforced power limit (NVML) [W], 0 if unknown
  double application_sm_clock_mhz = 0;      // NVML application clocks [MHz], 0 if unknown
  double application_memory_clock_mhz = 0;
  std::string clock_policy;          // "auto boost on|off; persistence on|off" as NVML says; "" unknown
  std::string ecc;                   // "on", "off", "unsupported"; "" unknown
  // The host (MLPerf-style system description), every device kind:
  std::string cpu_model;             // /proc/cpuinfo "model name"
  std::string os;                    // /etc/os-release PRETTY_NAME
  std::string kernel;                // uname: "Linux 6.1.0-18-amd64 x86_64"
  std::string container;             // "docker", "apptainer IMAGE", $CROSSBENCH_CONTAINER_IMAGE ...; "" none
  // Where the rank's CPU threads may run (set by the cluster layer when it binds the rank):
  std::string cpu_set;               // Linux list syntax "0-3,8"; "" unknown
  int numa_node = -1;                // NUMA node nearest the GPU; -1 unknown or no GPU

  // Two devices with the same key are interchangeable for measurement:
  // kind, model, memory, compute units, architecture and tag.
  std::string key() const;
};

// Probes the device this process should bind: `gpu_ordinal` >= 0 selects that
// visible GPU; -1 means the CPU with `cpu_threads` threads.
[[nodiscard]] Device probe_cpu(int cpu_threads, const std::string& tag);
// Number of GPUs this process sees (0 without CUDA support or without a usable GPU).
int visible_gpu_count();
[[nodiscard]] Device probe_gpu(int gpu_ordinal, const std::string& tag);  // throws Error on failure
// FP32 lanes per SM of an NVIDIA GPU generation (192 on Kepler, 64 on GP100, Volta, Turing and
// GA100, 128 elsewhere) and the fp32 peak that the planner's cost model uses [TFLOP/s].
int gpu_fp32_lanes_per_sm(int major, int minor);
double gpu_peak_fp32_tflops(int major, int minor, int sms, double sm_clock_mhz);
// Fills the host fields (cpu_model, os, kernel, container) from /proc,
// /etc/os-release, uname, /.dockerenv, /run/.containerenv and the environment.
void describe_host(Device& device);
// Threads of this process's CPU binding (sched_getaffinity), or OMP_NUM_THREADS when set.
int cpu_threads_of_binding();

nlohmann::json to_json(const Device& device);
[[nodiscard]] Device device_from_json(const nlohmann::json& json);

// The device as a measured choice names it ("NVIDIA H200 cc=90 sms=132"): the
// cuDNN engine's algorithm cache keys its records by it, and `plan` reads
// that cache by it (cluster/cost_model.cpp).
[[nodiscard]] std::string measurement_device(const Device& device);

}  // namespace crossbench
