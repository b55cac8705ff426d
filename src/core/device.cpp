// Device description, its key, JSON form, and the CPU probe.
#include "crossbench/device.hpp"

#include <sched.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "crossbench/error.hpp"

namespace crossbench {
namespace {

std::string host_name() {
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) return "unknown";
  return host.data();
}

std::string trim(std::string text) {
  const auto first = text.find_first_not_of(" \t");
  const auto last = text.find_last_not_of(" \t\n");
  return first == std::string::npos ? std::string{} : text.substr(first, last - first + 1);
}

// The first value of a "key : value" line of /proc/cpuinfo.
std::string cpuinfo_value(const std::string& key) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    const auto colon = line.find(':');
    if (colon != std::string::npos && trim(line.substr(0, colon)) == key) return trim(line.substr(colon + 1));
  }
  return {};
}

std::string format_gib(std::int64_t bytes) {
  std::ostringstream text;
  text << std::llround(static_cast<double>(bytes) / double(1 << 30)) << " GiB";
  return text.str();
}

}  // namespace

int gpu_fp32_lanes_per_sm(int major, int minor) {
  if (major <= 3) return 192;                                // Kepler (GK110, GK210)
  if (major == 6 && minor == 0) return 64;                   // GP100
  if (major == 7 || (major == 8 && minor == 0)) return 64;   // Volta, Turing, GA100
  return 128;                                                // Maxwell, GP10x, GA10x, Ada, Hopper, Blackwell
}

double gpu_peak_fp32_tflops(int major, int minor, int sms, double sm_clock_mhz) {
  return sms * gpu_fp32_lanes_per_sm(major, minor) * 2.0 * sm_clock_mhz * 1e6 / 1e12;  // 2 FLOPs per FMA
}

std::string Device::key() const {
  std::ostringstream text;
  if (kind == DeviceKind::gpu) {
    text << model << " (" << compute_units << " SMs, sm_" << architecture << ", " << format_gib(memory_bytes) << ")";
  } else {
    text << "CPU " << model << " (" << compute_units << " threads, " << architecture << ", "
         << format_gib(memory_bytes) << ")";
  }
  if (!tag.empty()) text << " [" << tag << "]";
  return text.str();
}

int cpu_threads_of_binding() {
  if (const char* omp = std::getenv("OMP_NUM_THREADS"); omp != nullptr && std::atoi(omp) > 0)
    return std::atoi(omp);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
}

Device probe_cpu(int cpu_threads, const std::string& tag) {
  Device device;
  device.kind = DeviceKind::cpu;
  device.model = cpuinfo_value("model name");
  if (device.model.empty()) device.model = "unknown CPU";
  device.memory_bytes = static_cast<std::int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  device.compute_units = cpu_threads;
  device.tag = tag;
  std::set<std::string> flags;
  std::istringstream flag_list(cpuinfo_value("flags"));
  for (std::string flag; flag_list >> flag;) flags.insert(flag);
  // The best vector ISA decides the fp32 FMA width: floats per FMA instruction.
  double floats_per_fma = 4;
  device.architecture = "sse4";
  if (flags.count("avx2") && flags.count("fma")) device.architecture = "avx2", floats_per_fma = 8;
  if (flags.count("avx512f")) device.architecture = "avx512_core", floats_per_fma = 16;
  if (flags.count("avx512_bf16")) device.architecture = "avx512_core_bf16";
  if (flags.count("amx_bf16")) device.architecture = "avx512_core_amx";
  device.native_bf16 = flags.count("avx512_bf16") || flags.count("amx_bf16");
  const double mhz = std::atof(cpuinfo_value("cpu MHz").c_str());
  device.sm_clock_mhz = mhz;
  // Peak estimate for the planner: 2 FMA units × 2 FLOPs per FMA per float lane.
  device.peak_fp32_tflops = cpu_threads * (mhz > 0 ? mhz : 2000.0) * 1e6 * floats_per_fma * 2 * 2 / 1e12;
  device.host = host_name();
  utsname system{};
  if (uname(&system) == 0) device.driver = std::string("Linux ") + system.release;
  describe_host(device);
  return device;
}

#if !CROSSBENCH_HAVE_CUDA
int visible_gpu_count() { return 0; }
Device probe_gpu(int gpu_ordinal, const std::string&) {
  throw Error("cannot probe GPU " + std::to_string(gpu_ordinal) + " on " + where_am_i() +
              ": this crossbench was built without CUDA (CROSSBENCH_ENABLE_CUDA=OFF)");
}
#endif

nlohmann::json to_json(const Device& device) {
  return {{"kind", device.kind == DeviceKind::gpu ? "gpu" : "cpu"},
          {"model", device.model},
          {"memory_bytes", device.memory_bytes},
          {"compute_units", device.compute_units},
          {"architecture", device.architecture},
          {"tag", device.tag},
          {"peak_fp32_tflops", device.peak_fp32_tflops},
          {"native_bf16", device.native_bf16},
          {"host", device.host},
          {"index", device.index},
          {"uuid", device.uuid},
          {"pci_bus_id", device.pci_bus_id},
          {"driver", device.driver},
          {"sm_clock_mhz", device.sm_clock_mhz},
          {"memory_clock_mhz", device.memory_clock_mhz},
          {"power_limit_w", device.power_limit_w},
          {"application_sm_clock_mhz", device.application_sm_clock_mhz},
          {"application_memory_clock_mhz", device.application_memory_clock_mhz},
          {"clock_policy", device.clock_policy},
          {"ecc", device.ecc},
          {"cpu_model", device.cpu_model},
          {"os", device.os},
          {"kernel", device.kernel},
          {"container", device.container},
          {"cpu_set", device.cpu_set},
          {"numa_node", device.numa_node},
          {"key", device.key()}};
}

std::string measurement_device(const Device& device) {
  return device.model + " cc=" + device.architecture + " sms=" + std::to_string(device.compute_units);
}

Device device_from_json(const nlohmann::json& json) {
  try {
    Device device;
    device.kind = json.at("kind").get<std::string>() == "gpu" ? DeviceKind::gpu : DeviceKind::cpu;
    json.at("model").get_to(device.model);
    json.at("memory_bytes").get_to(device.memory_bytes);
    json.at("compute_units").get_to(device.compute_units);
    json.at("architecture").get_to(device.architecture);
    json.at("tag").get_to(device.tag);
    json.at("peak_fp32_tflops").get_to(device.peak_fp32_tflops);
    json.at("native_bf16").get_to(device.native_bf16);
    json.at("host").get_to(device.host);
    json.at("index").get_to(device.index);
    json.at("uuid").get_to(device.uuid);
    json.at("pci_bus_id").get_to(device.pci_bus_id);
    json.at("driver").get_to(device.driver);
    json.at("sm_clock_mhz").get_to(device.sm_clock_mhz);
    json.at("memory_clock_mhz").get_to(device.memory_clock_mhz);
    json.at("power_limit_w").get_to(device.power_limit_w);
    // Provenance fields: optional, so device files written before them still load.
    device.application_sm_clock_mhz = json.value("application_sm_clock_mhz", 0.0);
    device.application_memory_clock_mhz = json.value("application_memory_clock_mhz", 0.0);
    device.clock_policy = json.value("clock_policy", "");
    device.ecc = json.value("ecc", "");
    device.cpu_model = json.value("cpu_model", "");
    device.os = json.value("os", "");
    device.kernel = json.value("kernel", "");
    device.container = json.value("container", "");
    device.cpu_set = json.value("cpu_set", "");
    device.numa_node = json.value("numa_node", -1);
    return device;
  } catch (const nlohmann::json::exception& error) {
    throw Error(std::string("malformed device description: ") + error.what());
  }
}

}  // namespace crossbench
