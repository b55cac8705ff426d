#include <sstream>

#include "crossbench/build_info.hpp"
#include "engines/worker/worker_engine.hpp"

namespace crossbench {

std::filesystem::path find_workers_directory() {
  std::error_code ignored;
  const auto executable = std::filesystem::canonical("/proc/self/exe", ignored);
  std::vector<std::filesystem::path> candidates;
  if (!executable.empty()) {
    candidates.push_back(executable.parent_path().parent_path() / "src" / "workers");
    candidates.push_back(executable.parent_path().parent_path().parent_path() / "src" / "workers");
  }
  candidates.push_back(std::filesystem::path(build_info::source_dir) / "src" / "workers");
  for (const auto& candidate : candidates)
    if (std::filesystem::is_directory(candidate / "common", ignored)) return candidate;
  return candidates.back();
}

std::map<std::string, std::string> default_worker_commands() {
  // /usr/bin/python3: Debian's and Ubuntu's python, which sees the distribution's torch and jax.
  return {{"pytorch", "/usr/bin/python3 -u {workers}/pytorch/worker.py"},
          {"pytorch-compile", "/usr/bin/python3 -u {workers}/pytorch/worker.py --compile"},
          {"jax", "/usr/bin/python3 -u {workers}/jax/worker.py"}};
}

std::vector<std::string> split_worker_command(const std::string& command) {
  const std::string workers = find_workers_directory().string();
  std::vector<std::string> argv;
  std::istringstream words(command);
  for (std::string word; words >> word;) {
    for (auto at = word.find("{workers}"); at != std::string::npos; at = word.find("{workers}"))
      word.replace(at, 9, workers);
    argv.push_back(word);
  }
  return argv;
}

}  // namespace crossbench
