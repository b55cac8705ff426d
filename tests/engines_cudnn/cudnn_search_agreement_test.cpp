// The measured search's agreement checks on a deep network, on a GPU (label `gpu`; each test skips with a
// reason when no GPU is visible). The search holds what it chooses to a reference on its arena: the
// fastest legacy algorithm to IMPLICIT_GEMM / ALGO_1, a winning Graph API plan to the legacy choice, a
// statistics plan's sums to those of its own output. Each difference is recorded in the algorithm cache
// beside the times, NaN where the check found nothing to hold its plans to (the reference overflowed).
//
// The timed runs leave their outputs on the arena where the next layer reads its inputs (a backward
// filter's dw is a sum over N·H·W products), so over a deep network's search the values grew until the
// references overflowed. On an H100 every Graph API check of ResNet-50 fp16 training at batch 256 was NaN
// (its plans taken unchecked), and so was every statistics check (each statistics plan refused as "nan"),
// and 33 strict-fp32 GoogLeNet checks (bench/results/2026-12-14, call 78). Each check now puts its
// inputs back first (Convolution::refill_check_inputs); these tests fail without that.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "crossbench/cell.hpp"
#include "crossbench/device.hpp"
#include "crossbench/engine.hpp"
#include "crossbench/network.hpp"
#include "engines/cudnn/cudnn_engine.hpp"
#include "engines/cudnn/graph_api_convolution.hpp"
#include "search_test_problem.hpp"

namespace crossbench::cudnn {
namespace {

struct DeepSearch {
  const char* network;
  Precision precision;
  std::int64_t batch;
  bool conv_statistics;
  const char* name;
};

const std::vector<DeepSearch>& deep_searches() {
  static const std::vector<DeepSearch> searches = {
      {"resnet50", Precision::fp16, 64, true, "resnet50_fp16_statistics"},
      {"googlenet", Precision::fp32, 64, false, "googlenet_fp32"},
  };
  return searches;
}

class SearchAgreement : public ::testing::TestWithParam<std::size_t> {};

// A training cell searched (--algo exhaustive, the Graph API, CUDA graphs) into a fresh cache file: every
// agreement record it wrote holds a measured difference, none is NaN alone.
TEST_P(SearchAgreement, EveryCheckOfADeepNetworkHoldsItsPlansToAReference) {
  SKIP_WITHOUT_GPU();
  if (!graph_api_available()) GTEST_SKIP() << graph_api_unavailable_reason();
  const DeepSearch search = deep_searches()[GetParam()];
  const std::filesystem::path file = std::filesystem::temp_directory_path() /
                                     ("cb_agreement_" + std::to_string(::getpid()) + "_" + search.name + ".json");
  std::filesystem::remove(file);
  std::string decisions;
  {
    EngineConfig config;
    config.seed = 42;
    CudnnSettings settings;
    settings.algorithm = AlgorithmPolicy::exhaustive;
    settings.cuda_graphs = true;
    settings.conv_statistics = search.conv_statistics;
    settings.algorithm_cache_path = file.string();
    const CellSpec cell{"cudnn", search.network, search.precision, search.batch, Phase::training, 0};
    const auto session = make_cudnn_engine(probe_gpu(0, ""), config, settings)->prepare(make_network(search.network), cell);
    ASSERT_NE(session, nullptr);
    decisions = session->record().decisions;
  }
  std::ifstream in(file);
  ASSERT_TRUE(in.good()) << "the search wrote no cache file " << file;
  const nlohmann::json cache = nlohmann::json::parse(in);
  std::size_t checks = 0, statistics_checks = 0;
  std::vector<std::string> unchecked;
  for (const nlohmann::json& record : cache.at("records")) {
    const std::string signature = record.at("signature").get<std::string>();
    if (signature.rfind("agreement.", 0) != 0) continue;
    ++checks;
    if (signature.rfind("agreement.statistics.", 0) == 0) ++statistics_checks;
    bool measured = false;
    for (const nlohmann::json& candidate : record.at("candidates")) measured |= !candidate.at("median_ms").is_null();
    if (!measured) unchecked.push_back(signature.substr(0, 160));
  }
  std::cerr << search.name << ": " << checks << " agreement checks (" << statistics_checks << " of statistics), "
            << unchecked.size() << " with nothing to hold their plans to\n";
  EXPECT_GT(checks, 0u) << search.name << ": the search checked nothing";
  if (search.conv_statistics) EXPECT_GT(statistics_checks, 0u) << search.name << ": no statistics plan was checked";
  EXPECT_TRUE(unchecked.empty()) << search.name << ": " << unchecked.size() << " checks found nothing to hold their "
                                 << "plans to, the first: " << (unchecked.empty() ? "" : unchecked.front());
  // The decisions name a plan taken unchecked; the layer's whole decision says what it was held to.
  for (std::size_t at = decisions.find(" unchecked)"); at != std::string::npos; at = decisions.find(" unchecked)", at + 1)) {
    const std::size_t begin = decisions.rfind("; ", at);
    ADD_FAILURE() << search.name << ": a plan taken unchecked: "
                  << decisions.substr(begin == std::string::npos ? 0 : begin + 2, at - begin + 400);
  }
  std::filesystem::remove(file);
  std::filesystem::remove(file.string() + ".lock");
}

INSTANTIATE_TEST_SUITE_P(Cudnn, SearchAgreement, ::testing::Range<std::size_t>(0, deep_searches().size()),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return std::string(deep_searches()[info.param].name);
                         });

}  // namespace
}  // namespace crossbench::cudnn
