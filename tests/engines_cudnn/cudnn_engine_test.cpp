// The native cuDNN engine on a GPU (label `gpu`; every test skips with a
// reason when no GPU is visible).
//
// Correctness is checked against the oneDNN engine: the GPU machine has no
// oneDNN, so tests/engines_cudnn/reference.json holds oneDNN's OutputCheck
// (loss, gradient norms) of every tiny layer-kind network (batch 4) and of
// every network (batch 2), computed on a CPU by cudnn_reference_generator.
// Tolerances (relative): fp32 1e-4 for layer kinds and 1e-3 for whole
// networks, tf32 1e-2, fp16 and bf16 5e-2.
//
// The reference is found through $CROSSBENCH_CUDNN_REFERENCE, else
// tests/engines_cudnn/reference.json under the working directory (the GPU
// machine runs from the repository root), else under the source directory.
#include <cuda_runtime.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <cstdio>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <numeric>
#include <sstream>

#include <nlohmann/json.hpp>

#include "crossbench/device.hpp"
#include "crossbench/engine.hpp"
#include "crossbench/error.hpp"
#include "crossbench/network.hpp"
#include "crossbench/runner.hpp"
#include "crossbench/telemetry.hpp"
#include "engines/cudnn/cudnn_engine.hpp"
#include "engines/cudnn/cudnn_session.hpp"
#include "engines_cudnn/tiny_networks.hpp"

namespace crossbench {
namespace {

using nlohmann::json;
using cudnn::AlgorithmPolicy;
using cudnn::Layout;

#define SKIP_WITHOUT_GPU()                                                                   \
  do {                                                                                       \
    if (visible_gpu_count() == 0) GTEST_SKIP() << "no GPU visible: the cuDNN engine cannot run here"; \
  } while (false)

const json& reference() {
  static const json data = [] {
    std::vector<std::filesystem::path> candidates;
    if (const char* path = std::getenv("CROSSBENCH_CUDNN_REFERENCE")) candidates.emplace_back(path);
    candidates.emplace_back("tests/engines_cudnn/reference.json");
    candidates.emplace_back(std::filesystem::path(CROSSBENCH_SOURCE_DIR) / "tests/engines_cudnn/reference.json");
    for (const auto& path : candidates) {
      std::ifstream file(path);
      if (file) return json::parse(file);
    }
    return json();
  }();
  return data;
}

struct Setting {
  std::string name;
  Precision precision;
  Layout layout;
  AlgorithmPolicy algorithm;
  double tolerance;  // relative, for the layer-kind networks
};

std::vector<Setting> settings() {
  return {
      {"fp32_nchw", Precision::fp32, Layout::nchw, AlgorithmPolicy::heuristic, 1e-4},
      {"fp32_nhwc", Precision::fp32, Layout::nhwc, AlgorithmPolicy::heuristic, 1e-4},
      {"fp32_nchw_exhaustive", Precision::fp32, Layout::nchw, AlgorithmPolicy::exhaustive, 1e-4},
      {"tf32_nchw", Precision::tf32, Layout::nchw, AlgorithmPolicy::heuristic, 1e-2},
      {"fp16_nhwc", Precision::fp16, Layout::automatic, AlgorithmPolicy::heuristic, 5e-2},
      {"bf16_nhwc", Precision::bf16, Layout::automatic, AlgorithmPolicy::heuristic, 5e-2},
      {"fp16_nchw", Precision::fp16, Layout::nchw, AlgorithmPolicy::heuristic, 5e-2},
  };
}

std::unique_ptr<Engine> engine_for(Precision, Layout layout, AlgorithmPolicy algorithm, bool graphs = false,
                                   bool fuse = true) {
  EngineConfig config;
  config.seed = 42;
  cudnn::CudnnSettings settings;
  settings.layout = layout;
  settings.algorithm = algorithm;
  settings.cuda_graphs = graphs;
  settings.fuse = fuse;
  return make_cudnn_engine(probe_gpu(0, ""), config, settings);
}

// A session of `cell` (seed 42) under the measured search, its choices read from and written to `file`:
// the sessions a test compares share it, so that the later ones replay the earlier one's choices and differ
// only in what `adjust` changes of the engine's settings.
std::unique_ptr<Session> prepare_measured(const Network& network, const CellSpec& cell, const std::filesystem::path& file,
                                          const std::function<void(cudnn::CudnnSettings&)>& adjust) {
  EngineConfig config;
  config.seed = 42;
  cudnn::CudnnSettings settings;
  settings.algorithm = AlgorithmPolicy::exhaustive;
  settings.algorithm_cache_path = file.string();
  adjust(settings);
  return make_cudnn_engine(probe_gpu(0, ""), config, settings)->prepare(network, cell);
}

double relative(double actual, double expected, double floor = 1e-12) {
  return std::abs(actual - expected) / std::max(std::abs(expected), floor);
}

// Compares a check() with a reference entry: loss, total gradient norm and each
// trainable tensor's gradient norm within `tolerance` (relative), the per-tensor
// norms within `tensor_tolerance` (16-bit runs: the gradients of batch-norm
// scale and shift are sums over the batch with cancellation, where 16-bit
// output gradients lose more than 5e-2 on tiny networks).
void expect_matches(const OutputCheck& check, const json& expected, double tolerance, const std::string& what,
                    bool training, double tensor_tolerance = 0, double total_tolerance = 0) {
  if (tensor_tolerance == 0) tensor_tolerance = tolerance;
  ASSERT_TRUE(check.finite) << what << ": non-finite output (loss " << check.loss << ")";
  EXPECT_LE(relative(check.loss, expected["loss"].get<double>()), tolerance)
      << what << ": loss " << check.loss << " vs oneDNN " << expected["loss"].get<double>();
  if (!training) return;
  const auto& norms = expected["gradient_norms"];
  ASSERT_EQ(check.gradient_norms.size(), norms.size()) << what << ": number of trainable tensors";
  const double total = expected["gradient_norm"].get<double>();
  EXPECT_LE(relative(check.gradient_norm, total), std::max(tolerance, total_tolerance))
      << what << ": gradient norm " << check.gradient_norm << " vs oneDNN " << total;
  for (std::size_t i = 0; i < norms.size(); ++i) {
    const double want = norms[i].get<double>();
    // Tensors whose gradient is a vanishing share of the whole are compared against that share.
    EXPECT_LE(relative(check.gradient_norms[i], want, 1e-3 * total), tensor_tolerance)
        << what << ": gradient norm of trainable tensor " << i << ": " << check.gradient_norms[i] << " vs oneDNN "
        << want;
  }
}

// ---- Every layer kind, every precision and layout ------------------------------

class LayerKinds : public ::testing::TestWithParam<std::tuple<std::string, std::size_t>> {};

TEST_P(LayerKinds, AgreeWithOnednn) {
  SKIP_WITHOUT_GPU();
  const auto& [case_name, setting_index] = GetParam();
  const Setting setting = settings()[setting_index];
  ASSERT_FALSE(reference().is_null()) << "tests/engines_cudnn/reference.json not found";
  tiny::Case found;
  for (const tiny::Case& c : tiny::cases())
    if (c.name == case_name) found = c;
  const Network network = found.build();
  auto engine = engine_for(setting.precision, setting.layout, setting.algorithm);
  for (Phase phase : {Phase::training, Phase::inference}) {
    const CellSpec cell{"cudnn", network.name(), setting.precision, tiny::kBatch, phase, 0};
    const std::string what = case_name + " " + setting.name + " " + std::string(to_string(phase));
    std::unique_ptr<Session> session;
    ASSERT_NO_THROW(session = engine->prepare(network, cell)) << what;
    const OutputCheck check = session->check();
    const bool sixteen = setting.precision == Precision::fp16 || setting.precision == Precision::bf16;
    expect_matches(check, reference()["tiny"][case_name][std::string(to_string(phase))], setting.tolerance, what,
                   phase == Phase::training, sixteen ? 2 * setting.tolerance : setting.tolerance);
    // A few steps (fresh dropout masks, running statistics) then check() again: the same answer.
    for (int i = 0; i < 3; ++i) session->step();
    const OutputCheck again = session->check();
    EXPECT_NEAR(again.loss, check.loss, 1e-6 * std::abs(check.loss)) << what << ": check() after steps";
    if (HasFailure()) std::cerr << what << " decisions: " << session->record().decisions << "\n";
  }
}

std::vector<std::tuple<std::string, std::size_t>> layer_kind_params() {
  std::vector<std::tuple<std::string, std::size_t>> params;
  for (const tiny::Case& c : tiny::cases())
    for (std::size_t s = 0; s < settings().size(); ++s) params.emplace_back(c.name, s);
  return params;
}

INSTANTIATE_TEST_SUITE_P(Cudnn, LayerKinds, ::testing::ValuesIn(layer_kind_params()),
                         [](const ::testing::TestParamInfo<LayerKinds::ParamType>& info) {
                           return std::get<0>(info.param) + "_" + settings()[std::get<1>(info.param)].name;
                         });

// ---- Every network at batch 2, fp32: within 1e-3 of oneDNN ---------------------

class Networks : public ::testing::TestWithParam<std::string> {};

// Loss within 1e-3 of oneDNN, and the total gradient norm within 1e-3 (5e-3
// for the ResNets). Per-tensor gradient norms within 1e-2 (5e-2 for the
// ResNets), or three times fp32's own spread where that is larger: measured on
// the H200, the same engine with two sets of convolution algorithms (cuDNN's
// heuristic choice and the measured fastest round differently) disagrees by up
// to 2e-3 (ResNet-50) and 9e-3 (ResNet-101) per tensor, and cuDNN and oneDNN by
// up to 1.3e-2, 2.8e-2 and 3.9e-2 for ResNet-50/101/152: batch-norm over
// batch 2 at initialisation makes the backward pass amplify rounding (gradient
// norms in the thousands). VGG-11's conv1_1 bias gradient (a sum over 10^5
// values with cancellation) differs by 2.3e-3. The loss agrees within 1e-5
// for every network except ResNet-152 (1e-4).
TEST_P(Networks, Fp32AgreesWithOnednnAtBatch2) {
  SKIP_WITHOUT_GPU();
  ASSERT_FALSE(reference().is_null()) << "tests/engines_cudnn/reference.json not found";
  const std::string name = GetParam();
  const Network network = make_network(name);
  auto engine = engine_for(Precision::fp32, Layout::automatic, AlgorithmPolicy::heuristic);
  auto measured = engine_for(Precision::fp32, Layout::automatic, AlgorithmPolicy::exhaustive);
  for (Phase phase : {Phase::training, Phase::inference}) {
    const CellSpec cell{"cudnn", name, Precision::fp32, 2, phase, 0};
    auto session = engine->prepare(network, cell);
    const OutputCheck check = session->check();
    auto measured_session = measured->prepare(network, cell);
    const OutputCheck other = measured_session->check();
    // Fixed bounds (DESIGN.md "Correctness"), never widened by how much two
    // cuDNN algorithm sets disagree on this run: per trainable tensor 2e-2
    // (plain networks: FFT and Winograd weight gradients differed from the
    // implicit-GEMM ones by up to 0.97% on overfeat's smallest tensors, H200)
    // and 5e-2 (ResNets: batch-norm statistics over 2 images amplify
    // rounding; worst 3.9e-2 on resnet152); the whole gradient's norm 2e-3 and 1e-2.
    const bool batch_norm = name.rfind("resnet", 0) == 0;
    const double tensor_bound = batch_norm ? 5e-2 : 2e-2;
    const double total_bound = phase == Phase::training ? (batch_norm ? 1e-2 : 2e-3) : 0;
    double worst_spread = 0, worst_reference = 0;
    const json& expected = reference()["networks"][name][std::string(to_string(phase))];
    for (std::size_t i = 0; i < check.gradient_norms.size() && i < other.gradient_norms.size(); ++i) {
      worst_spread = std::max(worst_spread, relative(check.gradient_norms[i], other.gradient_norms[i], 1e-3 * check.gradient_norm));
      worst_reference = std::max(worst_reference, relative(check.gradient_norms[i],
                                                           expected["gradient_norms"][i].get<double>(),
                                                           1e-3 * check.gradient_norm));
    }
    const std::string what = name + " " + std::string(to_string(phase));
    std::cerr << what << ": loss " << check.loss << " (oneDNN " << expected["loss"].get<double>()
              << "), worst per-tensor difference from oneDNN " << worst_reference
              << ", between two cuDNN algorithm sets " << worst_spread << "\n";
    expect_matches(check, expected, 1e-3, what, phase == Phase::training, tensor_bound, total_bound);
    if (HasFailure()) std::cerr << what << " decisions: " << session->record().decisions << "\n";
    // The measured algorithms (which may include the im2col + GEMM candidates) against oneDNN, with the same bounds.
    const std::string decisions = measured_session->record().decisions;
    if (decisions.find("im2col_gemm") != std::string::npos) std::cerr << what << ": im2col_gemm chosen\n";
    expect_matches(other, expected, 1e-3, what + " (exhaustive)", phase == Phase::training, tensor_bound,
                   total_bound);
    if (HasFailure()) std::cerr << what << " exhaustive decisions: " << decisions << "\n";
  }
}

INSTANTIATE_TEST_SUITE_P(Cudnn, Networks, ::testing::ValuesIn(network_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// Every network in every 16-bit precision and tf32 at batch 8: prepares, steps and gives finite results.
class NetworkPrecisions : public ::testing::TestWithParam<std::tuple<std::string, Precision>> {};

TEST_P(NetworkPrecisions, StepsAndStaysFinite) {
  SKIP_WITHOUT_GPU();
  const auto& [name, precision] = GetParam();
  const Network network = make_network(name);
  auto engine = engine_for(precision, Layout::automatic, AlgorithmPolicy::heuristic);
  const OutputCheck reference_fp32 = [&] {
    auto fp32 = engine_for(Precision::fp32, Layout::automatic, AlgorithmPolicy::heuristic);
    return fp32->prepare(network, {"cudnn", name, Precision::fp32, 8, Phase::training, 0})->check();
  }();
  auto session = engine->prepare(network, {"cudnn", name, precision, 8, Phase::training, 0});
  for (int i = 0; i < 2; ++i) session->step();
  const OutputCheck check = session->check();
  EXPECT_TRUE(check.finite) << name << " " << to_string(precision);
  // Whole deep networks in 16 bits drift further than one layer: a loose bound on the loss.
  EXPECT_LE(relative(check.loss, reference_fp32.loss), 0.1) << name << " " << to_string(precision) << ": loss "
                                                             << check.loss << " vs fp32 " << reference_fp32.loss;
}

INSTANTIATE_TEST_SUITE_P(
    Cudnn, NetworkPrecisions,
    ::testing::Combine(::testing::Values("alexnet", "googlenet", "resnet50", "vgg11", "overfeat"),
                       ::testing::Values(Precision::tf32, Precision::fp16, Precision::bf16)),
    [](const ::testing::TestParamInfo<NetworkPrecisions::ParamType>& info) {
      return std::get<0>(info.param) + "_" + std::string(to_string(std::get<1>(info.param)));
    });

// seed2017's cells as the yardstick runs them (batch 64, measured search,
// CUDA graphs) in tf32 and bf16, held to fp32 with the bounds DESIGN.md
// "Correctness" states: the mean loss, the whole gradient's norm, and every
// trainable tensor's gradient norm relative to the whole's (a tensor's share
// is what moves the weights).
class SeedCellsAgainstFp32 : public ::testing::TestWithParam<std::tuple<std::string, Precision>> {};

TEST_P(SeedCellsAgainstFp32, WithinTheStatedBounds) {
  SKIP_WITHOUT_GPU();
  const auto& [name, precision] = GetParam();
  const Network network = make_network(name);
  const OutputCheck want =
      engine_for(Precision::fp32, Layout::automatic, AlgorithmPolicy::heuristic)
          ->prepare(network, {"cudnn", name, Precision::fp32, 64, Phase::training, 0})
          ->check();
  auto session = engine_for(precision, Layout::automatic, AlgorithmPolicy::exhaustive, true)
                     ->prepare(network, {"cudnn", name, precision, 64, Phase::training, 0});
  const OutputCheck got = session->check();
  const bool tf32 = precision == Precision::tf32;
  const bool resnet = name.rfind("resnet", 0) == 0;
  // Each tensor's gradient norm against that tensor's own fp32 norm (not a share of the total, under
  // which most of a ResNet's small tensors could be entirely wrong and pass). Measured on the H200
  // (bench/results/2026-12-01/fusion/call2/tests.log), worst tensor over the networks: tf32 8.3e-3,
  // bf16 1.1e-2 (googlenet); ResNets tf32 0.246 (resnet101), bf16 0.370 (resnet152): batch-norm
  // amplifies rounding with depth, as fp32 itself does between thread counts (DESIGN.md). Bounds:
  // about 3x the measured worst, and for the ResNets the agreement bound (0.5) that still fails a
  // tensor left at zero (error 1); tf32 ResNets 0.4 (1.6x their measured worst).
  const double loss_bound = tf32 ? 1e-2 : 3e-2, total_bound = tf32 ? 2e-2 : 5e-2;
  const double tensor_bound = tf32 ? (resnet ? 0.4 : 2.5e-2) : (resnet ? 0.5 : 5e-2);
  const std::string what = name + " " + std::string(to_string(precision)) + " batch 64";
  ASSERT_TRUE(got.finite) << what;
  ASSERT_EQ(got.gradient_norms.size(), want.gradient_norms.size()) << what;
  double worst_tensor = 0;
  for (std::size_t i = 0; i < want.gradient_norms.size(); ++i) {
    // A tensor whose fp32 gradient is exactly zero (none in these networks) would divide by zero: it must stay zero.
    const double own_error = want.gradient_norms[i] > 0
                                 ? std::abs(got.gradient_norms[i] - want.gradient_norms[i]) / want.gradient_norms[i]
                                 : std::abs(got.gradient_norms[i]);
    worst_tensor = std::max(worst_tensor, own_error);
    EXPECT_LE(own_error, tensor_bound) << what << ": trainable tensor " << i << " gradient norm "
                                         << got.gradient_norms[i] << " vs fp32 " << want.gradient_norms[i];
  }
  std::cerr << what << ": loss " << got.loss << " vs fp32 " << want.loss << " (" << relative(got.loss, want.loss)
            << "), gradient norm " << got.gradient_norm << " vs " << want.gradient_norm << " ("
            << relative(got.gradient_norm, want.gradient_norm) << "), worst tensor (own norm) " << worst_tensor << "\n";
  EXPECT_LE(relative(got.loss, want.loss), loss_bound) << what;
  EXPECT_LE(relative(got.gradient_norm, want.gradient_norm), total_bound) << what;
}

INSTANTIATE_TEST_SUITE_P(
    Cudnn, SeedCellsAgainstFp32,
    ::testing::Combine(::testing::Values("alexnet", "overfeat", "vgg11", "googlenet", "resnet50", "resnet101",
                                         "resnet152"),
                       ::testing::Values(Precision::tf32, Precision::bf16)),
    [](const ::testing::TestParamInfo<SeedCellsAgainstFp32::ParamType>& info) {
      return std::get<0>(info.param) + "_" + std::string(to_string(std::get<1>(info.param)));
    });

// ---- Fused training batch-norm (bn_relu, bn_add_relu) against the unfused ops ----

// Two bottleneck-like blocks: bn_relu groups, a bn_add_relu whose residual is
// a relu output (built before the group's batch-norm), and one whose residual
// is a projection's batch-norm built after it (as in a ResNet's first block
// of a stage), at 64 and 128 channels over 8x8 maps.
Network residual_network() {
  NetworkBuilder b("tiny-residual", {16, 8, 8});
  int x = b.convolution(b.input(), 64, 3, 1, 1, false, "conv0");
  x = b.relu(b.batch_norm(x, "bn0"), "relu0");
  int y = b.relu(b.batch_norm(b.convolution(x, 64, 3, 1, 1, false, "conv1"), "bn1"), "relu1");
  y = b.batch_norm(b.convolution(y, 64, 1, 1, 0, false, "conv2"), "bn2");
  x = b.relu(b.add(y, x, "add1"), "relu2");
  y = b.relu(b.batch_norm(b.convolution(x, 128, 3, 2, 1, false, "conv3"), "bn3"), "relu3");
  y = b.batch_norm(b.convolution(y, 128, 1, 1, 0, false, "conv4"), "bn4");
  const int projection = b.batch_norm(b.convolution(x, 128, 1, 2, 0, false, "projection"), "bn_projection");
  x = b.relu(b.add(y, projection, "add2"), "relu4");
  x = b.flatten(b.avg_pool(x, 4, 1, 0, false, "pool"), "flatten");
  return b.finish_with_loss(b.fully_connected(x, 10, true, "fc"));
}

struct FusionSetting {
  std::string name;
  Precision precision;
  Layout layout;
  double bound;           // element error over the tensor's largest |value|: logits, running statistics
  double gradient_bound;  // ... and parameter gradients
};

// Bounds, element by element against the tensor's largest |value|: the fused
// kernels reduce in another order than cuDNN's batch-norm (fp32 rounding,
// ~1e-6 of the statistics), which every later layer carries. fp32 1e-4
// (CudaGraphReplayMatchesEagerStepsElementByElement holds gradients to 1e-3
// for reordered sums alone); tf32 2e-3 (a convolution rounds its inputs to
// 10 mantissa bits: an input that differs by 1e-6 may round one tf32 ulp,
// 2^-11, apart); bf16 2e-2 for logits and running statistics (a normalised
// output that differs in fp32 rounds one bf16 ulp, 2^-8 = 3.9e-3, apart; the
// unfused add rounds the batch-norm's output and then the sum, the fused one
// the sum alone). bf16 gradients 0.3: measured on the H200 the worst was 0.237
// (bench/results/2026-12-02/bnfuse, 0.07 for the first convolution): each
// bf16 rounding of a gradient is carried through batch-norm's backward, which
// subtracts two projections from g and leaves a dx much smaller than g (the
// kernels' own bf16 arithmetic is held to a double-precision reference within
// one rounding by CudnnKernels.FusedBatchNormReluMatchesTheHost; fp32 and tf32
// cells of this test agree within 8.6e-7 and 5.4e-4).
std::vector<FusionSetting> fusion_settings() {
  return {{"fp32_nhwc", Precision::fp32, Layout::nhwc, 1e-4, 1e-4},
          {"tf32", Precision::tf32, Layout::automatic, 2e-3, 2e-3},
          {"bf16", Precision::bf16, Layout::automatic, 2e-2, 0.3}};
}

class BatchNormFusion : public ::testing::TestWithParam<std::size_t> {};

// A cell's sessions with fusion on and off, one training step taken by each.
struct FusedAndUnfused {
  std::unique_ptr<Session> fused_session, unfused_session;
  cudnn::CudnnSession* fused = nullptr;
  cudnn::CudnnSession* unfused = nullptr;
};

FusedAndUnfused prepare_both(const Network& network, const FusionSetting& setting, std::int64_t batch) {
  const CellSpec cell{"cudnn", network.name(), setting.precision, batch, Phase::training, 0};
  FusedAndUnfused both;
  both.fused_session =
      engine_for(setting.precision, setting.layout, AlgorithmPolicy::heuristic, false, true)->prepare(network, cell);
  both.unfused_session =
      engine_for(setting.precision, setting.layout, AlgorithmPolicy::heuristic, false, false)->prepare(network, cell);
  both.fused = dynamic_cast<cudnn::CudnnSession*>(both.fused_session.get());
  both.unfused = dynamic_cast<cudnn::CudnnSession*>(both.unfused_session.get());
  return both;
}

// The worst |error| over the tensor's largest |value|; counts elements beyond `bound` of it into `mismatches`.
double worst_error(const std::vector<float>& want, const std::vector<float>& got, double bound,
                   std::size_t& mismatches, std::size_t& first) {
  double largest = 0, worst = 0;
  for (float v : want) largest = std::max(largest, static_cast<double>(std::abs(v)));
  mismatches = 0;
  first = 0;
  for (std::size_t i = 0; i < want.size() && i < got.size(); ++i) {
    const double error = std::abs(static_cast<double>(want[i]) - static_cast<double>(got[i]));
    worst = std::max(worst, error);
    if (!(error <= bound * largest + 1e-30) && mismatches++ == 0) first = i;
  }
  return largest > 0 ? worst / largest : worst;
}

// Unfused (want) against fused (got), element by element within `bound` of the
// tensor's largest |value|; the worst error kept in `worst_overall`.
void expect_close(const std::vector<float>& want, const std::vector<float>& got, const std::string& what,
                  double bound, double& worst_overall) {
  ASSERT_EQ(want.size(), got.size()) << what;
  std::size_t mismatches = 0, first = 0;
  const double worst = worst_error(want, got, bound, mismatches, first);
  worst_overall = std::max(worst_overall, worst);
  EXPECT_EQ(mismatches, 0u) << what << ": " << mismatches << " of " << want.size() << " elements differ beyond "
                            << bound << " of the largest; first at " << first << " (" << want[first] << " unfused, "
                            << got[first] << " fused); worst " << worst;
}

// After one step each: the logits, and every parameter's gradient.
void expect_logits_and_gradients_match(const FusedAndUnfused& both, const FusionSetting& setting,
                                       const std::string& what, double& worst_overall) {
  expect_close(both.unfused->logits_storage(), both.fused->logits_storage(), what + " logits", setting.bound,
               worst_overall);
  ASSERT_EQ(both.fused->parameter_count(), both.unfused->parameter_count()) << what;
  for (std::size_t p = 0; p < both.fused->parameter_count(); ++p)
    expect_close(both.unfused->gradient_storage(p), both.fused->gradient_storage(p),
                 what + " gradient of trainable tensor " + std::to_string(p), setting.gradient_bound, worst_overall);
}

// 16-bit and tf32 cells, against an fp32 reference (the same network and
// synthetic weights, NHWC, unfused): the fused step is at least as close to it
// as the unfused one, tensor by tensor, so the bounds measure rounding, not a fault.
void expect_no_further_from_fp32(const Network& network, std::int64_t batch, const FusedAndUnfused& both,
                                 const FusionSetting& setting, const std::string& what) {
  if (setting.precision == Precision::fp32) return;
  const CellSpec reference_cell{"cudnn", network.name(), Precision::fp32, batch, Phase::training, 0};
  const auto reference_session =
      engine_for(Precision::fp32, Layout::nhwc, AlgorithmPolicy::heuristic, false, false)->prepare(network, reference_cell);
  auto* reference = dynamic_cast<cudnn::CudnnSession*>(reference_session.get());
  ASSERT_NE(reference, nullptr);
  reference->step();
  ASSERT_EQ(reference->parameter_count(), both.fused->parameter_count()) << what;
  for (std::size_t p = 0; p < both.fused->parameter_count(); ++p) {
    std::size_t ignored = 0, first = 0;
    const std::vector<float> want = reference->gradient_storage(p);
    const double fused_error = worst_error(want, both.fused->gradient_storage(p), 1.0, ignored, first);
    const double unfused_error = worst_error(want, both.unfused->gradient_storage(p), 1.0, ignored, first);
    // 1.5x and 1e-3: the two orders of rounding differ tensor by tensor; neither is the better one always.
    EXPECT_LE(fused_error, 1.5 * unfused_error + 1e-3)
        << what << " gradient of trainable tensor " << p << " against fp32: fused " << fused_error << ", unfused "
        << unfused_error;
  }
}

// One training step each, then the logits and every gradient element by
// element (and 16-bit and tf32 cells against fp32); returns the worst error.
double step_both_and_compare(const Network& network, std::int64_t batch, const FusedAndUnfused& both,
                             const FusionSetting& setting, const std::string& what) {
  both.fused->step();
  both.unfused->step();
  double worst_overall = 0;
  expect_logits_and_gradients_match(both, setting, what, worst_overall);
  expect_no_further_from_fp32(network, batch, both, setting, what);
  return worst_overall;
}

// One training step (running statistics updated) with fusion on and off:
// logits, every parameter's gradient (a convolution before a group: the
// group's input gradient; a residual branch's convolution: the residual's
// gradient; gamma and beta) and every running mean and variance, element by
// element. The saved statistics, y and each gradient of the kernels
// themselves are held to a host reference in double precision by
// CudnnKernels.FusedBatchNormReluMatchesTheHost.
TEST_P(BatchNormFusion, MatchesTheUnfusedOpsElementByElement) {
  SKIP_WITHOUT_GPU();
  const FusionSetting setting = fusion_settings()[GetParam()];
  const Network network = residual_network();
  const std::string what = network.name() + " " + setting.name;
  FusedAndUnfused both = prepare_both(network, setting, 16);
  ASSERT_NE(both.fused, nullptr);
  ASSERT_NE(both.unfused, nullptr);
  const std::string fused_decisions = both.fused->record().decisions;
  const std::string unfused_decisions = both.unfused->record().decisions;
  EXPECT_NE(fused_decisions.find("bn_add_relu:2"), std::string::npos) << what << ": " << fused_decisions;
  EXPECT_NE(fused_decisions.find("bn_relu:3"), std::string::npos) << what << ": " << fused_decisions;
  EXPECT_NE(unfused_decisions.find("fusions=none;refused="), std::string::npos) << unfused_decisions;
  EXPECT_NE(unfused_decisions.find("(fusion turned off (--fuse false))"), std::string::npos) << unfused_decisions;
  EXPECT_LT(both.fused->op_count(), both.unfused->op_count()) << what << ": a group is one op each way";
  double worst_overall = step_both_and_compare(network, 16, both, setting, what);
  ASSERT_EQ(both.fused->step_state_count(), both.unfused->step_state_count()) << what;
  for (std::size_t t = 0; t < both.fused->step_state_count(); ++t)
    expect_close(both.unfused->step_state_storage(t), both.fused->step_state_storage(t),
                 what + (t % 2 == 0 ? " running mean " : " running variance ") + std::to_string(t / 2), setting.bound,
                 worst_overall);
  // check() leaves the running statistics as they are, fused or not, and agrees on the loss.
  const std::vector<float> running_before = both.fused->step_state_storage(0);
  const OutputCheck fused_check = both.fused->check(), unfused_check = both.unfused->check();
  EXPECT_EQ(both.fused->step_state_storage(0), running_before) << what;
  EXPECT_LE(relative(fused_check.loss, unfused_check.loss), setting.bound) << what;
  std::cerr << what << ": worst element error over its tensor's largest |value| " << worst_overall << " (bounds "
            << setting.bound << ", gradients " << setting.gradient_bound << "); ops " << both.fused->op_count() << " fused, " << both.unfused->op_count()
            << " unfused\n";
}

// ResNet-50 (batch 8) as the benchmark runs it: every bn_relu and
// bn_add_relu fused. Its first batch-norm sees the same input either way:
// its running statistics element by element, with the bound above; deeper
// layers carry the reordering's rounding through 50 batch-normalised layers
// (at batch 8, as between two cuDNN algorithm sets: Networks above), so
// the loss within the bound, the whole gradient's norm within 10x it, and
// the worst tensor is reported.
TEST_P(BatchNormFusion, ResNet50AgreesWithTheUnfusedOps) {
  SKIP_WITHOUT_GPU();
  const FusionSetting setting = fusion_settings()[GetParam()];
  const Network network = make_network("resnet50");
  const std::string what = "resnet50 " + setting.name;
  FusedAndUnfused both = prepare_both(network, setting, 8);
  ASSERT_NE(both.fused, nullptr);
  ASSERT_NE(both.unfused, nullptr);
  const std::string decisions = both.fused->record().decisions;
  EXPECT_NE(decisions.find("bn_add_relu:16"), std::string::npos) << decisions;
  EXPECT_NE(decisions.find("bn_relu:33"), std::string::npos) << decisions;
  both.fused->step();
  both.unfused->step();
  for (std::size_t t : {std::size_t{0}, std::size_t{1}}) {  // bn1's running mean and variance
    std::size_t mismatches = 0, first = 0;
    const double worst = worst_error(both.unfused->step_state_storage(t), both.fused->step_state_storage(t),
                                     setting.bound, mismatches, first);
    EXPECT_EQ(mismatches, 0u) << what << " bn1 running statistic " << t << ": worst " << worst;
  }
  const OutputCheck fused_check = both.fused->check(), unfused_check = both.unfused->check();
  ASSERT_TRUE(fused_check.finite) << what;
  double worst_tensor = 0;
  for (std::size_t i = 0; i < fused_check.gradient_norms.size(); ++i)
    worst_tensor = std::max(worst_tensor, relative(fused_check.gradient_norms[i], unfused_check.gradient_norms[i]));
  std::cerr << what << ": loss " << fused_check.loss << " fused, " << unfused_check.loss << " unfused ("
            << relative(fused_check.loss, unfused_check.loss) << "); gradient norm "
            << relative(fused_check.gradient_norm, unfused_check.gradient_norm) << "; worst tensor norm "
            << worst_tensor << "\n";
  EXPECT_LE(relative(fused_check.loss, unfused_check.loss), setting.bound) << what;
  EXPECT_LE(relative(fused_check.gradient_norm, unfused_check.gradient_norm), 10 * setting.bound) << what;
}

INSTANTIATE_TEST_SUITE_P(Cudnn, BatchNormFusion, ::testing::Range<std::size_t>(0, 3),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return fusion_settings()[info.param].name;
                         });

// ---- engine.conv_statistics: the fused batch-norms' statistics from the convolution before them ----

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}


// One training cell prepared with engine.conv_statistics on and one off (--algo exhaustive; one algorithm cache
// file, the off session first, so that the on session replays every plain choice and only searches its
// statistics graphs), from the same seed. Each convolution asked says how its batch-norm's statistics come:
// "+statistics(for BN)" or "[statistics for BN: why not]".
struct StatisticsAndOwnPass {
  std::unique_ptr<Session> with_session, without_session;
  cudnn::CudnnSession* with = nullptr;
  cudnn::CudnnSession* without = nullptr;
  std::size_t taken = 0, not_taken = 0;
};

StatisticsAndOwnPass prepare_with_and_without_statistics(const Network& network, const FusionSetting& setting,
                                                         std::int64_t batch, const std::filesystem::path& file) {
  const CellSpec cell{"cudnn", network.name(), setting.precision, batch, Phase::training, 0};
  const auto prepare = [&](bool statistics) {
    return prepare_measured(network, cell, file, [&](cudnn::CudnnSettings& settings) {
      settings.layout = setting.layout;
      settings.conv_statistics = statistics;
    });
  };
  StatisticsAndOwnPass both;
  both.without_session = prepare(false);
  both.with_session = prepare(true);
  both.with = dynamic_cast<cudnn::CudnnSession*>(both.with_session.get());
  both.without = dynamic_cast<cudnn::CudnnSession*>(both.without_session.get());
  if (both.with != nullptr) {
    both.taken = occurrences(both.with->record().decisions, "+statistics(for ");
    both.not_taken = occurrences(both.with->record().decisions, "[statistics for ");
  }
  return both;
}

class ConvolutionStatistics : public ::testing::TestWithParam<std::size_t> {};

// BatchNormFusion's settings and fp16: cuDNN 9.14 on an H100 runs the statistics graph (genstats) in fp16 io only
// (bench/results/2026-12-13/call74h, gpu_genstats_forms), so fp16 is the precision where it is taken on Hopper.
// fp16's bounds are bf16's (fp16 carries three more mantissa bits, so its rounding is the smaller) until measured.
std::vector<FusionSetting> statistics_settings() {
  std::vector<FusionSetting> settings = fusion_settings();
  settings.push_back({"fp16", Precision::fp16, Layout::automatic, 2e-2, 0.3});
  return settings;
}

// The residual test network (batch 16): every fused batch-norm after a convolution is asked; the logits,
// every gradient and every running statistic of one step element by element within BatchNormFusion's
// bounds (the statistics differ only in how they are summed: cuDNN's fp32 Σy and Σy², finalized as
// E[y²] - E[y]², against our Welford merge); a second step agrees too (the sums were left 0: a plan that
// adds into them does not count the first step twice); check() changes no running statistic.
TEST_P(ConvolutionStatistics, MatchesOurStatisticsPassElementByElement) {
  SKIP_WITHOUT_GPU();
  if (!cudnn::graph_api_available()) GTEST_SKIP() << cudnn::graph_api_unavailable_reason();
  const FusionSetting setting = statistics_settings()[GetParam()];
  const Network network = residual_network();
  const std::string what = network.name() + " " + setting.name + " conv_statistics";
  const std::filesystem::path file = std::filesystem::temp_directory_path() /
                                     ("cb_convstats_" + std::to_string(::getpid()) + "_" + setting.name + ".json");
  std::filesystem::remove(file);
  StatisticsAndOwnPass both = prepare_with_and_without_statistics(network, setting, 16, file);
  ASSERT_NE(both.with, nullptr);
  ASSERT_NE(both.without, nullptr);
  const std::string decisions = both.with->record().decisions;
  EXPECT_GT(both.taken + both.not_taken, 0u) << what << ": every convolution before a fused batch-norm is asked: "
                                             << decisions;
  // The session without asks no convolution (its recipe's text may say "batch-norm statistics": pure-bf16's does).
  EXPECT_EQ(occurrences(both.without->record().decisions, "+statistics(for ") +
                occurrences(both.without->record().decisions, "[statistics for "),
            0u)
      << both.without->record().decisions;
  std::cerr << what << ": " << both.taken << " batch-norms take their statistics from the convolution, "
            << both.not_taken << " do not";
  if (const std::size_t at = decisions.find("[statistics for "); at != std::string::npos)
    std::cerr << " (first: " << decisions.substr(at, 200) << ")";
  std::cerr << "\n";
  FusedAndUnfused pair;  // "fused": with the statistics; "unfused": our pass
  pair.fused = both.with;
  pair.unfused = both.without;
  double worst_overall = 0;
  for (int step = 1; step <= 2; ++step) {
    both.with->step();
    both.without->step();
    const std::string at_step = what + " step " + std::to_string(step);
    expect_logits_and_gradients_match(pair, setting, at_step, worst_overall);
    ASSERT_EQ(both.with->step_state_count(), both.without->step_state_count()) << what;
    for (std::size_t t = 0; t < both.with->step_state_count(); ++t)
      expect_close(both.without->step_state_storage(t), both.with->step_state_storage(t),
                   at_step + (t % 2 == 0 ? " running mean " : " running variance ") + std::to_string(t / 2),
                   setting.bound, worst_overall);
  }
  const std::vector<float> running_before = both.with->step_state_storage(0);
  const OutputCheck with_check = both.with->check(), without_check = both.without->check();
  EXPECT_EQ(both.with->step_state_storage(0), running_before) << what << ": check() leaves the model as it is";
  EXPECT_TRUE(with_check.finite) << what;
  EXPECT_LE(relative(with_check.loss, without_check.loss), setting.bound) << what;
  std::cerr << what << ": worst element error over its tensor's largest |value| " << worst_overall << " (bounds "
            << setting.bound << ", gradients " << setting.gradient_bound << ")\n";
  std::filesystem::remove(file);
  std::filesystem::remove(file.string() + ".lock");
}

// ResNet-50 as the benchmark runs it: the loss within the bound and the whole gradient's norm within 10x it
// (as BatchNormFusion.ResNet50AgreesWithTheUnfusedOps), and how many of its 49 convolutions before a fused
// batch-norm took the statistics graph. Batch 8, and 64 in fp16, where Hopper runs the statistics graph and it
// is taken (at batch 8 no plan beats the plain forward plus our pass; at 64, call 79 checked 10 that did).
TEST_P(ConvolutionStatistics, ResNet50AgreesWithOurStatisticsPass) {
  SKIP_WITHOUT_GPU();
  if (!cudnn::graph_api_available()) GTEST_SKIP() << cudnn::graph_api_unavailable_reason();
  const FusionSetting setting = statistics_settings()[GetParam()];
  const Network network = make_network("resnet50");
  const std::string what = "resnet50 " + setting.name + " conv_statistics";
  const std::filesystem::path file = std::filesystem::temp_directory_path() /
                                     ("cb_convstats50_" + std::to_string(::getpid()) + "_" + setting.name + ".json");
  std::filesystem::remove(file);
  const std::int64_t batch = setting.precision == Precision::fp16 ? 64 : 8;
  StatisticsAndOwnPass both = prepare_with_and_without_statistics(network, setting, batch, file);
  ASSERT_NE(both.with, nullptr);
  ASSERT_NE(both.without, nullptr);
  // 49 fused batch-norms (bn_relu 33, bn_add_relu 16), each after a convolution it alone reads; the 4
  // projection shortcuts' batch-norms are no group's (cuDNN's batch-norm), so not asked.
  EXPECT_EQ(both.taken + both.not_taken, 49u) << what << ": " << both.with->record().decisions;
  both.with->step();
  both.without->step();
  const OutputCheck with_check = both.with->check(), without_check = both.without->check();
  ASSERT_TRUE(with_check.finite) << what;
  std::cerr << what << " batch " << batch << ": " << both.taken
            << " of 49 batch-norms take their statistics from the convolution; loss "
            << with_check.loss << " with, " << without_check.loss << " without ("
            << relative(with_check.loss, without_check.loss) << "); gradient norm "
            << relative(with_check.gradient_norm, without_check.gradient_norm) << "\n";
  EXPECT_LE(relative(with_check.loss, without_check.loss), setting.bound) << what;
  EXPECT_LE(relative(with_check.gradient_norm, without_check.gradient_norm), 10 * setting.bound) << what;
  std::filesystem::remove(file);
  std::filesystem::remove(file.string() + ".lock");
}

INSTANTIATE_TEST_SUITE_P(Cudnn, ConvolutionStatistics, ::testing::Range<std::size_t>(0, 4),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return statistics_settings()[info.param].name;
                         });

// ---- Inference conv_bn_add_relu: the residual add and relu in the convolution ----

// ResNet inference (batch 8, --algo exhaustive, one algorithm cache shared by
// the two sessions so that their plain convolutions replay the same choices)
// with fusion on and off. tf32 and bf16: every block's end is a
// conv_bn_add_relu group, lowered either as the Graph API graph conv → +bias →
// +residual → relu where it measured clearly faster, or as the unfused ops in
// the convolution's op (its bias, then our add+relu kernel), the decisions
// naming which and why; the logits element by element within the whole-network
// bounds (tf32 1e-2, bf16 5e-2 of the largest), and against an fp32 reference
// (NCHW, unfused) the fused error no worse than 1.5x the unfused one + 1e-3.
// fp32 (strict, NCHW): the group is refused with its reason and add_relu ends
// each block as before (1e-3: only the batch-norm folding differs).
class ResidualConvolutionFusion : public ::testing::TestWithParam<std::tuple<std::string, Precision>> {};

TEST_P(ResidualConvolutionFusion, MatchesTheUnfusedOps) {
  SKIP_WITHOUT_GPU();
  const auto& [network_name, precision] = GetParam();
  const Network network = make_network(network_name);
  const std::string what = network_name + " " + std::string(to_string(precision));
  const std::size_t blocks = network_name == "resnet50" ? 16 : 33;
  const std::int64_t batch = 8;
  const CellSpec cell{"cudnn", network_name, precision, batch, Phase::inference, 0};
  const std::filesystem::path file = std::filesystem::temp_directory_path() /
                                     ("cb_convadd_" + std::to_string(::getpid()) + "_" + network_name + "_" +
                                      std::string(to_string(precision)) + ".json");
  std::filesystem::remove(file);
  const auto prepare = [&](bool fuse) {
    return prepare_measured(network, cell, file, [&](cudnn::CudnnSettings& settings) { settings.fuse = fuse; });
  };
  const auto fused_session = prepare(true);
  const auto unfused_session = prepare(false);
  auto* fused = dynamic_cast<cudnn::CudnnSession*>(fused_session.get());
  auto* unfused = dynamic_cast<cudnn::CudnnSession*>(unfused_session.get());
  ASSERT_NE(fused, nullptr);
  ASSERT_NE(unfused, nullptr);
  const std::string decisions = fused->record().decisions;
  const std::string blocks_text = std::to_string(blocks);
  if (precision == Precision::fp32) {
    EXPECT_NE(decisions.find("add_relu:" + blocks_text), std::string::npos) << what << ": " << decisions;
    EXPECT_NE(decisions.find("conv_bn_add_relu[layer1.0.downsample.conv+layer1.0.downsample.bn+layer1.0.add+"
                             "layer1.0.relu3](strict fp32 or NCHW: "),
              std::string::npos)
        << what << ": " << decisions;
    EXPECT_EQ(occurrences(decisions, "+add+relu"), 0u) << what << ": " << decisions;
  } else {
    EXPECT_NE(decisions.find("conv_bn_add_relu:" + blocks_text), std::string::npos) << what << ": " << decisions;
    const std::size_t graphs = occurrences(decisions, "+bias+add+relu");
    const std::size_t unfused_adds = occurrences(decisions, "+add+relu(kernel, unfused: ");
    EXPECT_EQ(graphs + unfused_adds, blocks) << what << ": each group's convolution names how it adds: " << decisions;
    const std::size_t first_unfused = decisions.find("+add+relu(kernel, unfused: ");
    std::cerr << what << ": " << graphs << " of " << blocks << " residual adds in the fused graph, " << unfused_adds
              << " unfused"
              << (first_unfused == std::string::npos ? std::string()
                                                     : " (first: " + decisions.substr(first_unfused, 240) + ")")
              << "\n";
    EXPECT_LT(fused->op_count(), unfused->op_count()) << what;
  }
  EXPECT_NE(unfused->record().decisions.find("fusions=none;refused="), std::string::npos) << unfused->record().decisions;
  // The identical convolutions of a stage's blocks share one Graph API graph (GraphConvolutionCache): at
  // least one request in two is answered with a graph an earlier layer created.
  if (cudnn::graph_api_available()) {
    const std::size_t at = decisions.find(" graph_api_graphs=");
    ASSERT_NE(at, std::string::npos) << what << ": " << decisions;
    int graphs = 0, shared = 0;
    ASSERT_EQ(std::sscanf(decisions.c_str() + at, " graph_api_graphs=%d(shared %d)", &graphs, &shared), 2)
        << decisions.substr(at, 60);
    EXPECT_GT(graphs, 0) << what;
    EXPECT_GE(shared, static_cast<int>(blocks) / 2) << what << ": " << decisions.substr(at, 60);
    // And what they cost: creation and builds [s], the runtime-compiled builds a part of the builds.
    const std::size_t setup_at = decisions.find(" graph_api_setup=", at);
    ASSERT_NE(setup_at, std::string::npos) << what << ": " << decisions.substr(at, 120);
    double create_s = -1, build_s = -1, runtime_s = -1;
    int built = -1, runtime_built = -1;
    ASSERT_EQ(std::sscanf(decisions.c_str() + setup_at, " graph_api_setup=create:%lfs,build:%d/%lfs,runtime_compiled:%d/%lfs",
                          &create_s, &built, &build_s, &runtime_built, &runtime_s),
              5)
        << decisions.substr(setup_at, 120);
    EXPECT_GT(create_s, 0) << what;
    EXPECT_GT(built, 0) << what << ": every chosen graph plan is built";
    EXPECT_GE(build_s, runtime_s) << what;
    EXPECT_LE(runtime_built, built) << what;
    // The fused residual groups of tf32 and bf16 are runtime-compiled graphs, each built at least once.
    if (precision != Precision::fp32 && occurrences(decisions, "+bias+add+relu") > 0) EXPECT_GT(runtime_built, 0) << what;
  }
  fused->step();
  unfused->step();
  const std::vector<float> fused_logits = fused->logits_storage(), unfused_logits = unfused->logits_storage();
  ASSERT_EQ(fused_logits.size(), unfused_logits.size()) << what;
  const double bound = precision == Precision::fp32 ? 1e-3 : precision == Precision::tf32 ? 1e-2 : 5e-2;
  std::size_t mismatches = 0, first = 0;
  const double worst = worst_error(unfused_logits, fused_logits, bound, mismatches, first);
  EXPECT_EQ(mismatches, 0u) << what << ": " << mismatches << " of " << fused_logits.size()
                            << " logits differ beyond " << bound << " of the largest; first at " << first << " ("
                            << unfused_logits[first] << " unfused, " << fused_logits[first] << " fused); worst " << worst;
  double fused_error = 0, unfused_error = 0;
  if (precision != Precision::fp32) {
    const CellSpec reference_cell{"cudnn", network_name, Precision::fp32, batch, Phase::inference, 0};
    const auto reference_session =
        engine_for(Precision::fp32, Layout::automatic, AlgorithmPolicy::heuristic, false, false)->prepare(network, reference_cell);
    auto* reference = dynamic_cast<cudnn::CudnnSession*>(reference_session.get());
    ASSERT_NE(reference, nullptr);
    reference->step();
    const std::vector<float> want = reference->logits_storage();
    std::size_t ignored = 0;
    fused_error = worst_error(want, fused_logits, 1.0, ignored, first);
    unfused_error = worst_error(want, unfused_logits, 1.0, ignored, first);
    EXPECT_LE(fused_error, 1.5 * unfused_error + 1e-3)
        << what << " logits against fp32: fused " << fused_error << ", unfused " << unfused_error;
  }
  const OutputCheck fused_check = fused->check(), unfused_check = unfused->check();
  EXPECT_TRUE(fused_check.finite) << what;
  EXPECT_LE(relative(fused_check.loss, unfused_check.loss), bound) << what;
  std::cerr << what << ": logits worst element error over the largest |logit| " << worst << " (bound " << bound
            << "); against fp32: fused " << fused_error << ", unfused " << unfused_error << "; ops "
            << fused->op_count() << " fused, " << unfused->op_count() << " unfused\n";
  std::filesystem::remove(file);
}

INSTANTIATE_TEST_SUITE_P(
    Cudnn, ResidualConvolutionFusion,
    ::testing::Combine(::testing::Values("resnet50", "resnet101"),
                       ::testing::Values(Precision::tf32, Precision::bf16, Precision::fp32)),
    [](const ::testing::TestParamInfo<ResidualConvolutionFusion::ParamType>& info) {
      return std::get<0>(info.param) + "_" + std::string(to_string(std::get<1>(info.param)));
    });
// The kit's conv_bias_relu_pool (training, NHWC): each relu before a max pool
// runs no backward op; the pool's backward writes the convolution's output
// gradient through the relu mask in its argmax bytes. VGG-11 (2x2 s2: the
// scatter backward) and AlexNet (3x3 s2: the gathering backward), one training
// step with the group and one with conv_bias_relu in its place (CudnnSettings::
// fold_relu_into_pool false; every other fusion alike, so the forward is the
// same ops): the logits and every parameter's gradient element by element,
// within BatchNormFusion's bounds; the relu's derivative is exact either way
// (y > 0 at the window's maximum), so what differs is only the order of
// reductions in the weight gradients. (Against engine.fuse false the
// convolutions' fused bias + relu may run another algorithm, whose last-bit
// differences move a pool's argmax between near-equal inputs: a whole
// gradient moved to a neighbouring pixel, beyond any element bound for VGG's
// first convolution. The fuse=false session is held to its decisions only.)
class ReluPoolFusion : public ::testing::TestWithParam<std::tuple<std::string, std::size_t>> {};

TEST_P(ReluPoolFusion, MatchesConvBiasReluElementByElement) {
  SKIP_WITHOUT_GPU();
  const auto& [name, setting_index] = GetParam();
  const FusionSetting setting = fusion_settings()[setting_index];
  const Network network = make_network(name);
  const std::int64_t batch = name == "vgg11" ? 4 : 8;
  const std::string what = name + " " + setting.name;
  const CellSpec cell{"cudnn", network.name(), setting.precision, batch, Phase::training, 0};
  FusedAndUnfused both;
  both.fused_session = engine_for(setting.precision, setting.layout, AlgorithmPolicy::heuristic)->prepare(network, cell);
  EngineConfig config;
  config.seed = 42;
  cudnn::CudnnSettings no_fold;
  no_fold.layout = setting.layout;
  no_fold.fold_relu_into_pool = false;
  both.unfused_session = make_cudnn_engine(probe_gpu(0, ""), config, no_fold)->prepare(network, cell);
  both.fused = dynamic_cast<cudnn::CudnnSession*>(both.fused_session.get());
  both.unfused = dynamic_cast<cudnn::CudnnSession*>(both.unfused_session.get());
  ASSERT_NE(both.fused, nullptr);
  ASSERT_NE(both.unfused, nullptr);
  const int pools = name == "vgg11" ? 5 : 3;
  const std::string fused_decisions = both.fused->record().decisions;
  const std::string groups = name == "vgg11" ? "conv_bias_relu:3,conv_bias_relu_pool:5,fc_bias_relu:2"
                                             : "conv_bias_relu:2,conv_bias_relu_pool:3,fc_bias_relu:2";
  EXPECT_NE(fused_decisions.find("fusions=" + groups), std::string::npos) << what << ": " << fused_decisions;
  EXPECT_NE(fused_decisions.find("pool1:max_pool=kernel+drelu"), std::string::npos) << what << ": " << fused_decisions;
  const std::string no_fold_decisions = both.unfused->record().decisions;
  EXPECT_NE(no_fold_decisions.find("fusions=conv_bias_relu:" + std::to_string(pools + (name == "vgg11" ? 3 : 2)) +
                                   ",fc_bias_relu:2;refused=conv_bias_relu_pool["),
            std::string::npos)
      << what << ": " << no_fold_decisions;
  EXPECT_EQ(no_fold_decisions.find("+drelu"), std::string::npos) << no_fold_decisions;
  EXPECT_EQ(both.fused->op_count() + static_cast<std::size_t>(pools), both.unfused->op_count())
      << what << ": one relu backward op fewer per group";
  const double worst_overall = step_both_and_compare(network, batch, both, setting, what);
  const OutputCheck fused_check = both.fused->check(), unfused_check = both.unfused->check();
  ASSERT_TRUE(fused_check.finite) << what;
  EXPECT_LE(relative(fused_check.loss, unfused_check.loss), setting.bound) << what;
  // engine.fuse false: the group refused with the reason, the pools' plain kernels.
  const auto off_session =
      engine_for(setting.precision, setting.layout, AlgorithmPolicy::heuristic, false, false)->prepare(network, cell);
  const std::string off = off_session->record().decisions;
  EXPECT_NE(off.find("conv_bias_relu_pool[" + std::string(name == "vgg11" ? "conv1_1+relu1_1" : "conv1+relu1") +
                     "+pool1](fusion turned off (--fuse false)) x" + std::to_string(pools)),
            std::string::npos)
      << off;
  EXPECT_NE(off.find("pool1:max_pool=kernel;"), std::string::npos) << off;
  std::cerr << what << ": worst element error over its tensor's largest |value| " << worst_overall << " (bounds "
            << setting.bound << ", gradients " << setting.gradient_bound << "); ops " << both.fused->op_count()
            << " with the group, " << both.unfused->op_count() << " without\n";
}

INSTANTIATE_TEST_SUITE_P(Cudnn, ReluPoolFusion,
                         ::testing::Combine(::testing::Values(std::string("vgg11"), std::string("alexnet")),
                                            ::testing::Range<std::size_t>(0, 3)),
                         [](const ::testing::TestParamInfo<std::tuple<std::string, std::size_t>>& info) {
                           return std::get<0>(info.param) + "_" + fusion_settings()[std::get<1>(info.param)].name;
                         });

// ---- Session behaviour -----------------------------------------------------------

TEST(CudnnSession, CudaGraphReplayGivesTheSameResults) {
  SKIP_WITHOUT_GPU();
  for (const std::string name : {"googlenet", "resnet50", "alexnet"}) {
    const Network network = make_network(name);
    const CellSpec cell{"cudnn", name, Precision::fp32, 4, Phase::training, 0};
    auto eager = engine_for(Precision::fp32, Layout::automatic, AlgorithmPolicy::heuristic, false)->prepare(network, cell);
    auto graphed = engine_for(Precision::fp32, Layout::automatic, AlgorithmPolicy::heuristic, true)->prepare(network, cell);
    EXPECT_NE(graphed->record().decisions.find("graphs=on"), std::string::npos) << graphed->record().decisions;
    for (int i = 0; i < 3; ++i) {
      eager->step();
      graphed->step();
    }
    const double eager_ms = [&] {
      eager->timer().start();
      eager->step();
      eager->timer().stop();
      return eager->timer().elapsed_ms();
    }();
    graphed->timer().start();
    graphed->step();
    graphed->timer().stop();
    const double graphed_ms = graphed->timer().elapsed_ms();
    EXPECT_GT(eager_ms, 0);
    EXPECT_GT(graphed_ms, 0);
    std::cerr << name << " batch 4 training step: eager " << eager_ms << " ms, CUDA graph " << graphed_ms << " ms\n";
    // The layer profile of a graphed session runs as a graph of its own (event
    // nodes between ops): every layer is timed, and the session's own graph
    // and results are untouched by it.
    const auto layers = layer_medians(graphed->profile(2));
    EXPECT_EQ(layers.size(), network.layers().size()) << name;
    double sum = 0;
    for (const LayerTime& t : layers) {
      EXPECT_GE(t.forward_ms, 0) << name << " " << t.layer;
      EXPECT_GE(t.backward_ms, 0) << name << " " << t.layer;
      sum += t.forward_ms + t.backward_ms;
    }
    EXPECT_GT(sum, 0) << name;
    std::cerr << name << " batch 4 training, graphed layer profile: layers sum " << sum << " ms\n";
    const OutputCheck a = eager->check(), b = graphed->check();
    EXPECT_TRUE(b.finite);
    EXPECT_NEAR(a.loss, b.loss, 1e-5 * std::abs(a.loss)) << name;
    EXPECT_NEAR(a.gradient_norm, b.gradient_norm, 1e-4 * a.gradient_norm) << name;
    graphed->step();  // the session's own graph still replays after the profile's
  }
}

// Two sessions of one cell, each stepped once: their logits element by element within 1e-5 of the largest
// (the same plans, built, restored or configured, compute the same).
void expect_same_logits_after_a_step(Session& first, Session& second, const std::string& what) {
  auto* a = dynamic_cast<cudnn::CudnnSession*>(&first);
  auto* b = dynamic_cast<cudnn::CudnnSession*>(&second);
  ASSERT_NE(a, nullptr) << what;
  ASSERT_NE(b, nullptr) << what;
  a->step();
  b->step();
  const std::vector<float> want = a->logits_storage(), got = b->logits_storage();
  ASSERT_EQ(want.size(), got.size()) << what;
  std::size_t mismatches = 0, first_mismatch = 0;
  const double worst = worst_error(want, got, 1e-5, mismatches, first_mismatch);
  EXPECT_EQ(mismatches, 0u) << what << ": " << mismatches << " of " << want.size()
                            << " logits differ beyond 1e-5 of the largest; worst " << worst;
}

// engine.graph_plan_reuse: the residual graphs' runtime-compiled plans, built (NVRTC) by the first session of
// the process, are kept as bytes and restored by the next session of the same cell instead of compiled again,
// and the restored plans compute what the built ones did; off (the default), every session compiles its own.
struct GraphApiSetup {
  int built = -1, runtime_built = -1, restored = -1, kept = -1;
};
GraphApiSetup graph_api_setup(const std::string& decisions) {
  GraphApiSetup setup;
  const std::size_t at = decisions.find(" graph_api_setup=");
  if (at == std::string::npos) return setup;
  double seconds = 0;
  std::sscanf(decisions.c_str() + at,
              " graph_api_setup=create:%lfs,build:%d/%lfs,runtime_compiled:%d/%lfs,restored:%d/%lfs,kept:%d", &seconds,
              &setup.built, &seconds, &setup.runtime_built, &seconds, &setup.restored, &seconds, &setup.kept);
  return setup;
}

TEST(CudnnSession, GraphPlanReuseRestoresTheProcesssRuntimeCompiledPlans) {
  SKIP_WITHOUT_GPU();
  if (!cudnn::graph_api_available()) GTEST_SKIP() << cudnn::graph_api_unavailable_reason();
  const Network network = make_network("resnet50");
  const CellSpec cell{"cudnn", "resnet50", Precision::tf32, 8, Phase::inference, 0};
  for (const bool reuse : {true, false}) {
    EngineConfig config;
    config.seed = 42;
    cudnn::CudnnSettings settings;
    settings.algorithm = AlgorithmPolicy::exhaustive;
    settings.graph_plan_reuse = reuse;
    const auto engine = make_cudnn_engine(probe_gpu(0, ""), config, settings);
    const auto first = engine->prepare(network, cell);
    const auto second = engine->prepare(network, cell);  // replays the first's choices (the engine's cache)
    const std::string& decisions = first->record().decisions;
    const GraphApiSetup built = graph_api_setup(decisions), replayed = graph_api_setup(second->record().decisions);
    const std::string what = reuse ? "reuse on" : "reuse off";
    ASSERT_GE(built.kept, 0) << what << ": no graph_api_setup token with its counts: " << decisions;
    if (decisions.find("+bias+add+relu") == std::string::npos)
      GTEST_SKIP() << "no residual graph won the search on this GPU: nothing runtime-compiled to restore";
    EXPECT_GT(built.runtime_built, 0) << what;
    EXPECT_EQ(built.restored, 0) << what << ": the first session has nothing to restore";
    if (reuse) {
      EXPECT_GT(built.kept, 0) << what;
      EXPECT_GT(replayed.restored, 0) << what;
      EXPECT_EQ(replayed.runtime_built, 0) << what << ": every chosen runtime-compiled plan restored, none built";
      EXPECT_EQ(replayed.kept, 0) << what;
    } else {
      EXPECT_EQ(built.kept, 0) << what;
      EXPECT_EQ(replayed.restored, 0) << what;
      EXPECT_GT(replayed.runtime_built, 0) << what << ": each session compiles its own";
    }
    expect_same_logits_after_a_step(*first, *second, what);
  }
}

// engine.graph_plan_reuse beside a file-backed algorithm cache: the plans one engine compiled are saved in
// FILE.plans, and a new engine (a later process, as far as the store goes: the store lives with its engine)
// restores them from there instead of compiling them, with the same logits.
TEST(CudnnSession, GraphPlanReuseRestoresAnEarlierProcesssPlansFromTheFileBesideTheCache) {
  SKIP_WITHOUT_GPU();
  if (!cudnn::graph_api_available()) GTEST_SKIP() << cudnn::graph_api_unavailable_reason();
  const Network network = make_network("resnet50");
  const CellSpec cell{"cudnn", "resnet50", Precision::tf32, 8, Phase::inference, 0};
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("cb_plan_file_" + std::to_string(::getpid()) + ".json");
  const std::filesystem::path plans = file.string() + ".plans";
  for (const auto& path : {file, plans}) std::filesystem::remove(path);
  const auto engine_with_file = [&] {
    EngineConfig config;
    config.seed = 42;
    cudnn::CudnnSettings settings;
    settings.algorithm = AlgorithmPolicy::exhaustive;
    settings.algorithm_cache_path = file.string();
    return make_cudnn_engine(probe_gpu(0, ""), config, settings);  // graph_plan_reuse: on by default
  };
  const auto first_engine = engine_with_file();  // each engine outlives its session
  const auto first = first_engine->prepare(network, cell);
  const std::string& decisions = first->record().decisions;
  if (decisions.find("+bias+add+relu") == std::string::npos)
    GTEST_SKIP() << "no residual graph won the search on this GPU: nothing runtime-compiled to save";
  ASSERT_TRUE(std::filesystem::exists(plans)) << "the compiled plans are saved beside the cache: " << decisions;
  EXPECT_NE(decisions.find(",plan_file_loaded:0"), std::string::npos) << "nothing to load yet: " << decisions;
  const auto second_engine = engine_with_file();
  const auto second = second_engine->prepare(network, cell);
  const std::string& replayed_decisions = second->record().decisions;
  const GraphApiSetup replayed = graph_api_setup(replayed_decisions);
  EXPECT_EQ(replayed_decisions.find(",plan_file_loaded:0"), std::string::npos) << replayed_decisions;
  EXPECT_GT(replayed.restored, 0) << replayed_decisions;
  EXPECT_EQ(replayed.runtime_built, 0) << "every chosen runtime-compiled plan restored from the file: "
                                       << replayed_decisions;
  expect_same_logits_after_a_step(*first, *second, "plan file");
  for (const auto& path : {file, plans, std::filesystem::path(file.string() + ".lock"),
                           std::filesystem::path(plans.string() + ".lock")})
    std::filesystem::remove(path);
}

// engine.pool_spacer_mb: consecutive sessions of one cell hold 0, 1, 2, ... times the spacer before
// their pool, which moves the pool to other device memory and changes nothing a step computes: the same
// logits, bit for bit (inference, the heuristic's deterministic forward algorithms), and each session's
// decisions name its spacer. Another cell starts again at 0, so each cell samples the same placements in
// every process, whatever ran before it.
TEST(CudnnSession, ThePoolSpacerMovesThePoolAndChangesNothingComputed) {
  SKIP_WITHOUT_GPU();
  const Network network = make_network("alexnet");
  const CellSpec cell{"cudnn", "alexnet", Precision::fp32, 8, Phase::inference, 0};
  EngineConfig config;
  config.seed = 42;
  cudnn::CudnnSettings settings;
  settings.pool_spacer_bytes = 64LL << 20;
  const auto engine = make_cudnn_engine(probe_gpu(0, ""), config, settings);
  std::vector<std::vector<float>> logits;
  for (int session_index = 0; session_index < 3; ++session_index) {
    const auto session = engine->prepare(network, cell);
    auto* cudnn_session = dynamic_cast<cudnn::CudnnSession*>(session.get());
    ASSERT_NE(cudnn_session, nullptr);
    const std::string& decisions = session->record().decisions;
    const std::string spacer = " pool_spacer=" + std::to_string(64 * session_index) + "MiB(session " +
                               std::to_string(session_index) + " of the cell)";
    EXPECT_NE(decisions.find(spacer), std::string::npos) << decisions;
    session->step();
    logits.push_back(cudnn_session->logits_storage());
  }
  const CellSpec other{"cudnn", "alexnet", Precision::fp32, 4, Phase::inference, 0};
  for (const CellSpec& next : {other, cell}) {
    const auto session = engine->prepare(network, next);
    EXPECT_NE(session->record().decisions.find(" pool_spacer=0MiB(session 0 of the cell)"), std::string::npos)
        << describe(next) << " after another cell: " << session->record().decisions;
  }
  for (std::size_t s = 1; s < logits.size(); ++s) {
    ASSERT_EQ(logits[s].size(), logits[0].size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < logits[0].size(); ++i) differ += logits[s][i] != logits[0][i] ? 1 : 0;
    EXPECT_EQ(differ, 0u) << "session " << s << ": " << differ << " of " << logits[0].size()
                          << " logits differ from session 0's";
  }
}

// Element by element: what a CUDA graph's replays leave (logits, every
// weight gradient) against the same steps issued call by call, by a session
// with the same (heuristic) algorithms. check() runs eagerly, so it cannot
// tell whether the replayed graph computes the step it captured.
TEST(CudnnSession, CudaGraphReplayMatchesEagerStepsElementByElement) {
  SKIP_WITHOUT_GPU();
  for (const std::string name : {"alexnet", "googlenet", "resnet50"}) {
    const Network network = make_network(name);
    const CellSpec cell{"cudnn", name, Precision::fp32, 4, Phase::training, 0};
    auto eager_session = engine_for(Precision::fp32, Layout::automatic, AlgorithmPolicy::heuristic, false)->prepare(network, cell);
    auto graphed_session = engine_for(Precision::fp32, Layout::automatic, AlgorithmPolicy::heuristic, true)->prepare(network, cell);
    auto* eager = dynamic_cast<cudnn::CudnnSession*>(eager_session.get());
    auto* graphed = dynamic_cast<cudnn::CudnnSession*>(graphed_session.get());
    ASSERT_NE(eager, nullptr);
    ASSERT_NE(graphed, nullptr);
    ASSERT_TRUE(graphed->uses_cuda_graph()) << graphed->record().decisions;
    ASSERT_FALSE(eager->uses_cuda_graph());
    for (int i = 0; i < 3; ++i) {  // the same dropout steps on both sides (the graph advances its own)
      eager->step();
      graphed->step();
    }
    // Same kernels, so the same logits; the weight gradients up to their
    // summation order (backward-filter algorithms and split-K GEMMs that
    // accumulate with atomics): 1e-3 of the tensor's largest value (measured
    // on the H200: worst 1.5e-4, googlenet fp32 batch 4).
    const auto compare = [&](const std::vector<float>& want, const std::vector<float>& got, double relative,
                             const std::string& what) {
      ASSERT_EQ(want.size(), got.size()) << what;
      double largest = 0;
      for (float v : want) largest = std::max(largest, static_cast<double>(std::abs(v)));
      std::size_t mismatches = 0, first = 0;
      double worst = 0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        const double error = std::abs(static_cast<double>(want[i]) - static_cast<double>(got[i]));
        worst = std::max(worst, error);
        if (!(error <= relative * largest + 1e-30) && mismatches++ == 0) first = i;
      }
      EXPECT_EQ(mismatches, 0u) << what << ": " << mismatches << " of " << want.size() << " elements differ; first at "
                                << first << " (" << want[first] << " eager, " << got[first]
                                << " replayed); largest |value| " << largest << ", worst |error| " << worst;
    };
    compare(eager->logits_storage(), graphed->logits_storage(), 1e-6, name + " logits");
    ASSERT_EQ(eager->parameter_count(), graphed->parameter_count());
    for (std::size_t p = 0; p < eager->parameter_count(); ++p)
      compare(eager->gradient_storage(p), graphed->gradient_storage(p), 1e-3,
              name + " gradient of trainable tensor " + std::to_string(p));
  }
}

// The GPU memory this process holds [bytes]: NVML's per-process figure where
// NVML lists the process, so other processes on the GPU (a prewarm beside the
// tests) cannot move it; else (a PID namespace, or no NVML) the device's used
// memory from cudaMemGetInfo, which they can. `source` says which was read.
double memory_held(const Device& device, std::string& source) {
  const GpuMemoryReading reading = gpu_memory_in_use(device);
  if (reading.per_process && !std::isnan(reading.bytes)) {
    source = reading.source;
    return reading.bytes;
  }
  std::size_t free = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  source = "the whole device (cudaMemGetInfo: other processes on the GPU count too)";
  return static_cast<double>(total) - static_cast<double>(free);
}

TEST(CudnnSession, RecordsItsDecisionsAndExactMemory) {
  SKIP_WITHOUT_GPU();
  const Network network = make_network("googlenet");
  auto engine = engine_for(Precision::fp16, Layout::automatic, AlgorithmPolicy::exhaustive);
  const Device device = probe_gpu(0, "");
  std::string source_before, source_during, source_after;
  const double held_before = memory_held(device, source_before);  // the engine's context exists [bytes]
  {
    auto session = engine->prepare(network, {"cudnn", "googlenet", Precision::fp16, 32, Phase::training, 0});
    const std::string d = session->record().decisions;
    std::cerr << "decisions: " << d << "\n";
    EXPECT_NE(d.find("layout=nhwc"), std::string::npos) << d;
    EXPECT_NE(d.find("algo=exhaustive"), std::string::npos) << d;
    EXPECT_NE(d.find("conv1/7x7_s2:fwd="), std::string::npos) << d;
    EXPECT_NE(d.find("bwd_filter="), std::string::npos) << d;
    const double held_during = memory_held(device, source_during);
    ASSERT_EQ(source_during, source_before) << "both readings must measure the same thing";
    const auto* cudnn_session = dynamic_cast<cudnn::CudnnSession*>(session.get());
    ASSERT_NE(cudnn_session, nullptr);
    const double pool = static_cast<double>(cudnn_session->pool_bytes());
    EXPECT_EQ(static_cast<double>(session->memory().peak_bytes), pool);
    // The pool is the session's device memory: what this process took, less the
    // handles' small allocations (cuDNN, cuBLAS) and allocation granularity.
    const double taken = held_during - held_before;
    std::cerr << "memory read from " << source_during << "\n";
    EXPECT_GE(taken, pool) << source_during;
    EXPECT_LE(taken, pool + 512.0 * (1 << 20)) << "pool " << pool << " bytes, taken " << taken << ", read from "
                                               << source_during;
    EXPECT_LT(pool, static_cast<double>(cudnn_session->unshared_bytes())) << "buffers are reused within a step";
    std::cerr << "googlenet fp16 b32 training: pool " << pool / (1 << 20) << " MiB, without reuse "
              << static_cast<double>(cudnn_session->unshared_bytes()) / (1 << 20) << " MiB\n";
    const auto times = layer_medians(session->profile(3));
    ASSERT_EQ(times.size(), network.layers().size());
    double sum = 0;
    for (const LayerTime& t : times) sum += t.forward_ms + t.backward_ms;
    EXPECT_GT(sum, 0);
  }
  const double held_after = memory_held(device, source_after);
  EXPECT_LE(held_after - held_before, 64.0 * (1 << 20)) << "a finished session gives its memory back ("
                                                        << source_after << ")";
}

// "algo_cache=FILE(hits=H,misses=M)" taken out: the rest of the decisions
// (choices and the candidates' medians) must be replayed exactly.
std::string without_cache_use(const std::string& decisions, int& hits, int& misses) {
  const auto at = decisions.find(" algo_cache=");
  if (at == std::string::npos) return decisions;
  const auto end = decisions.find(')', at);
  const std::string use = decisions.substr(at, end - at);
  hits = std::stoi(use.substr(use.find("hits=") + 5));
  misses = std::stoi(use.substr(use.find("misses=") + 7));
  return decisions.substr(0, at) + decisions.substr(end + 1);
}

// The decisions without what only a search says: its " search_arena=SIZE" and
// " search_sm_clock=MIN..MEANMHz(...)" tokens, and " graph_api_setup=..." (what
// building the Graph API plans cost: a search builds every candidate, a replay
// only the chosen ones), the only parts of a plan that differ between a search
// and its replay (a replay measures nothing).
std::string without_search_only(const std::string& decisions) {
  std::string plan = decisions;
  if (const auto at = plan.find(" graph_api_setup="); at != std::string::npos) {
    const auto end = plan.find_first_of(" ;", at + 1);  // one token: no space inside
    plan = plan.substr(0, at) + (end == std::string::npos ? "" : plan.substr(end));
  }
  if (const auto at = plan.find(" search_arena="); at != std::string::npos) {
    const auto value = plan.find('=', at) + 1;
    const auto end = plan.find(' ', plan.find(' ', value) + 1);  // "1.02 GiB": number, space, unit
    plan = plan.substr(0, at) + (end == std::string::npos ? "" : plan.substr(end));
  }
  if (const auto at = plan.find(" search_sm_clock="); at != std::string::npos) {
    const auto end = plan.find(')', at);  // "...MHz(min..mean of N samples[, throttled])"
    plan = plan.substr(0, at) + (end == std::string::npos ? "" : plan.substr(end + 1));
  }
  return plan;
}

// A bf16 training cell measured with --algo-cache FILE (and CUDA graphs),
// then prepared again in this process and by a new engine: every choice is
// replayed with no search. `cold_plan`: the first preparation's decisions.
// `extra`: more engine settings for every engine of the test; `warm_decisions`: the new engine's replay's.
void expect_the_cache_replays(const std::string& network_name, std::int64_t batch, std::string& cold_plan,
                              const std::map<std::string, std::string>& extra = {},
                              std::string* warm_decisions = nullptr) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("cb_algo_cache_gpu_" + std::to_string(::getpid()) + ".json");
  std::filesystem::remove(file);
  const Network network = make_network(network_name);
  const CellSpec cell{"cudnn", network_name, Precision::bf16, batch, Phase::training, 0};
  // Through the options' text, as a run gives it.
  EngineConfig config;
  config.settings = {{"engine.algo", "exhaustive"}, {"engine.cuda_graphs", "true"}, {"engine.algo_cache", file.string()}};
  for (const auto& [key, value] : extra) config.settings[key] = value;
  const Device device = probe_gpu(0, "");
  OutputCheck cold_check;
  {
    auto engine = make_engine("cudnn", device, config);
    auto session = engine->prepare(network, cell);
    int hits = -1, misses = -1;
    cold_plan = without_cache_use(session->record().decisions, hits, misses);
    EXPECT_GT(misses, 0) << session->record().decisions;
    EXPECT_NE(cold_plan.find("search_arena="), std::string::npos) << cold_plan;
    // The search's wall time is reported apart from the rest of the preparation (the cell's search_s).
    EXPECT_TRUE(std::isfinite(session->record().search_s));
    EXPECT_GT(session->record().search_s, 0.0);
    cold_check = session->check();
    session.reset();
    // The same cell again in this process: every choice from the engine's memory.
    auto again = engine->prepare(network, cell);
    const std::string again_plan = without_cache_use(again->record().decisions, hits, misses);
    EXPECT_EQ(misses, 0) << again->record().decisions;
    EXPECT_EQ(again_plan.find("search_arena="), std::string::npos) << "every choice remembered: no search arena";
    // Every layer's choice and its candidates' medians (the header differs only by the arena and set-up cost).
    EXPECT_EQ(without_search_only(again_plan), without_search_only(cold_plan));
  }
  ASSERT_TRUE(std::filesystem::exists(file));
  // A new engine (as a new process): the file replays the plan, with no search at all.
  auto engine = make_engine("cudnn", device, config);
  auto session = engine->prepare(network, cell);
  int hits = -1, misses = -1;
  const std::string warm_plan = without_cache_use(session->record().decisions, hits, misses);
  if (warm_decisions != nullptr) *warm_decisions = session->record().decisions;
  EXPECT_EQ(misses, 0) << session->record().decisions;
  EXPECT_GT(hits, 0);
  EXPECT_EQ(warm_plan.find("search_arena="), std::string::npos) << "a warm cache allocates no search arena";
  // Every layer's choice and its candidates' medians, replayed exactly.
  EXPECT_EQ(without_search_only(cold_plan), without_search_only(warm_plan));
  // The same algorithms compute the same numbers (the weight gradients'
  // algorithms may sum in a different order: relative 1e-3).
  const OutputCheck warm_check = session->check();
  EXPECT_NEAR(warm_check.loss, cold_check.loss, 1e-5 * std::abs(cold_check.loss));
  EXPECT_NEAR(warm_check.logits_checksum, cold_check.logits_checksum, 1e-5 * std::abs(cold_check.logits_checksum) + 1e-6);
  ASSERT_EQ(warm_check.gradient_norms.size(), cold_check.gradient_norms.size());
  for (std::size_t i = 0; i < warm_check.gradient_norms.size(); ++i)
    EXPECT_NEAR(warm_check.gradient_norms[i], cold_check.gradient_norms[i], 1e-3 * cold_check.gradient_norms[i])
        << "tensor " << i;
  std::filesystem::remove(file);
  std::filesystem::remove(file.string() + ".lock");
}

TEST(CudnnEngine, AlgorithmCacheReplaysThePlanWithNoSearch) {
  SKIP_WITHOUT_GPU();
  std::string cold_plan;
  expect_the_cache_replays("googlenet", 8, cold_plan);
}

// engine.graph_from_cache: the graphs a replay creates with their cached configuration alone
// (",configured:N/S" of graph_api_setup); -1 where the token lacks the field.
int configured_graphs(const std::string& decisions) {
  const std::size_t at = decisions.find(",configured:", decisions.find(" graph_api_setup="));
  return at == std::string::npos ? -1 : std::atoi(decisions.c_str() + at + 12);
}

// engine.graph_from_cache: a replay from the file (a new engine, as a new process) creates only the
// Graph API configurations its record chose, and no graph where the legacy choice won, and replays the
// same plan exactly: every choice, every candidate's median, the graphs counted as the search counted
// them (graph_api_graphs), and the same numbers.
TEST(CudnnEngine, GraphFromCacheReplaysThePlanCreatingOnlyTheChosenConfigurations) {
  SKIP_WITHOUT_GPU();
  if (!cudnn::graph_api_available()) GTEST_SKIP() << cudnn::graph_api_unavailable_reason();
  std::string cold_plan, warm_decisions;
  expect_the_cache_replays("googlenet", 8, cold_plan, {{"engine.graph_from_cache", "true"}}, &warm_decisions);
  EXPECT_EQ(configured_graphs(cold_plan), 0) << "the search creates every graph whole: " << cold_plan;
  const int configured = configured_graphs(warm_decisions);
  if (cold_plan.find("=graph(") == std::string::npos)
    GTEST_SKIP() << "no Graph API plan won the search on this GPU: nothing to create from the cache";
  EXPECT_GT(configured, 0) << warm_decisions;
  std::cerr << "googlenet bf16 b8 training, graph_from_cache: searched "
            << cold_plan.substr(cold_plan.find(" graph_api_graphs="), 120) << "\n  replayed "
            << warm_decisions.substr(warm_decisions.find(" graph_api_graphs="), 140) << "\n";
}

// The same in one process (a cell's next session, --repetitions), with the residual graphs'
// runtime-compiled plans: created from their configuration and built (reuse off), or restored from the
// process's store without a graph (engine.graph_plan_reuse on); the same logits either way.
TEST(CudnnSession, GraphFromCacheCreatesOnlyTheChosenConfigurationsOfTheNextSession) {
  SKIP_WITHOUT_GPU();
  if (!cudnn::graph_api_available()) GTEST_SKIP() << cudnn::graph_api_unavailable_reason();
  const Network network = make_network("resnet50");
  const CellSpec cell{"cudnn", "resnet50", Precision::tf32, 8, Phase::inference, 0};
  for (const bool reuse : {false, true}) {
    EngineConfig config;
    config.seed = 42;
    cudnn::CudnnSettings settings;
    settings.algorithm = AlgorithmPolicy::exhaustive;
    settings.graph_from_cache = true;
    settings.graph_plan_reuse = reuse;
    const auto engine = make_cudnn_engine(probe_gpu(0, ""), config, settings);
    const auto first = engine->prepare(network, cell);
    const auto second = engine->prepare(network, cell);  // replays the first's choices (the engine's cache)
    const std::string& searched = first->record().decisions;
    const std::string& replayed = second->record().decisions;
    const std::string what = reuse ? "reuse on" : "reuse off";
    int hits = -1, misses = -1;
    const std::string searched_plan = without_cache_use(searched, hits, misses);
    const std::string replayed_plan = without_cache_use(replayed, hits, misses);
    EXPECT_EQ(misses, 0) << what << ": " << replayed;
    EXPECT_EQ(without_search_only(replayed_plan), without_search_only(searched_plan)) << what;
    EXPECT_EQ(configured_graphs(searched), 0) << what << ": " << searched;
    if (searched.find("+bias+add+relu") == std::string::npos)
      GTEST_SKIP() << "no residual graph won the search on this GPU: nothing runtime-compiled to create";
    const GraphApiSetup replay = graph_api_setup(replayed);
    if (reuse) {
      EXPECT_GT(replay.restored, 0) << what << ": " << replayed;
      EXPECT_EQ(replay.runtime_built, 0) << what << ": every chosen runtime-compiled plan restored, none built";
    } else {
      EXPECT_GT(configured_graphs(replayed), 0) << what << ": " << replayed;
      EXPECT_GT(replay.runtime_built, 0) << what << ": the configured residual graphs compile their one plan";
    }
    expect_same_logits_after_a_step(*first, *second, what);
    std::cerr << "resnet50 tf32 b8 inference, graph_from_cache, " << what << ": searched "
              << searched.substr(searched.find(" graph_api_graphs="), 150) << "\n  replayed "
              << replayed.substr(replayed.find(" graph_api_graphs="), 170) << "\n";
  }
}

TEST(CudnnSession, TelemetryOverTimedSteps) {
  SKIP_WITHOUT_GPU();
  const Network network = make_network("resnet50");
  auto engine = engine_for(Precision::bf16, Layout::automatic, AlgorithmPolicy::heuristic);
  auto session = engine->prepare(network, {"cudnn", "resnet50", Precision::bf16, 64, Phase::training, 0});
  session->step();
  session->timer().start();
  session->step();
  session->timer().stop();
  session->timer().elapsed_ms();
  // The Runner's sampler on the session's device, as run_cell() uses it.
  TelemetrySampler sampler(probe_gpu(0, ""));
  sampler.begin();
  for (int i = 0; i < 20; ++i) session->step();
  session->timer().start();
  session->timer().stop();
  session->timer().elapsed_ms();  // waits for the 20 steps
  const Telemetry t = sampler.end();
  std::cerr << "telemetry: energy " << t.energy_j << " J, SM " << t.mean_sm_clock_mhz << " MHz, memory "
            << t.mean_memory_clock_mhz << " MHz, power " << t.mean_power_w << " W, max " << t.max_temperature_c
            << " C, throttled " << int(t.throttled) << ", " << t.samples << " samples\n";
  if (std::isnan(t.mean_sm_clock_mhz)) GTEST_SKIP() << "NVML is not available on this machine";
  EXPECT_GT(t.mean_sm_clock_mhz, 100);
  EXPECT_GE(t.samples, 1);
}

TEST(CudnnSession, SgdUpdateChangesTheWeights) {
  SKIP_WITHOUT_GPU();
  const Network network = make_network("alexnet");
  EngineConfig config;
  config.update = Update::sgd;
  // Gradient norms at initialisation are in the hundreds: a small step is a descent step.
  config.learning_rate = 1e-6;
  auto engine = make_engine("cudnn", probe_gpu(0, ""), config);
  auto session = engine->prepare(network, {"cudnn", "alexnet", Precision::fp32, 8, Phase::training, 0});
  const OutputCheck before = session->check();
  session->step();
  const OutputCheck after = session->check();
  EXPECT_TRUE(after.finite);
  EXPECT_NE(before.loss, after.loss) << "an SGD step changes the loss";
  EXPECT_LT(after.loss, before.loss) << "and, this small, lowers it";
}

// ---- Fully-connected layers through cuBLASLt's epilogues (layer_fully_connected.cpp) --

// Bounds, element by element against the tensor's largest |value|, fused
// (cuBLASLt: bias and relu in the forward GEMM's epilogue, the bias gradient
// in the weight gradient's) against the same session with only the
// fully-connected layers unfused (CudnnSettings::fc_epilogues false:
// cublasGemmEx and our kernels; every other fusion alike, and under the
// measured search one algorithm cache for both, so the convolutions run the
// same algorithms: with engine.fuse false their own fusions and choices
// differ, and the last-bit differences move max pools' argmax and relu masks,
// which moved whole gradients in the first GPU run, bench/results/2026-12-02/
// call6). fp32 1e-4: the same arithmetic in another order. tf32 5e-3: every
// GEMM rounds its inputs to 10 mantissa bits. bf16 3e-2: the fused epilogue
// rounds acc + bias once to bf16, the unfused path the GEMM's output and then
// the sum (one bf16 ulp is 2^-8 = 3.9e-3 of a value). In tf32 and bf16 a
// relu6/relu7 unit that lands near 0 may fall on the other side of it in one
// path, and its row of the next layer's weight gradient then differs whole:
// up to kFcReluFlipShare of a weight tensor's elements, and kFcBiasFlipShare
// of a bias gradient's (one flip moves a bias element whole), may exceed the
// bound there (measured on the H200, bench/results/2026-12-02/call7: weights
// at most 0.14%, biases at most 7.9%, vgg11 tf32 fc6: 322 of 4096).
// The tf32 and bf16 cells are also held to an fp32 reference: fused no
// further from it than 1.5x the unfused + 1e-3 (as BatchNormFusion).
constexpr double kFcReluFlipShare = 5e-3;
constexpr double kFcBiasFlipShare = 0.1;
constexpr std::size_t kFcBiasElements = 4096;  // the largest bias gradient of these networks

struct FcFusionSetting {
  std::string name;
  Precision precision;
  double bound;  // logits and the fully-connected layers' weight and bias gradients
};

std::vector<FcFusionSetting> fc_fusion_settings() {
  return {{"fp32", Precision::fp32, 1e-4}, {"tf32", Precision::tf32, 5e-3}, {"bf16", Precision::bf16, 3e-2}};
}

// Two SGD steps (learning rate 1e-2), so the second step's forward adds
// non-zero biases (they are initialised to zeros) through the epilogue;
// the test starts both sessions' second step from the same weights.
// One layer's part of a session's decisions ("<layer>:..." up to the next "; "), empty where it has none.
std::string layer_decisions(const std::string& decisions, const std::string& layer) {
  const std::string tag = "; " + layer + ":";
  const std::size_t begin = decisions.find(tag);
  if (begin == std::string::npos) return "";
  const std::size_t end = decisions.find("; ", begin + 2);
  return decisions.substr(begin + 2, end == std::string::npos ? std::string::npos : end - begin - 2);
}

std::unique_ptr<Session> fc_session(const Network& network, Precision precision, bool fc_epilogues,
                                    AlgorithmPolicy algorithm = AlgorithmPolicy::heuristic,
                                    const std::string& algorithm_cache = "", bool fuse = true,
                                    Phase phase = Phase::training, int batch = 16) {
  EngineConfig config;
  config.seed = 42;
  config.update = Update::sgd;
  config.learning_rate = 1e-2;
  cudnn::CudnnSettings settings;
  settings.algorithm = algorithm;
  settings.algorithm_cache_path = algorithm_cache;
  settings.fuse = fuse;
  settings.fc_epilogues = fc_epilogues;
  const CellSpec cell{"cudnn", network.name(), precision, batch, phase, 0};
  return make_cudnn_engine(probe_gpu(0, ""), config, settings)->prepare(network, cell);
}

struct FcFusionCase {
  std::string network;
  std::size_t setting;
  AlgorithmPolicy algorithm;
};

std::vector<FcFusionCase> fc_fusion_cases() {
  std::vector<FcFusionCase> cases;
  for (const char* network : {"vgg11", "alexnet"})
    for (std::size_t s = 0; s < fc_fusion_settings().size(); ++s) cases.push_back({network, s, AlgorithmPolicy::heuristic});
  // The measured search (cuBLASLt's heuristic candidates and the legacy path, timed in context).
  for (std::size_t s = 0; s < fc_fusion_settings().size(); ++s) cases.push_back({"alexnet", s, AlgorithmPolicy::exhaustive});
  return cases;
}

class FullyConnectedFusion : public ::testing::TestWithParam<std::size_t> {};

// Logits and every fully-connected layer's weight and bias gradient after two
// training steps, fused against unfused (engine.fuse), element by element; the
// decisions name the fc_bias_relu groups and each layer's cuBLASLt plan.
TEST_P(FullyConnectedFusion, MatchesTheUnfusedOpsElementByElement) {
  SKIP_WITHOUT_GPU();
  const FcFusionCase c = fc_fusion_cases()[GetParam()];
  const FcFusionSetting setting = fc_fusion_settings()[c.setting];
  const Network network = make_network(c.network);
  const std::string what = c.network + " " + setting.name +
                           (c.algorithm == AlgorithmPolicy::exhaustive ? " exhaustive" : " heuristic");
  // Under the measured search both sessions replay one algorithm cache: the convolutions alike.
  std::string cache;
  if (c.algorithm == AlgorithmPolicy::exhaustive) {
    cache = (std::filesystem::temp_directory_path() /
             ("cb_fc_" + std::to_string(::getpid()) + "_" + c.network + "_" + setting.name + ".json"))
                .string();
    std::filesystem::remove(cache);
  }
  const auto fused_session = fc_session(network, setting.precision, true, c.algorithm, cache);
  const auto unfused_session = fc_session(network, setting.precision, false, c.algorithm, cache);
  auto* fused = dynamic_cast<cudnn::CudnnSession*>(fused_session.get());
  auto* unfused = dynamic_cast<cudnn::CudnnSession*>(unfused_session.get());
  ASSERT_NE(fused, nullptr);
  ASSERT_NE(unfused, nullptr);
  const std::string fused_decisions = fused->record().decisions;
  const std::string unfused_decisions = unfused->record().decisions;
  std::cerr << what << " fused decisions: " << fused_decisions << "\n";
  if (c.algorithm == AlgorithmPolicy::exhaustive)  // both replay one cache: any difference in the convolutions shows here
    std::cerr << what << " unfused decisions: " << unfused_decisions << "\n";
  EXPECT_NE(fused_decisions.find("fc_bias_relu:2"), std::string::npos) << what << ": " << fused_decisions;
  EXPECT_EQ(fused_decisions.find("fc_bias_relu["), std::string::npos) << what << ": " << fused_decisions;
  EXPECT_NE(unfused_decisions.find("(turned off (CudnnSettings::fc_epilogues)) x2"), std::string::npos)
      << unfused_decisions;
  // The fully-connected layers' own decisions (the first convolution may take a cuBLASLt plan of its own): the
  // fused session names its choice for each; the legacy path names none, or one without cuBLASLt.
  for (const char* layer : {"fc6", "fc7"}) {
    ASSERT_NE(layer_decisions(fused_decisions, layer).find("fwd="), std::string::npos) << layer << " in " << fused_decisions;
    EXPECT_EQ(layer_decisions(unfused_decisions, layer).find("cublasLt("), std::string::npos)
        << "fc_epilogues false: the legacy path alone in " << layer << ": " << layer_decisions(unfused_decisions, layer);
  }
  // engine.fuse false: the legacy path alone too.
  const auto off_session = fc_session(network, setting.precision, true, AlgorithmPolicy::heuristic, "", false);
  for (const char* layer : {"fc6", "fc7"}) {
    const std::string off = layer_decisions(off_session->record().decisions, layer);
    EXPECT_EQ(off.find("cublasLt("), std::string::npos) << "--fuse false: the legacy path alone in " << layer << ": " << off;
  }
  if (c.algorithm == AlgorithmPolicy::heuristic) {
    // cuBLASLt's first heuristic plan for fc6 and fc7: the bias and relu in the forward GEMM, the bias
    // gradient in the weight gradient's (where cuBLASLt lists a plan: the decisions say why not).
    for (const char* layer : {"fc6:fwd=cublasLt(", "fc7:fwd=cublasLt("})
      EXPECT_NE(fused_decisions.find(layer), std::string::npos) << what << ": " << layer << " in " << fused_decisions;
    EXPECT_NE(fused_decisions.find("+bias+relu,bwd_weights=cublasLt("), std::string::npos) << what;
  }
  // Step 2 starts both sessions from the same weights (the unfused session's after step 1, biases
  // no longer zero): what is compared is one step's rounding, the fused ops' against the unfused.
  // Left to drift for two steps, tf32 AlexNet under the measured search differed by up to 22% of
  // a gradient's largest value in 2 of 5 repeats (call 16) while its fp32 cells agreed to 5e-6:
  // a ReLU whose input rounds across zero in step 1 changes every weight's update.
  fused->step();
  unfused->step();
  fused->copy_parameters_from(*unfused);
  fused->step();
  unfused->step();
  double worst_overall = 0;
  const auto compare = [&](const std::vector<float>& want, const std::vector<float>& got, const std::string& tensor) {
    ASSERT_EQ(want.size(), got.size()) << what << " " << tensor;
    std::size_t mismatches = 0, first = 0;
    const double worst = worst_error(want, got, setting.bound, mismatches, first);
    worst_overall = std::max(worst_overall, worst);
    const double share = want.size() <= kFcBiasElements ? kFcBiasFlipShare : kFcReluFlipShare;
    const std::size_t allowed =
        setting.precision == Precision::fp32 ? 0 : static_cast<std::size_t>(share * static_cast<double>(want.size()));
    if (mismatches > 0)
      std::cerr << what << " " << tensor << ": " << mismatches << " of " << want.size() << " beyond the bound (allowed "
                << allowed << ")\n";
    EXPECT_LE(mismatches, allowed) << what << " " << tensor << ": " << mismatches << " of " << want.size()
                              << " elements differ beyond " << setting.bound << " of the largest; first at " << first
                              << " (" << want[first] << " unfused, " << got[first] << " fused); worst " << worst;
  };
  const auto is_fc = [&](std::size_t p) {
    return network.layers()[static_cast<std::size_t>(fused->parameter_layer(p))].kind == LayerKind::fully_connected;
  };
  compare(unfused->logits_storage(), fused->logits_storage(), "logits");
  ASSERT_EQ(fused->parameter_count(), unfused->parameter_count()) << what;
  int fc_tensors = 0;
  for (std::size_t p = 0; p < fused->parameter_count(); ++p) {
    if (!is_fc(p)) {
      // Not asserted (the convolutions are not what this test fuses), printed: where a fully-connected
      // gradient differs, whether the difference already starts in the convolutions' (call 12 saw fc6
      // differ by 9.6% of its largest value under the measured search, once in two GPU runs).
      std::size_t differing = 0, first = 0;
      const double worst = worst_error(unfused->gradient_storage(p), fused->gradient_storage(p), setting.bound,
                                       differing, first);
      std::cerr << what << " " << network.layers()[static_cast<std::size_t>(fused->parameter_layer(p))].name
                << " gradient " << p << " (not asserted): worst " << worst << ", " << differing << " beyond the bound\n";
      continue;
    }
    ++fc_tensors;
    compare(unfused->gradient_storage(p), fused->gradient_storage(p),
            network.layers()[static_cast<std::size_t>(fused->parameter_layer(p))].name + " gradient " + std::to_string(p));
  }
  EXPECT_EQ(fc_tensors, 6) << what << ": three layers' weights and biases";
  if (setting.precision != Precision::fp32) {
    const auto reference_session = fc_session(network, Precision::fp32, false);  // strict fp32, FC unfused
    auto* reference = dynamic_cast<cudnn::CudnnSession*>(reference_session.get());
    ASSERT_NE(reference, nullptr);
    reference->step();
    reference->step();
    std::size_t ignored = 0, first = 0;
    const auto against_reference = [&](const std::vector<float>& want, const std::vector<float>& fused_got,
                                       const std::vector<float>& unfused_got, const std::string& tensor) {
      const double fused_error = worst_error(want, fused_got, 1.0, ignored, first);
      const double unfused_error = worst_error(want, unfused_got, 1.0, ignored, first);
      std::cerr << what << " " << tensor << " against fp32: fused " << fused_error << ", unfused " << unfused_error << "\n";
      EXPECT_LE(fused_error, 1.5 * unfused_error + 1e-3)
          << what << " " << tensor << " against fp32: fused " << fused_error << ", unfused " << unfused_error;
    };
    against_reference(reference->logits_storage(), fused->logits_storage(), unfused->logits_storage(), "logits");
    for (std::size_t p = 0; p < fused->parameter_count(); ++p)
      if (is_fc(p))
        against_reference(reference->gradient_storage(p), fused->gradient_storage(p), unfused->gradient_storage(p),
                          "gradient " + std::to_string(p));
  }
  std::cerr << what << ": worst element error over its tensor's largest |value| " << worst_overall << " (bound "
            << setting.bound << ")\n";
}

// Strict fp32 inference under the measured search: the fully-connected forwards are searched among
// cuBLASLt's plans (split-K ones included) and the legacy path, as seed2017's alexnet fp32 inference
// cell runs them (batch 64), and the logits of the timed path (check(): the CUDA graph step() replays)
// match the legacy GEMMs' (engine.fuse's fc epilogues off) element by element to the fp32 bound.
// Training keeps the legacy GEMMs in strict fp32 (layer_fully_connected.cpp, call7).
TEST(FullyConnectedFusionFp32, InferenceSearchesTheForwardPlansAndMatchesTheLegacyGemms) {
  SKIP_WITHOUT_GPU();
  const Network network = make_network("alexnet");
  const std::string cache =
      (std::filesystem::temp_directory_path() / ("cb_fc_fp32_inference_" + std::to_string(::getpid()) + ".json")).string();
  std::filesystem::remove(cache);
  const auto fused = fc_session(network, Precision::fp32, true, AlgorithmPolicy::exhaustive, cache, true,
                                Phase::inference, 64);
  const auto legacy = fc_session(network, Precision::fp32, false, AlgorithmPolicy::exhaustive, cache, true,
                                 Phase::inference, 64);
  const std::string decisions = fused->record().decisions;
  std::cerr << "alexnet fp32 inference exhaustive fused decisions: " << decisions << "\n";
  EXPECT_EQ(decisions.find("legacy GEMMs (call7)"), std::string::npos) << decisions;
  // The first session searched (the cache was empty): its decisions give the SM clock during the search.
  EXPECT_NE(decisions.find(" search_sm_clock="), std::string::npos) << decisions;
  for (const char* layer : {"fc6", "fc7"})
    EXPECT_NE(layer_decisions(decisions, layer).find("fwd="), std::string::npos) << layer << " in " << decisions;
  auto* searched = dynamic_cast<cudnn::CudnnSession*>(fused.get());
  auto* reference = dynamic_cast<cudnn::CudnnSession*>(legacy.get());
  ASSERT_NE(searched, nullptr);
  ASSERT_NE(reference, nullptr);
  EXPECT_TRUE(reference->check().finite);  // the timed path's step, then its outputs
  EXPECT_TRUE(searched->check().finite);
  const std::vector<float> want = reference->logits_storage();
  const std::vector<float> got = searched->logits_storage();
  ASSERT_EQ(want.size(), got.size());
  ASSERT_FALSE(want.empty());
  std::size_t mismatches = 0, first = 0;
  const double worst = worst_error(want, got, 1e-4, mismatches, first);
  std::cerr << "alexnet fp32 inference logits: worst element error over the largest |value| " << worst << "\n";
  EXPECT_EQ(mismatches, 0u) << "first at " << first << " (" << want[first] << " legacy, " << got[first]
                            << " searched); worst " << worst;
  std::filesystem::remove(cache);
}

INSTANTIATE_TEST_SUITE_P(Cudnn, FullyConnectedFusion, ::testing::Range<std::size_t>(0, fc_fusion_cases().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           const FcFusionCase c = fc_fusion_cases()[info.param];
                           return c.network + "_" + fc_fusion_settings()[c.setting].name +
                                  (c.algorithm == AlgorithmPolicy::exhaustive ? "_exhaustive" : "");
                         });

// The measured plans of the fully-connected layers (cuBLASLt plans by their
// configuration, or the legacy path) are saved with --algo-cache and replayed
// by a new engine with no search: the same decisions, the same numbers.
TEST(FullyConnectedFusionCache, MeasuredPlansReplayFromTheFile) {
  SKIP_WITHOUT_GPU();
  std::string cold_plan;
  expect_the_cache_replays("alexnet", 16, cold_plan);
  if (HasFatalFailure()) return;
  std::cerr << "alexnet bf16 cold plan: " << cold_plan << "\n";
  for (const char* layer : {"fc6:fwd=", "fc7:fwd=", "fc8:fwd="})
    EXPECT_NE(cold_plan.find(layer), std::string::npos) << layer << " in " << cold_plan;
  // The logits layer writes fp32 with a bf16 bias: cuBLASLt's bias epilogue does not take it.
  EXPECT_NE(cold_plan.find("fc8:fwd=cublasGemmEx+kernel[cublasLt: bias bf16 with an f32 output"), std::string::npos)
      << cold_plan;
}

// ---- Out of memory: a cell that cannot fit, then a small cell on the same process --

TEST(CudnnEngine, OutOfMemoryThenTheNextCellRuns) {
  SKIP_WITHOUT_GPU();
  const Device device = probe_gpu(0, "");
  auto engine = make_engine("cudnn", device, EngineConfig{});
  MeasureOptions options;
  options.warmup_steps = 2;
  options.min_steps = 5;
  options.max_steps = 5;
  std::size_t free_before = 0, free_after = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);

  const Network vgg16 = make_network("vgg16");
  const CellResult huge = run_cell(engine.get(), "cudnn", vgg16, {"cudnn", "vgg16", Precision::fp32, 8192,
                                                                   Phase::training, 0},
                                   device, options, 0);
  EXPECT_EQ(huge.status, Status::oom) << huge.message;
  std::cerr << "vgg16 b8192: " << to_string(huge.status) << ": " << huge.message << "\n";
  // The same in NHWC (tf32), whose descriptors cuDNN refused before any allocation (the H200 sweep's
  // vgg11 tf32 training at 8192 failed so, bench/results/2026-12-06): oom, said before a descriptor is made.
  const Network vgg11 = make_network("vgg11");
  const CellResult huge_nhwc = run_cell(engine.get(), "cudnn", vgg11, {"cudnn", "vgg11", Precision::tf32, 8192,
                                                                        Phase::training, 0},
                                        device, options, 0);
  EXPECT_EQ(huge_nhwc.status, Status::oom) << huge_nhwc.message;
  // AlexNet's input batch as 16-bit NHWC stores it (8 channels) passes 2^31 elements at 8192 and fits in
  // memory: unsupported, as `plan` says, never a failure.
  const CellResult padded = run_cell(engine.get(), "cudnn", make_network("alexnet"),
                                     {"cudnn", "alexnet", Precision::bf16, 8192, Phase::inference, 0}, device, options, 0);
  EXPECT_EQ(padded.status, Status::unsupported) << padded.message;
  std::cerr << "alexnet bf16 b8192: " << to_string(padded.status) << ": " << padded.message << "\n";

  // Its largest tensor has more than 2^31 elements but the cell might fit: unsupported (cuDNN's 32-bit
  // descriptors), or oom — never a failure.
  const CellResult large = run_cell(engine.get(), "cudnn", vgg16, {"cudnn", "vgg16", Precision::fp32, 2048,
                                                                    Phase::training, 0},
                                    device, options, 0);
  EXPECT_TRUE(large.status == Status::oom || large.status == Status::ok || large.status == Status::unsupported)
      << large.message;
  std::cerr << "vgg16 b2048: " << to_string(large.status) << ": " << large.message << "\n";

  const Network alexnet = make_network("alexnet");
  const CellResult small = run_cell(engine.get(), "cudnn", alexnet, {"cudnn", "alexnet", Precision::fp32, 16,
                                                                      Phase::training, 0},
                                    device, options, 0);
  EXPECT_EQ(small.status, Status::ok) << small.message;
  EXPECT_GT(small.peak_memory_bytes, 0);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_LE(static_cast<double>(free_before) - static_cast<double>(free_after), 64.0 * (1 << 20))
      << "the failed cells released their memory";
}

TEST(CudnnEngine, SupportsFollowsTheComputeCapability) {
  SKIP_WITHOUT_GPU();
  const Device device = probe_gpu(0, "");
  auto engine = make_engine("cudnn", device, EngineConfig{});
  for (Precision p : {Precision::fp32, Precision::tf32, Precision::fp16, Precision::bf16}) {
    const Support s = engine->supports(device, {"cudnn", "alexnet", p, 1, Phase::inference, 0});
    std::cerr << device.model << " (" << device.architecture << ") " << to_string(p) << ": "
              << (s.supported ? "yes" : s.reason) << "\n";
  }
  EXPECT_TRUE(engine->supports(device, {"cudnn", "alexnet", Precision::fp32, 1, Phase::inference, 0}).supported);
}

}  // namespace
}  // namespace crossbench
