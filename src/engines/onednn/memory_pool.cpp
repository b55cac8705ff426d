#include "engines/onednn/memory_pool.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <numeric>
#include <sstream>

#include "crossbench/error.hpp"

namespace crossbench::onednn {
namespace {

constexpr std::size_t kPage = 4096;  // [bytes]

std::size_t read_meminfo_available() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::size_t value = 0;
  std::string unit;
  while (meminfo >> key >> value) {
    std::getline(meminfo, unit);
    if (key == "MemAvailable:") return value * 1024;
  }
  return 0;
}

// cgroup v2: memory.max ("max" or bytes) minus memory.current, of this process's cgroup.
std::size_t read_cgroup_available() {
  std::ifstream self("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(self, line))
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  if (path.empty()) return std::numeric_limits<std::size_t>::max();
  const std::string dir = "/sys/fs/cgroup" + path;
  std::ifstream max_file(dir + "/memory.max"), current_file(dir + "/memory.current");
  std::string max_text;
  std::size_t current = 0;
  if (!(max_file >> max_text) || max_text == "max" || !(current_file >> current))
    return std::numeric_limits<std::size_t>::max();
  const std::size_t limit = std::strtoull(max_text.c_str(), nullptr, 10);
  return limit > current ? limit - current : 0;
}

}  // namespace

std::size_t available_memory_bytes() {
  std::size_t available = read_meminfo_available();
  if (available == 0) {
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) available = static_cast<std::size_t>(pages) * static_cast<std::size_t>(page);
  }
  if (available == 0) available = std::numeric_limits<std::size_t>::max();  // unknown: let malloc decide
  return std::min(available, read_cgroup_available());
}

MemoryPool::~MemoryPool() { std::free(arena_); }

void MemoryPool::allocate(std::size_t available_bytes, const std::string& what) {
  const auto arena_bytes = static_cast<std::size_t>(planned_bytes());
  if (arena_bytes > available_bytes) {
    std::ostringstream text;
    text << what << " needs " << format_bytes(static_cast<double>(arena_bytes)) << " (" << arena_bytes
         << " bytes) of tensors, weights, gradients and workspaces, but only "
         << format_bytes(static_cast<double>(available_bytes)) << " (" << available_bytes
         << " bytes) of memory is available (MemAvailable / cgroup limit); nothing was allocated";
    throw OutOfMemory(text.str());
  }
  void* memory = nullptr;
  if (posix_memalign(&memory, kPage, std::max<std::size_t>(arena_bytes, kPage)) != 0 || memory == nullptr)
    throw OutOfMemory(what + ": allocating " + format_bytes(static_cast<double>(arena_bytes)) + " (" +
                      std::to_string(arena_bytes) + " bytes) failed");
  arena_ = static_cast<std::byte*>(memory);
  // Zero in parallel: commits the pages now (first touch by the threads that
  // will use them) and gives blocked layouts their zero padding.
  const std::size_t chunk = 1 << 20;
  const auto chunks = static_cast<std::int64_t>((arena_bytes + chunk - 1) / chunk);
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::size_t begin = static_cast<std::size_t>(c) * chunk;
    std::memset(arena_ + begin, 0, std::min(chunk, arena_bytes - begin));
  }
}

}  // namespace crossbench::onednn
