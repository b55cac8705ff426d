#include "engines/cudnn/fault_injection.hpp"

#include <cstdlib>
#include <mutex>
#include <regex>

#include "core/cuda/cuda_check.hpp"
#include "crossbench/error.hpp"

namespace crossbench::cudnn::fault_injection {
namespace {

__global__ void trap_kernel() { __trap(); }  // cudaErrorIllegalInstruction / LaunchFailure: sticky

struct Fault {
  enum class Kind { none, trap, oom } kind = Kind::none;
  std::regex cells;
  std::string text;     // the variable's value, for messages
  long long step = 0;   // trap: after this step
};

// CROSSBENCH_GPU_FAULT, parsed once.
const Fault& configured() {
  static const Fault fault = [] {
    Fault parsed;
    const char* value = std::getenv("CROSSBENCH_GPU_FAULT");
    if (value == nullptr || *value == '\0') return parsed;
    parsed.text = value;
    const std::string text = value;
    const auto first = text.find(':');
    const std::string kind = text.substr(0, first);
    try {
      if (kind == "trap") {
        const auto last = text.rfind(':');
        if (first == std::string::npos || last == first) throw Error("expected trap:REGEX:STEP");
        parsed.kind = Fault::Kind::trap;
        parsed.cells = std::regex(text.substr(first + 1, last - first - 1));
        parsed.step = std::stoll(text.substr(last + 1));
      } else if (kind == "oom") {
        if (first == std::string::npos) throw Error("expected oom:REGEX");
        parsed.kind = Fault::Kind::oom;
        parsed.cells = std::regex(text.substr(first + 1));
      } else {
        throw Error("unknown fault '" + kind + "'");
      }
    } catch (const std::exception& error) {
      throw Error(std::string("CROSSBENCH_GPU_FAULT='") + value + "': " + error.what() +
                  " (trap:REGEX:STEP or oom:REGEX; src/engines/cudnn/fault_injection.hpp)");
    }
    return parsed;
  }();
  return fault;
}

std::mutex mutex;
bool armed = false;  // the cell being prepared or run matches the fault; guarded by mutex

}  // namespace

void arm(const std::string& cell_name) {
  const Fault& fault = configured();
  const std::lock_guard lock(mutex);
  armed = fault.kind != Fault::Kind::none && std::regex_search(cell_name, fault.cells);
}

std::string decision() {
  const Fault& fault = configured();
  const std::lock_guard lock(mutex);
  if (!armed) return "";
  if (fault.kind == Fault::Kind::trap)
    return "; fault_injection=trap after step " + std::to_string(fault.step) + " (CROSSBENCH_GPU_FAULT=" + fault.text + ")";
  return "; fault_injection=oom in every device allocation (CROSSBENCH_GPU_FAULT=" + fault.text + ")";
}

void before_allocation(const char* what, std::size_t bytes) {
  const Fault& fault = configured();
  const std::lock_guard lock(mutex);
  if (!armed || fault.kind != Fault::Kind::oom) return;
  throw OutOfMemory("injected fault (CROSSBENCH_GPU_FAULT=" + fault.text + "): cudaMalloc(" + std::to_string(bytes) +
                    " bytes) for " + what + " failed as out of memory");
}

void after_step(long long steps, cudaStream_t stream) {
  const Fault& fault = configured();
  {
    const std::lock_guard lock(mutex);
    if (!armed || fault.kind != Fault::Kind::trap || steps != fault.step) return;
  }
  trap_kernel<<<1, 1, 0, stream>>>();
  try {
    CB_CHECK_CUDA(cudaGetLastError());             // the launch itself
    CB_CHECK_CUDA(cudaStreamSynchronize(stream));  // the trap: a sticky error, which marks the device lost
  } catch (const Error& error) {
    throw Error("injected fault (CROSSBENCH_GPU_FAULT=" + fault.text + ") after step " + std::to_string(steps) + ": " +
                error.what());
  }
  throw Error("injected fault (CROSSBENCH_GPU_FAULT=" + fault.text + "): the trap kernel did not fail");
}

}  // namespace crossbench::cudnn::fault_injection
