// What the cuDNN engine supports, decided from the Device alone (label `cpu`:
// no GPU needed), and its place in the registry.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>
#include <utility>

#include "crossbench/engine.hpp"
#include "core/cuda/cudnn_compat.hpp"
#include "engines/cudnn/cudnn_engine.hpp"
#include "engines/cudnn/tensor_compare.hpp"

namespace crossbench {
namespace {

Device gpu(const std::string& architecture, const std::string& model = "test GPU") {
  Device d;
  d.kind = DeviceKind::gpu;
  d.model = model;
  d.architecture = architecture;
  return d;
}

CellSpec cell(Precision p) { return {"cudnn", "alexnet", p, 64, Phase::training, 0}; }

TEST(CudnnSupport, FollowsTheComputeCapability) {
  for (const std::string arch : {"90", "9.0", "80", "120", "12.0"})
    for (Precision p : {Precision::fp32, Precision::tf32, Precision::fp16, Precision::bf16})
      EXPECT_TRUE(cudnn::supports(gpu(arch), cell(p)).supported) << arch << " " << to_string(p);
  // Volta: fp16 tensor cores, no tf32 or bf16 (and no kernels at all in a CUDA 13 build).
  const bool volta_built = compat::oldest_compute_capability() <= 70;
  EXPECT_EQ(cudnn::supports(gpu("70"), cell(Precision::fp32)).supported, volta_built);
  EXPECT_EQ(cudnn::supports(gpu("7.0"), cell(Precision::fp16)).supported, volta_built);
  const Support bf16 = cudnn::supports(gpu("70", "Tesla V100"), cell(Precision::bf16));
  EXPECT_FALSE(bf16.supported);
  EXPECT_NE(bf16.reason.find("Tesla V100"), std::string::npos) << bf16.reason;
  EXPECT_NE(bf16.reason.find("7.0"), std::string::npos) << bf16.reason;
  EXPECT_FALSE(cudnn::supports(gpu("75"), cell(Precision::tf32)).supported);
  // Pascal: fp32 only.
  EXPECT_FALSE(cudnn::supports(gpu("61"), cell(Precision::fp16)).supported);
  EXPECT_EQ(cudnn::supports(gpu("61"), cell(Precision::fp32)).supported, volta_built);
}

// amp-* is the frameworks' recipe (fp32 master weights): the engine refuses it, saying
// why and which precision runs its pure recipe instead, on every GPU.
TEST(CudnnSupport, RefusesTheMixedPrecisionRecipesWithTheReason) {
  for (const auto& [amp, pure] : {std::pair{Precision::amp_bf16, "bf16"}, std::pair{Precision::amp_fp16, "fp16"}}) {
    const Support support = cudnn::supports(gpu("90"), cell(amp));
    EXPECT_FALSE(support.supported);
    EXPECT_EQ(support.reason, mixed_precision_refusal(amp, "cudnn", pure));
    EXPECT_NE(support.reason.find(std::string("precision ") + pure), std::string::npos) << support.reason;
  }
}

// A GPU older than the toolkit's oldest architecture has no kernels in this build: every
// cell is unsupported, and the reason names the build that runs it.
TEST(CudnnSupport, RefusesGpusTheToolkitDropped) {
  const int oldest = compat::oldest_compute_capability();
  EXPECT_EQ(oldest, CUDART_VERSION >= 13000 ? 75 : CUDART_VERSION >= 12000 ? 50 : 35);
  for (const auto& [arch, model] : {std::pair{"35", "Tesla K40c"}, {"52", "GeForce GTX TITAN X"},
                                    {"61", "GeForce GTX 1080"}, {"70", "Tesla V100-SXM2-16GB"}}) {
    const Support fp32 = cudnn::supports(gpu(arch, model), cell(Precision::fp32));
    EXPECT_EQ(fp32.supported, std::stoi(arch) >= oldest) << model;
    if (fp32.supported) continue;
    EXPECT_NE(fp32.reason.find(model), std::string::npos) << fp32.reason;
    EXPECT_NE(fp32.reason.find(std::stoi(arch) < 50 ? "CUDA 11.8 build" : "CUDA 12 build"), std::string::npos)
        << fp32.reason;
  }
  EXPECT_TRUE(cudnn::supports(gpu("75", "Tesla T4"), cell(Precision::fp32)).supported);
}

TEST(CudnnSupport, RefusesCpusAndUnknownArchitectures) {
  Device cpu;
  cpu.kind = DeviceKind::cpu;
  EXPECT_FALSE(cudnn::supports(cpu, cell(Precision::fp32)).supported);
  EXPECT_FALSE(cudnn::supports(gpu(""), cell(Precision::fp32)).supported);
}

TEST(CudnnSupport, IsRegisteredAndBuilt) {
  bool found = false;
  for (const EngineInfo& info : engine_catalog())
    if (info.name == "cudnn") {
      found = true;
      EXPECT_TRUE(info.built) << info.description;
      EXPECT_EQ(info.device_kind, DeviceKind::gpu);
    }
  EXPECT_TRUE(found);
  EXPECT_EQ(native_engine(DeviceKind::gpu), "cudnn");
  auto engine = make_engine("cudnn", gpu("90"), EngineConfig{});
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->name(), "cudnn");
  EXPECT_EQ(engine->device_kind(), DeviceKind::gpu);
  bool has_cudnn_version = false;
  for (const auto& [name, version] : engine_library_versions()) has_cudnn_version |= name == "cudnn_version";
  EXPECT_TRUE(has_cudnn_version);
}

// The agreement check's measure and bounds (tensor_compare.hpp): the largest difference over the
// largest reference value; a NaN or infinity on either side, or another length, is infinitely far.
TEST(CudnnAgreement, RelativeDifferenceIsTheWorstOverTheLargest) {
  using cudnn::relative_difference;
  EXPECT_DOUBLE_EQ(relative_difference({1.0f, -4.0f, 2.0f}, {1.0f, -4.0f, 2.0f}), 0.0);
  EXPECT_DOUBLE_EQ(relative_difference({1.0f, -4.0f, 2.0f}, {1.5f, -4.0f, 1.0f}), 0.25);
  EXPECT_DOUBLE_EQ(relative_difference({0.0f, 0.0f}, {0.0f, 0.5f}), 0.5) << "an all-zero reference: the absolute";
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isinf(relative_difference({1.0f, 2.0f}, {1.0f, nan})));
  EXPECT_TRUE(std::isinf(relative_difference({inf, 2.0f}, {inf, 2.0f})));
  EXPECT_TRUE(std::isinf(relative_difference({1.0f}, {1.0f, 1.0f})));
  EXPECT_TRUE(cudnn::all_finite({0.0f, -1.0f, 3e38f}));
  EXPECT_FALSE(cudnn::all_finite({0.0f, nan}));
  EXPECT_LT(cudnn::plan_agreement_bound(Precision::fp32), cudnn::plan_agreement_bound(Precision::tf32));
  EXPECT_LT(cudnn::plan_agreement_bound(Precision::tf32), cudnn::plan_agreement_bound(Precision::bf16));
  EXPECT_EQ(cudnn::plan_agreement_bound(Precision::fp16), cudnn::plan_agreement_bound(Precision::bf16));
  // As the algorithm cache keeps them: infinity as kFarApart (JSON has none), NaN (not checked) kept.
  EXPECT_EQ(cudnn::cacheable_difference(std::numeric_limits<double>::infinity()), static_cast<float>(cudnn::kFarApart));
  EXPECT_TRUE(std::isnan(cudnn::cacheable_difference(NAN)));
  EXPECT_EQ(cudnn::cacheable_difference(0.0047), 0.0047f);
  EXPECT_EQ(cudnn::difference_text(cudnn::cacheable_difference(std::numeric_limits<double>::infinity())), "inf");
  EXPECT_EQ(cudnn::difference_text(0.00468595), "0.00469");
  EXPECT_GT(cudnn::cacheable_difference(std::numeric_limits<double>::infinity()),
            cudnn::plan_agreement_bound(Precision::bf16)) << "infinitely far is refused";
}

}  // namespace
}  // namespace crossbench
