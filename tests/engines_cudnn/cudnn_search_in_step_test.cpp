// engine.search_in_step on a GPU (label `gpu`; skips with a reason when no GPU is visible): the Graph API
// plans the search found near-tied are timed inside the captured step, the step it then times computes
// the logits the search's own choices compute (element by element, within the precision's bound), the
// choices are recorded in the algorithm cache and a new engine replays them without timing anything.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <unistd.h>

#include "crossbench/device.hpp"
#include "crossbench/engine.hpp"
#include "crossbench/network.hpp"
#include "engines/cudnn/cudnn_engine.hpp"
#include "engines/cudnn/cudnn_session.hpp"
#include "search_test_problem.hpp"

namespace crossbench::cudnn {
namespace {

// The decisions' "in_step=[...]" token (empty where there is none).
std::string in_step_of(const std::string& decisions) {
  const auto at = decisions.find(" in_step=");
  if (at == std::string::npos) return {};
  return decisions.substr(at + 1, decisions.find(' ', at + 1) - at - 1);
}

int misses_of(const std::string& decisions) {
  const auto at = decisions.find("misses=");
  return at == std::string::npos ? -1 : std::stoi(decisions.substr(at + 7));
}

// ResNet-50 tf32 inference at batch 16: 20-odd distinct Graph API problems with six timed plans each, so
// that some are near-tied on any GPU the suite runs on.
TEST(CudnnSearchInStep, NearTiedPlansAreTimedInTheStepRecordedAndReplayed) {
  SKIP_WITHOUT_GPU();
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("cb_in_step_" + std::to_string(::getpid()) + ".json");
  std::filesystem::remove(file);
  const Network network = make_network("resnet50");
  const CellSpec cell{"cudnn", "resnet50", Precision::tf32, 16, Phase::inference, 0};
  const Device device = probe_gpu(0, "");
  const auto config_with = [&](bool in_step) {
    EngineConfig config;
    config.seed = 42;
    config.settings = {{"engine.algo", "exhaustive"},
                       {"engine.cuda_graphs", "true"},
                       {"engine.algo_cache", file.string()},
                       {"engine.search_in_step", in_step ? "true" : "false"}};
    return config;
  };
  std::string chosen;
  std::vector<float> in_step_logits;
  {
    auto engine = make_engine("cudnn", device, config_with(true));
    auto session = engine->prepare(network, cell);
    const std::string decisions = session->record().decisions;
    chosen = in_step_of(decisions);
    ASSERT_FALSE(chosen.empty()) << "no near-tied Graph API plan in ResNet-50 tf32 inference: " << decisions;
    EXPECT_NE(chosen.find("ms*"), std::string::npos) << "each choice marks the option kept: " << chosen;
    std::cerr << "resnet50 tf32 b16 " << chosen << "\n";
    // The timed path is the checked path: check() replays the step graph with the choices made in it.
    EXPECT_TRUE(session->check().finite) << decisions;
    auto* cudnn_session = dynamic_cast<CudnnSession*>(session.get());
    ASSERT_NE(cudnn_session, nullptr);
    session->step();
    in_step_logits = cudnn_session->logits_storage();
  }
  ASSERT_TRUE(std::filesystem::exists(file));
  {
    // The search's own choices (replayed from the file), nothing timed in the step.
    auto engine = make_engine("cudnn", device, config_with(false));
    auto session = engine->prepare(network, cell);
    EXPECT_TRUE(in_step_of(session->record().decisions).empty()) << session->record().decisions;
    auto* cudnn_session = dynamic_cast<CudnnSession*>(session.get());
    ASSERT_NE(cudnn_session, nullptr);
    session->step();
    const std::vector<float> logits = cudnn_session->logits_storage();
    ASSERT_EQ(logits.size(), in_step_logits.size());
    double largest = 0, worst = 0;
    for (std::size_t i = 0; i < logits.size(); ++i) {
      largest = std::max(largest, static_cast<double>(std::abs(logits[i])));
      worst = std::max(worst, static_cast<double>(std::abs(logits[i] - in_step_logits[i])));
    }
    ASSERT_GT(largest, 0.0);
    // tf32 plans of one convolution differ in their summation order: the bound the fused and unfused
    // tf32 ResNets are held to (ResidualConvolutionFusion).
    EXPECT_LE(worst / largest, 1e-2) << "logits with the step's choices against the search's";
    std::cerr << "resnet50 tf32 b16: logits worst element error over the largest |logit| " << worst / largest << "\n";
  }
  {
    // A new engine replays the step's choices from the file: the same choices and times, nothing measured.
    auto engine = make_engine("cudnn", device, config_with(true));
    auto session = engine->prepare(network, cell);
    const std::string decisions = session->record().decisions;
    EXPECT_EQ(in_step_of(decisions), chosen);
    EXPECT_EQ(misses_of(decisions), 0) << decisions;
    EXPECT_TRUE(session->check().finite);
  }
  std::filesystem::remove(file);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

}  // namespace
}  // namespace crossbench::cudnn
