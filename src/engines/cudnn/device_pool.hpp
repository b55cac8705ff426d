// One accounted pool of device memory per session (DESIGN.md: peak memory is
// exact). Every tensor, weight, gradient, workspace and reserve space of a
// session is a buffer of this pool. Buffers are requested while the session
// is built, each op records the buffers it touches, and plan() places
// buffers whose lifetimes (op index intervals) overlap at disjoint offsets,
// so dead activations are reused within a step. allocate() then takes the
// whole plan with a single cudaMalloc: peak_bytes is that allocation.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "engines/cudnn/handles.hpp"

namespace crossbench::cudnn {

class DevicePool {
 public:
  static constexpr std::int64_t alignment = 256;  // [bytes] cuDNN/cuBLAS want 16; 256 keeps vector loads aligned

  // A new buffer of `bytes`; a persistent one lives for the whole session
  // (weights, gradients, statistics, the input batch); others live from the
  // first to the last op that uses them.
  int request(std::int64_t bytes, bool persistent, std::string label);
  void grow(int buffer, std::int64_t bytes);  // size = max(size, bytes); before plan()
  void use(int buffer, std::size_t op_index);
  void make_persistent(int buffer) { buffers_.at(static_cast<std::size_t>(buffer)).persistent = true; }
  std::int64_t size(int buffer) const { return buffers_.at(static_cast<std::size_t>(buffer)).bytes; }

  // Places every buffer; returns the pool size [bytes]. May be called again
  // after buffers grew (workspaces are known only after algorithm selection).
  std::int64_t plan();
  // One cudaMalloc of the planned size; throws OutOfMemory naming `what`.
  void allocate(const std::string& what);
  void release() { memory_.reset(); }

  char* address(int buffer) const {
    return memory_.data() + buffers_[static_cast<std::size_t>(buffer)].offset;
  }
  std::int64_t planned_bytes() const { return planned_; }
  std::int64_t unshared_bytes() const;  // the sum of all buffer sizes: what no reuse would take
  bool allocated() const { return memory_.data() != nullptr; }
  std::size_t buffer_count() const { return buffers_.size(); }

 private:
  struct Buffer {
    std::int64_t bytes = 0;
    bool persistent = false;
    std::string label;
    std::size_t first = std::numeric_limits<std::size_t>::max();
    std::size_t last = 0;
    std::int64_t offset = 0;
  };
  std::vector<Buffer> buffers_;
  std::int64_t planned_ = 0;
  DeviceBuffer memory_;
};

std::string format_bytes(double bytes);

}  // namespace crossbench::cudnn
