// MemoryPool: every byte a session uses lives in one arena: the kit's buffer
// plan (engines/kit/buffer_plan.hpp), checked against the memory the machine
// has free, allocated and zeroed here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engines/kit/buffer_plan.hpp"

namespace crossbench::onednn {

class MemoryPool : public kit::BufferPlan {
 public:
  // 64 bytes: a cache line and the alignment oneDNN's kernels want; large
  // buffers (64 KiB and more) start on a page.
  static constexpr kit::Alignment alignment{64, 4096, 16 * 4096};
  MemoryPool() : BufferPlan(alignment) {}
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;
  ~MemoryPool();

  // Allocates and zeroes (so that the pages are committed now, not in the first
  // timed step) the planned arena. Throws OutOfMemory when the plan exceeds
  // `available_bytes` or the allocation fails.
  void allocate(std::size_t available_bytes, const std::string& what);
  bool allocated() const { return arena_ != nullptr; }

  void* address(int buffer, std::size_t offset = 0) const {
    return arena_ + static_cast<std::size_t>(BufferPlan::offset(buffer)) + offset;
  }

 private:
  std::byte* arena_ = nullptr;
};

// Bytes this process may still allocate without swapping or meeting its cgroup
// limit: the smaller of MemAvailable (/proc/meminfo) and the cgroup's
// memory.max - memory.current. Falls back to sysconf(_SC_AVPHYS_PAGES).
std::size_t available_memory_bytes();

using kit::format_bytes;

}  // namespace crossbench::onednn
