// Buffer placement: a greedy interval-graph allocation. Buffers are placed
// largest first at the lowest offset that does not overlap (in bytes) any
// already placed buffer whose lifetime overlaps (in op indices). For the
// chain-like lifetimes of a network's forward and backward pass this is
// within a few percent of the optimum (the largest live set), the way
// TensorFlow's and MXNet's static planners do it.
#include "engines/cudnn/device_pool.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "crossbench/error.hpp"

namespace crossbench::cudnn {
namespace {

std::int64_t aligned(std::int64_t bytes) {
  return (bytes + DevicePool::alignment - 1) / DevicePool::alignment * DevicePool::alignment;
}

}  // namespace

std::string format_bytes(double bytes) {
  char text[64];
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.2f %s", bytes, units[unit]);
  return text;
}

int DevicePool::request(std::int64_t bytes, bool persistent, std::string label) {
  if (bytes < 0) throw Error("cuDNN engine: negative buffer size for " + label);
  Buffer buffer;
  buffer.bytes = bytes;
  buffer.persistent = persistent;
  buffer.label = std::move(label);
  buffers_.push_back(std::move(buffer));
  return static_cast<int>(buffers_.size() - 1);
}

void DevicePool::grow(int buffer, std::int64_t bytes) {
  Buffer& b = buffers_.at(static_cast<std::size_t>(buffer));
  b.bytes = std::max(b.bytes, bytes);
}

void DevicePool::use(int buffer, std::size_t op_index) {
  Buffer& b = buffers_.at(static_cast<std::size_t>(buffer));
  b.first = std::min(b.first, op_index);
  b.last = std::max(b.last, op_index);
}

std::int64_t DevicePool::unshared_bytes() const {
  std::int64_t total = 0;
  for (const Buffer& b : buffers_) total += aligned(b.bytes);
  return total;
}

std::int64_t DevicePool::plan() {
  constexpr std::size_t forever = std::numeric_limits<std::size_t>::max();
  struct Interval {
    std::size_t first, last;
  };
  std::vector<Interval> lifetime(buffers_.size());
  for (std::size_t i = 0; i < buffers_.size(); ++i) {
    const Buffer& b = buffers_[i];
    // Persistent buffers, and any never touched by an op (read only by the
    // host, e.g. in check()), live for the whole session.
    if (b.persistent || b.first == forever) lifetime[i] = {0, forever};
    else lifetime[i] = {b.first, b.last};
  }
  std::vector<std::size_t> order(buffers_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return buffers_[a].bytes > buffers_[b].bytes;
  });

  struct Placed {
    std::int64_t begin, end;  // [bytes)
    std::size_t index;
  };
  std::vector<Placed> placed;  // kept sorted by begin
  placed.reserve(buffers_.size());
  std::vector<const Placed*> clashing;
  std::int64_t total = 0;
  for (std::size_t index : order) {
    Buffer& b = buffers_[index];
    const std::int64_t size = aligned(std::max<std::int64_t>(b.bytes, 1));
    clashing.clear();
    for (const Placed& p : placed) {
      const Interval& other = lifetime[p.index];
      if (other.first <= lifetime[index].last && lifetime[index].first <= other.last) clashing.push_back(&p);
    }
    // `placed` is sorted by begin, so `clashing` is too: scan the gaps.
    std::int64_t offset = 0;
    for (const Placed* p : clashing) {
      if (p->begin >= offset + size) break;
      offset = std::max(offset, p->end);
    }
    b.offset = offset;
    total = std::max(total, offset + size);
    const Placed entry{offset, offset + size, index};
    placed.insert(std::upper_bound(placed.begin(), placed.end(), entry,
                                   [](const Placed& x, const Placed& y) { return x.begin < y.begin; }),
                  entry);
  }
  planned_ = total;
  return total;
}

void DevicePool::allocate(const std::string& what) {
  memory_.reset();
  memory_ = DeviceBuffer(static_cast<std::size_t>(std::max<std::int64_t>(planned_, alignment)), what.c_str());
}

}  // namespace crossbench::cudnn
