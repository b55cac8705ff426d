// NVTX at run time. Two ways to reach a profiler, tried in this order:
//  1. libnvToolsExt.so.1 (NVTX 2, shipped with CUDA up to 12.x and with some
//     framework wheels): dlopen, then nvtxRangePushA / nvtxRangePop.
//  2. NVTX 3 (header-only, in every CUDA toolkit since 10; CUDA 13 ships only
//     this): its inline functions dlopen the library a tool names in
//     NVTX_INJECTION64_PATH (nsys sets it), and do nothing without one.
// Neither present: enabled() is false and a Range costs one branch.
#include "core/nvtx.hpp"

#include <dlfcn.h>

#include <cstdlib>

#if CROSSBENCH_HAVE_NVTX3
#include <nvtx3/nvToolsExt.h>
#endif

namespace crossbench::nvtx {
namespace {

struct Library {
  void* handle = nullptr;
  int (*push)(const char*) = nullptr;
  int (*pop)() = nullptr;
  std::string why;

  Library() {
    handle = dlopen("libnvToolsExt.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      push = reinterpret_cast<int (*)(const char*)>(dlsym(handle, "nvtxRangePushA"));
      pop = reinterpret_cast<int (*)()>(dlsym(handle, "nvtxRangePop"));
      if (push != nullptr && pop != nullptr) return;
      push = nullptr;
      pop = nullptr;
    }
    const char* injection = std::getenv("NVTX_INJECTION64_PATH");
#if CROSSBENCH_HAVE_NVTX3
    if (injection != nullptr && *injection != '\0') {
      push = [](const char* name) { return nvtxRangePushA(name); };
      pop = [] { return nvtxRangePop(); };
      return;
    }
    why = "libnvToolsExt.so.1 not found and no profiler attached (NVTX_INJECTION64_PATH unset)";
#else
    why = injection != nullptr && *injection != '\0'
              ? "libnvToolsExt.so.1 not found and this build has no NVTX 3 header to reach NVTX_INJECTION64_PATH"
              : "libnvToolsExt.so.1 not found and no profiler attached (NVTX_INJECTION64_PATH unset)";
#endif
  }
  ~Library() {
    if (handle != nullptr) dlclose(handle);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
};

// One per process (NVTX's own state is per process), built at the first range.
const Library& library() {
  static const Library instance;
  return instance;
}

}  // namespace

bool enabled() { return library().push != nullptr; }

const std::string& why_disabled() { return library().why; }

Range::Range(std::string_view name) {
  const Library& nvtx = library();
  if (nvtx.push == nullptr) return;
  nvtx.push(std::string(name).c_str());
  pushed_ = true;
}

Range::~Range() {
  if (pushed_) library().pop();
}

}  // namespace crossbench::nvtx
