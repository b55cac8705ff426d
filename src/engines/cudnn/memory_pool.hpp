// The session's device memory: the kit's buffer plan (engines/kit/buffer_plan.hpp)
// allocated with a single cudaMalloc, so peak_bytes is that allocation.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "engines/cudnn/handles.hpp"
#include "engines/kit/buffer_plan.hpp"

namespace crossbench::cudnn {

using kit::format_bytes;

class MemoryPool : public kit::BufferPlan {
 public:
  // [bytes] cuDNN/cuBLAS want 16; 256 keeps vector loads aligned
  static constexpr kit::Alignment alignment{256, 256, std::numeric_limits<std::int64_t>::max()};
  MemoryPool() : BufferPlan(alignment) {}

  // One cudaMalloc of the planned size; throws OutOfMemory naming `what`.
  void allocate(const std::string& what);
  void release() { memory_.reset(); }
  bool allocated() const { return memory_.data() != nullptr; }

  char* address(int buffer) const { return memory_.data() + offset(buffer); }

 private:
  DeviceBuffer memory_;
};

}  // namespace crossbench::cudnn
