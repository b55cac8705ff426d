// The host part of the system description (MLPerf style): CPU model, OS,
// kernel and container, read from the files every Linux has.
#include <sys/utsname.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "crossbench/device.hpp"

namespace crossbench {
namespace {

// The value of `key` in a "key : value" (cpuinfo) or key="value" (os-release) file.
std::string value_in_file(const char* path, const std::string& key, char separator) {
  std::ifstream file(path);
  for (std::string line; std::getline(file, line);) {
    if (line.rfind(key, 0) != 0) continue;
    const auto at = line.find(separator);
    if (at == std::string::npos) continue;
    const std::string name = line.substr(0, line.find_last_not_of(" \t", at - 1) + 1);
    if (name != key) continue;
    std::string value = line.substr(at + 1);
    value.erase(0, value.find_first_not_of(" \t\""));
    value.erase(value.find_last_not_of(" \t\"") + 1);
    return value;
  }
  return "";
}

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

// What the container runtime leaves behind; the image name only where the
// runtime tells it (Apptainer/Singularity) or the site does (CROSSBENCH_CONTAINER_IMAGE).
std::string container_description() {
  if (const std::string image = environment("CROSSBENCH_CONTAINER_IMAGE"); !image.empty()) return image;
  for (const char* variable : {"APPTAINER_CONTAINER", "SINGULARITY_CONTAINER"})
    if (const std::string image = environment(variable); !image.empty()) return "apptainer " + image;
  if (const std::string image = environment("ENROOT_ROOTFS"); !image.empty()) return "enroot " + image;
  std::error_code ignored;
  if (std::filesystem::exists("/.dockerenv", ignored)) return "docker";
  if (std::filesystem::exists("/run/.containerenv", ignored)) {
    const std::string image = value_in_file("/run/.containerenv", "image", '=');
    return image.empty() ? "podman" : "podman " + image;
  }
  if (const std::string runtime = environment("container"); !runtime.empty()) return runtime;  // systemd-nspawn, lxc
  return "";
}

}  // namespace

void describe_host(Device& device) {
  device.cpu_model = value_in_file("/proc/cpuinfo", "model name", ':');
  if (device.cpu_model.empty()) device.cpu_model = value_in_file("/proc/cpuinfo", "Model", ':');  // Arm
  device.os = value_in_file("/etc/os-release", "PRETTY_NAME", '=');
  utsname system{};
  if (uname(&system) == 0)
    device.kernel = std::string(system.sysname) + " " + system.release + " " + system.machine;
  device.container = container_description();
}

}  // namespace crossbench
