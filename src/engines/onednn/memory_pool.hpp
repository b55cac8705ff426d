// MemoryPool: every byte a session uses lives in one arena that this class
// plans, checks against the memory the machine has free, allocates and counts.
//
// Buffers are requested while the graph is built (sizes only), each op records
// which buffers it touches, and plan() places buffers whose lifetimes (first to
// last op that touches them) do not overlap at the same addresses: as a
// framework frees an activation after its last use, so the peak is comparable
// to PyTorch's. Persistent buffers (weights, their gradients, the input batch,
// running statistics) live for the whole session.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace crossbench::onednn {

class MemoryPool {
 public:
  MemoryPool() = default;
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;
  ~MemoryPool();

  // A new buffer of `bytes`; `label` names it in out-of-memory messages.
  int request(std::size_t bytes, bool persistent, std::string label);
  void grow(int buffer, std::size_t bytes);  // at least `bytes` (the shared scratchpad)
  void use(int buffer, std::size_t op_index);  // op `op_index` reads or writes the buffer
  void make_persistent(int buffer);
  std::size_t size(int buffer) const { return buffers_[static_cast<std::size_t>(buffer)].bytes; }

  // Places every buffer; with `reuse`, buffers with disjoint lifetimes share
  // addresses. Returns the arena size [bytes].
  std::size_t plan(bool reuse);
  std::size_t planned_bytes() const { return arena_bytes_; }
  // Sum of all buffer sizes, as if nothing were shared [bytes].
  std::size_t unshared_bytes() const;

  // Allocates and zeroes (so that the pages are committed now, not in the first
  // timed step) the planned arena. Throws OutOfMemory when the plan exceeds
  // `available_bytes` or the allocation fails.
  void allocate(std::size_t available_bytes, const std::string& what);
  bool allocated() const { return arena_ != nullptr; }

  void* address(int buffer, std::size_t offset = 0) const {
    return arena_ + buffers_[static_cast<std::size_t>(buffer)].offset + offset;
  }

 private:
  struct Buffer {
    std::size_t bytes = 0;
    bool persistent = false;
    std::size_t first = SIZE_MAX, last = 0;  // ops that touch it
    std::size_t offset = 0;                  // in the arena, after plan()
    std::string label;
  };
  std::vector<Buffer> buffers_;
  std::size_t arena_bytes_ = 0;
  std::byte* arena_ = nullptr;
};

// Bytes this process may still allocate without swapping or meeting its cgroup
// limit: the smaller of MemAvailable (/proc/meminfo) and the cgroup's
// memory.max - memory.current. Falls back to sysconf(_SC_AVPHYS_PAGES).
std::size_t available_memory_bytes();

std::string format_bytes(double bytes);

}  // namespace crossbench::onednn
