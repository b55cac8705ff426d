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

// 64 bytes: a cache line and the alignment oneDNN's kernels want; page-align
// large buffers so that two hot tensors never share a page boundary oddly.
constexpr std::size_t kAlignment = 64;
constexpr std::size_t kPage = 4096;

std::size_t round_up(std::size_t value, std::size_t to) { return (value + to - 1) / to * to; }

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

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 5) {
    bytes /= 1024;
    ++unit;
  }
  char text[64];
  std::snprintf(text, sizeof text, "%.1f %s", bytes, units[unit]);
  return text;
}

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

int MemoryPool::request(std::size_t bytes, bool persistent, std::string label) {
  Buffer buffer;
  buffer.bytes = bytes;
  buffer.persistent = persistent;
  buffer.label = std::move(label);
  buffers_.push_back(std::move(buffer));
  return static_cast<int>(buffers_.size() - 1);
}

void MemoryPool::grow(int buffer, std::size_t bytes) {
  auto& b = buffers_[static_cast<std::size_t>(buffer)];
  b.bytes = std::max(b.bytes, bytes);
}

void MemoryPool::use(int buffer, std::size_t op_index) {
  auto& b = buffers_[static_cast<std::size_t>(buffer)];
  b.first = std::min(b.first, op_index);
  b.last = std::max(b.last, op_index);
}

void MemoryPool::make_persistent(int buffer) { buffers_[static_cast<std::size_t>(buffer)].persistent = true; }

std::size_t MemoryPool::unshared_bytes() const {
  std::size_t total = 0;
  for (const auto& b : buffers_) total += round_up(b.bytes, kAlignment);
  return total;
}

// Greedy by size (as TensorFlow Lite's arena planner): place the largest buffer
// first, each at the lowest address whose gap fits among the already placed
// buffers that are alive at the same time.
std::size_t MemoryPool::plan(bool reuse) {
  struct Interval {
    std::size_t first, last;
  };
  constexpr std::size_t forever = std::numeric_limits<std::size_t>::max();
  std::vector<Interval> life(buffers_.size());
  for (std::size_t i = 0; i < buffers_.size(); ++i) {
    const auto& b = buffers_[i];
    // Unused buffers and persistent ones live throughout.
    if (!reuse || b.persistent || b.first == SIZE_MAX)
      life[i] = {0, forever};
    else
      life[i] = {b.first, b.last};
  }
  std::vector<std::size_t> order(buffers_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return buffers_[a].bytes > buffers_[b].bytes; });

  // Large buffers start on a page; every buffer on a cache line.
  auto alignment = [](std::size_t bytes) { return bytes >= 16 * kPage ? kPage : kAlignment; };
  std::vector<std::size_t> reserved(buffers_.size());
  for (std::size_t i = 0; i < buffers_.size(); ++i)
    reserved[i] = round_up(std::max<std::size_t>(buffers_[i].bytes, 1), alignment(buffers_[i].bytes));

  std::vector<std::size_t> placed;
  std::vector<std::pair<std::size_t, std::size_t>> busy;  // [offset, end) of placed buffers alive at the same time
  arena_bytes_ = 0;
  for (std::size_t index : order) {
    auto& b = buffers_[index];
    const std::size_t bytes = reserved[index], align = alignment(b.bytes);
    busy.clear();
    for (std::size_t other : placed)
      if (life[other].first <= life[index].last && life[index].first <= life[other].last)
        busy.emplace_back(buffers_[other].offset, buffers_[other].offset + reserved[other]);
    std::sort(busy.begin(), busy.end());
    std::size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
    for (const auto& [begin, end] : busy) {
      const std::size_t candidate = round_up(cursor, align);
      if (begin >= candidate + bytes && begin - candidate < best_gap) {  // best fit among the gaps
        best = candidate;
        best_gap = begin - candidate;
      }
      cursor = std::max(cursor, end);
    }
    if (best == SIZE_MAX) best = round_up(cursor, align);
    b.offset = best;
    placed.push_back(index);
    arena_bytes_ = std::max(arena_bytes_, best + bytes);
  }
  return arena_bytes_;
}

void MemoryPool::allocate(std::size_t available_bytes, const std::string& what) {
  if (arena_bytes_ > available_bytes) {
    std::ostringstream text;
    text << what << " needs " << format_bytes(static_cast<double>(arena_bytes_)) << " (" << arena_bytes_
         << " bytes) of tensors, weights, gradients and workspaces, but only "
         << format_bytes(static_cast<double>(available_bytes)) << " (" << available_bytes
         << " bytes) of memory is available (MemAvailable / cgroup limit); nothing was allocated";
    throw OutOfMemory(text.str());
  }
  void* memory = nullptr;
  if (posix_memalign(&memory, kPage, std::max<std::size_t>(arena_bytes_, kPage)) != 0 || memory == nullptr)
    throw OutOfMemory(what + ": allocating " + format_bytes(static_cast<double>(arena_bytes_)) + " (" +
                      std::to_string(arena_bytes_) + " bytes) failed");
  arena_ = static_cast<std::byte*>(memory);
  // Zero in parallel: commits the pages now (first touch by the threads that
  // will use them) and gives blocked layouts their zero padding.
  const std::size_t chunk = 1 << 20;
  const auto chunks = static_cast<std::int64_t>((arena_bytes_ + chunk - 1) / chunk);
#pragma omp parallel for schedule(static)
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::size_t begin = static_cast<std::size_t>(c) * chunk;
    std::memset(arena_ + begin, 0, std::min(chunk, arena_bytes_ - begin));
  }
}

}  // namespace crossbench::onednn
