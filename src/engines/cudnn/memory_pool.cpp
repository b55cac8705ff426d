#include "engines/cudnn/memory_pool.hpp"

#include <algorithm>

namespace crossbench::cudnn {

void MemoryPool::allocate(const std::string& what) {
  memory_.reset();
  memory_ = DeviceBuffer(static_cast<std::size_t>(std::max<std::int64_t>(planned_bytes(), alignment.base)), what.c_str());
}

}  // namespace crossbench::cudnn
