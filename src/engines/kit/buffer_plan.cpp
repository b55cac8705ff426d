#include "engines/kit/buffer_plan.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "crossbench/error.hpp"

namespace crossbench::kit {
namespace {

std::int64_t round_up(std::int64_t value, std::int64_t to) { return (value + to - 1) / to * to; }

}  // namespace

std::string format_bytes(double bytes, int decimals) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 5) {
    bytes /= 1024;
    ++unit;
  }
  char text[64];
  std::snprintf(text, sizeof text, "%.*f %s", unit == 0 ? 0 : decimals, bytes, units[unit]);
  return text;
}

int BufferPlan::request(std::int64_t bytes, bool persistent, std::string label) {
  if (bytes < 0) throw Error("buffer plan: negative size for " + label);
  Buffer buffer;
  buffer.bytes = bytes;
  buffer.persistent = persistent;
  buffer.label = std::move(label);
  buffers_.push_back(std::move(buffer));
  return static_cast<int>(buffers_.size() - 1);
}

void BufferPlan::grow(int buffer, std::int64_t bytes) {
  Buffer& b = at(buffer);
  b.bytes = std::max(b.bytes, bytes);
}

void BufferPlan::use(int buffer, std::size_t op_index) {
  Buffer& b = at(buffer);
  b.first = std::min(b.first, op_index);
  b.last = std::max(b.last, op_index);
}

std::int64_t BufferPlan::unshared_bytes() const {
  std::int64_t total = 0;
  for (const Buffer& b : buffers_) total += round_up(b.bytes, alignment_.base);
  return total;
}

std::int64_t BufferPlan::plan(bool reuse) {
  const std::int64_t tightest = plan_with(GapRule::tightest, reuse);
  const std::int64_t lowest = plan_with(GapRule::lowest, reuse);
  return lowest <= tightest ? lowest : plan_with(GapRule::tightest, reuse);
}

std::int64_t BufferPlan::plan_with(GapRule rule, bool reuse) {
  constexpr std::size_t forever = std::numeric_limits<std::size_t>::max();
  struct Interval {
    std::size_t first, last;  // op indices, inclusive
  };
  std::vector<Interval> life(buffers_.size());
  for (std::size_t i = 0; i < buffers_.size(); ++i) {
    const Buffer& b = buffers_[i];
    // Persistent buffers, and any never touched by an op (read only by the
    // host, e.g. in check()), live for the whole session.
    if (!reuse || b.persistent || b.first == forever) life[i] = {0, forever};
    else life[i] = {b.first, b.last};
  }
  std::vector<std::size_t> order(buffers_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return buffers_[a].bytes > buffers_[b].bytes; });
  std::vector<std::int64_t> reserved(buffers_.size());  // [bytes] each buffer takes
  for (std::size_t i = 0; i < buffers_.size(); ++i)
    reserved[i] = round_up(std::max<std::int64_t>(buffers_[i].bytes, 1), alignment_.of(buffers_[i].bytes));

  std::vector<std::size_t> placed;
  std::vector<std::pair<std::int64_t, std::int64_t>> busy;  // [begin, end) of placed buffers alive at the same time
  std::int64_t total = 0;
  for (std::size_t index : order) {
    const std::int64_t bytes = reserved[index], align = alignment_.of(buffers_[index].bytes);
    busy.clear();
    for (std::size_t other : placed)
      if (life[other].first <= life[index].last && life[index].first <= life[other].last)
        busy.emplace_back(buffers_[other].offset, buffers_[other].offset + reserved[other]);
    std::sort(busy.begin(), busy.end());
    std::int64_t chosen = -1, chosen_gap = std::numeric_limits<std::int64_t>::max(), cursor = 0;
    for (const auto& [begin, end] : busy) {
      const std::int64_t candidate = round_up(cursor, align);
      if (begin >= candidate + bytes && begin - candidate < chosen_gap) {
        chosen = candidate;
        chosen_gap = begin - candidate;
        if (rule == GapRule::lowest) break;
      }
      cursor = std::max(cursor, end);
    }
    if (chosen < 0) chosen = round_up(cursor, align);  // above every live buffer
    buffers_[index].offset = chosen;
    placed.push_back(index);
    total = std::max(total, chosen + bytes);
  }
  planned_ = total;
  return total;
}

}  // namespace crossbench::kit
