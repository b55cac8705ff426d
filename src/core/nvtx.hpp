// NVTX ranges, so that an Nsight Systems timeline lines up with cells, stages
// and layers. Nothing is linked: the NVTX library is loaded at run time
// (see nvtx.cpp), and without it a Range is one predictable branch.
#pragma once

#include <string>
#include <string_view>

namespace crossbench::nvtx {

// True when ranges reach a profiler: libnvToolsExt was loaded, or (NVTX 3,
// header-only) a tool such as nsys named its injection library in
// NVTX_INJECTION64_PATH. Decided once per process, at the first call.
bool enabled();

// Why ranges are off ("" when enabled), for logs and tests.
const std::string& why_disabled();

// One range on the calling thread's NVTX stack, from construction to
// destruction: `const nvtx::Range range("timed steps");`.
class Range {
 public:
  explicit Range(std::string_view name);
  ~Range();
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  bool pushed_ = false;
};

}  // namespace crossbench::nvtx
