// NVTX ranges without an NVTX library or profiler: ranges are a no-op (no
// library is loaded, nothing is pushed) and say why they are off.
#include "core/nvtx.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

namespace crossbench {
namespace {

// The test's process has neither libnvToolsExt.so.1 on its library path nor a
// profiler's injection library; ctest runs it outside nsys.
bool nvtx_library_reachable() {
  void* handle = dlopen("libnvToolsExt.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (handle == nullptr) handle = dlopen("libnvToolsExt.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (handle != nullptr) dlclose(handle);
  const char* injection = std::getenv("NVTX_INJECTION64_PATH");
  return handle != nullptr || (injection != nullptr && *injection != '\0');
}

TEST(Nvtx, WithoutTheLibraryRangesAreOffAndSayWhy) {
  if (nvtx_library_reachable()) GTEST_SKIP() << "an NVTX library or profiler is present on this machine";
  EXPECT_FALSE(nvtx::enabled());
  EXPECT_NE(nvtx::why_disabled().find("libnvToolsExt.so.1 not found"), std::string::npos) << nvtx::why_disabled();
  // Nothing was loaded on our behalf.
  EXPECT_EQ(dlopen("libnvToolsExt.so.1", RTLD_NOW | RTLD_NOLOAD), nullptr);
}

TEST(Nvtx, RangesNestAndUnwindWithoutTheLibrary) {
  if (nvtx_library_reachable()) GTEST_SKIP() << "an NVTX library or profiler is present on this machine";
  {
    const nvtx::Range cell("cudnn/resnet50/bf16/b64/training/r0");
    const nvtx::Range stage("timed steps");
    EXPECT_FALSE(nvtx::enabled());
  }
  // A range left by an exception unwinds like any other.
  EXPECT_THROW(
      {
        const nvtx::Range range("prepare");
        throw std::runtime_error("prepare failed");
      },
      std::runtime_error);
  EXPECT_FALSE(nvtx::enabled());
}

}  // namespace
}  // namespace crossbench
