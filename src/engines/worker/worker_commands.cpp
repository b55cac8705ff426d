#include <sstream>

#include "crossbench/data_paths.hpp"
#include "engines/worker/worker_engine.hpp"

namespace crossbench {

std::map<std::string, std::string> default_worker_commands() {
  // /usr/bin/python3: Debian's and Ubuntu's python, which sees the distribution's torch and jax.
  return {{"pytorch", "/usr/bin/python3 -u {workers}/pytorch/worker.py"},
          {"pytorch-compile", "/usr/bin/python3 -u {workers}/pytorch/worker.py --compile"},
          {"jax", "/usr/bin/python3 -u {workers}/jax/worker.py"}};
}

std::vector<std::string> split_worker_command(const std::string& command) {
  const std::string workers = data_paths().workers.string();
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
