// The cuDNN engine's algorithm cache and measured-choice rule (plain C++, cpu).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "crossbench/error.hpp"
#include "engines/cudnn/algorithm_cache.hpp"

namespace crossbench::cudnn {
namespace {

namespace fs = std::filesystem;

// The margin these tests reason in (3%: a candidate 2% faster is a tie); the run's default is kTieFraction.
constexpr double kMargin = 0.03;

MeasuredCandidate candidate(const std::string& name, int algorithm, double median, int heuristic_rank = -1,
                            std::size_t workspace = 0) {
  MeasuredCandidate c;
  c.name = name;
  c.algorithm = algorithm;
  c.math = 1;
  c.workspace_bytes = workspace;
  c.heuristic_rank = heuristic_rank;
  c.median_ms = median;
  c.repetitions = 7;
  return c;
}

std::vector<std::string> names(const std::vector<MeasuredCandidate>& candidates) {
  std::vector<std::string> out;
  for (const auto& c : candidates) out.push_back(c.name);
  return out;
}

const MeasurementContext kH200{"NVIDIA H200 cc=9.0 sms=132", "cudnn=9.19.0 cublas=12.9.1 cudart=12.9"};

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("cb_algo_cache_" + std::to_string(::getpid()) + "_" +
                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
    file = dir / "algorithms.json";
  }
  void TearDown() override { fs::remove_all(dir); }
  void write(const std::string& text) const { std::ofstream(file) << text; }
  std::string read() const {
    std::ifstream in(file);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
  fs::path dir, file;
};

MeasuredChoice sample_choice() {
  MeasuredChoice choice;
  choice.candidates = {candidate("IMPLICIT_PRECOMP_GEMM/tc", 1, 0.125, 0, 4096),
                       candidate("IMPLICIT_GEMM/tc", 0, 0.25, 1, 0),
                       candidate("FFT/default", 4, std::nan(""), -1, 1 << 20)};
  return choice;
}

void expect_same(const MeasuredChoice& a, const MeasuredChoice& b) {
  ASSERT_EQ(a.candidates.size(), b.candidates.size());
  for (std::size_t i = 0; i < a.candidates.size(); ++i) {
    const MeasuredCandidate &x = a.candidates[i], &y = b.candidates[i];
    EXPECT_EQ(x.name, y.name) << i;
    EXPECT_EQ(x.algorithm, y.algorithm) << i;
    EXPECT_EQ(x.math, y.math) << i;
    EXPECT_EQ(x.workspace_bytes, y.workspace_bytes) << i;
    EXPECT_EQ(x.heuristic_rank, y.heuristic_rank) << i;
    EXPECT_EQ(x.repetitions, y.repetitions) << i;
    if (std::isnan(x.median_ms)) EXPECT_TRUE(std::isnan(y.median_ms)) << i;
    else EXPECT_EQ(x.median_ms, y.median_ms) << i;
  }
}

// ---- The choice ----------------------------------------------------------------

TEST(MeasuredChoice, MedianOfOddAndEvenCountsDropsNaN) {
  EXPECT_EQ(median_ms({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median_ms({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(median_ms({5.0, std::nan(""), 1.0, 3.0}), 3.0);
  EXPECT_EQ(median_ms({1.0, 1.0, 100.0}), 1.0);  // one outlier does not move it
  EXPECT_TRUE(std::isnan(median_ms({})));
  EXPECT_TRUE(std::isnan(median_ms({std::nan("")})));
}

TEST(MeasuredChoice, ClearlyFasterWinsByMedian) {
  std::vector<MeasuredCandidate> c = {candidate("a", 0, 1.00, 0), candidate("b", 1, 0.80, 1),
                                      candidate("c", 2, 0.90, 2)};
  order_by_median(c, kMargin);
  EXPECT_EQ(names(c), (std::vector<std::string>{"b", "c", "a"}));
}

TEST(MeasuredChoice, NearTieGoesToTheHeuristicsOrder) {
  // b is 2% faster: a tie within 3%, so a (cuDNN's first choice) stays first.
  std::vector<MeasuredCandidate> c = {candidate("b", 1, 0.98, 1), candidate("a", 0, 1.00, 0),
                                      candidate("c", 2, 1.50, 2)};
  order_by_median(c, kMargin);
  EXPECT_EQ(names(c), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(MeasuredChoice, TieBrokenByWorkspaceThenAlgorithmWhenUnlisted) {
  std::vector<MeasuredCandidate> c = {candidate("big", 3, 1.00, -1, 1 << 20), candidate("small", 5, 1.01, -1, 1024),
                                      candidate("listed", 7, 1.02, 4, 1 << 30), candidate("none", 2, 1.01, -1, 1024)};
  order_by_median(c, kMargin);
  EXPECT_EQ(names(c), (std::vector<std::string>{"listed", "none", "small", "big"}));
}

TEST(MeasuredChoice, FailedCandidatesAreDropped) {
  std::vector<MeasuredCandidate> c = {candidate("failed", 0, std::nan(""), 0), candidate("ok", 1, 2.0, 1),
                                      candidate("inf", 2, INFINITY, 2)};
  order_by_median(c, kMargin);
  EXPECT_EQ(names(c), (std::vector<std::string>{"ok"}));
}

TEST(MeasuredChoice, NoiseDoesNotFlipTheChoiceAcrossProcesses) {
  // Two candidates 1% apart in truth; each "process" measures 7 repetitions
  // with up to ±1% jitter per run and 2% of runs ten times slower (a clock
  // dip, another launch). Fastest-median-wins would flip between processes;
  // with the tie rule every process picks the same one.
  std::mt19937 generator(2017);
  std::uniform_real_distribution<double> jitter(0.99, 1.01);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const auto measure = [&](double truth) {
    std::vector<double> runs;
    for (int i = 0; i < 7; ++i) runs.push_back(truth * jitter(generator) * (unit(generator) < 0.02 ? 10.0 : 1.0));
    return median_ms(runs);
  };
  int plain_flips = 0;
  for (int process = 0; process < 200; ++process) {
    std::vector<MeasuredCandidate> c = {candidate("second_choice", 1, measure(1.00), 1),
                                        candidate("first_choice", 0, measure(0.995), 0)};
    if (c[0].median_ms < c[1].median_ms) ++plain_flips;
    order_by_median(c, kMargin);
    ASSERT_EQ(c.front().name, "first_choice") << "process " << process;
  }
  EXPECT_GT(plain_flips, 10);  // the noise is real: without the rule the choice would differ
}

TEST(MeasuredChoice, ATieOfZeroTakesTheFastestMedianAndAMarginMovesTheBoundary) {
  // engine.search_tie: the tie rule keeps the heuristic's choice up to the margin slower, so a
  // candidate near the boundary (here 2.9% and 3.1% faster in two processes) flips the choice
  // between processes by the whole margin; a tie of 0 takes the fastest median in both.
  for (const double faster : {0.971, 0.969}) {
    std::vector<MeasuredCandidate> c = {candidate("first_choice", 0, 1.00, 0), candidate("fastest", 1, faster, 1)};
    std::vector<MeasuredCandidate> margin = c;
    order_by_median(margin, 0.03);
    EXPECT_EQ(margin.front().name, faster > 0.97 ? "first_choice" : "fastest") << faster;
    order_by_median(c, 0.0);
    EXPECT_EQ(c.front().name, "fastest") << faster;
  }
  // Equal medians are still a tie at 0: the fixed order decides.
  std::vector<MeasuredCandidate> equal = {candidate("second", 1, 1.0, 1), candidate("first", 0, 1.0, 0)};
  order_by_median(equal, 0.0);
  EXPECT_EQ(names(equal), (std::vector<std::string>{"first", "second"}));
  EXPECT_TRUE(clearly_faster(0.99, 1.00, 0.0));
  EXPECT_FALSE(clearly_faster(0.99, 1.00, 0.03));
  EXPECT_FALSE(clearly_faster(1.00, 1.00, 0.0));
}

TEST(MeasuredChoice, ClearlyFasterNeedsMoreThanTheMargin) {
  EXPECT_TRUE(clearly_faster(0.90, 1.00, kMargin));
  EXPECT_FALSE(clearly_faster(0.98, 1.00, kMargin));
  EXPECT_FALSE(clearly_faster(1.10, 1.00, kMargin));
  EXPECT_FALSE(clearly_faster(std::nan(""), 1.00, kMargin));
  EXPECT_FALSE(clearly_faster(0.5, std::nan(""), kMargin));
}

// ---- The key -------------------------------------------------------------------

ConvolutionSignature conv1() {
  ConvolutionSignature s;
  s.x = {"f32", {64, 3, 224, 224}, {150528, 50176, 224, 1}};
  s.y = {"f32", {64, 64, 55, 55}, {193600, 3025, 55, 1}};
  s.filter_type = "f32";
  s.filter_format = "nchw";
  s.filter_dims = {64, 3, 11, 11};
  s.padding = {2, 2};
  s.stride = {4, 4};
  s.dilation = {1, 1};
  s.mode = "xcorr";
  s.compute_type = "f32";
  s.math = "fma";
  s.workspace_limit_bytes = 1 << 30;
  return s;
}

TEST(ConvolutionSignature, TextNamesEveryField) {
  EXPECT_EQ(conv1().text(),
            "x=f32[64,3,224,224/150528,50176,224,1] w=f32:nchw[64,3,11,11] y=f32[64,64,55,55/193600,3025,55,1] "
            "pad=2,2 stride=4,4 dilation=1,1 groups=1 mode=xcorr compute=f32 math=fma workspace_limit=1073741824");
}

TEST(ConvolutionSignature, EveryFieldThatDecidesSpeedChangesTheKey) {
  const std::string base = conv1().text();
  std::vector<ConvolutionSignature> variants(10, conv1());
  variants[0].x.type = "bf16";
  variants[1].x.strides = {150528, 1, 672, 3};  // NHWC
  variants[2].y.strides = {387200, 3025, 55, 1};  // a slice of a concat
  variants[3].filter_format = "nhwc";
  variants[4].filter_dims[0] = 96;
  variants[5].padding = {1, 1};
  variants[6].stride = {2, 2};
  variants[7].math = "default";  // tf32 against strict fp32
  variants[8].workspace_limit_bytes = 256 << 20;
  variants[9].x.dims[0] = 32;
  for (std::size_t i = 0; i < variants.size(); ++i) EXPECT_NE(variants[i].text(), base) << i;
  EXPECT_EQ(conv1().text(), base);
}

// ---- The cache -----------------------------------------------------------------

TEST_F(TempDir, InMemoryCacheCountsHitsAndMissesAndWritesNothing) {
  AlgorithmCache cache({}, kH200);
  EXPECT_FALSE(cache.file_backed());
  EXPECT_EQ(cache.find("conv.fwd A"), nullptr);
  cache.insert("conv.fwd A", sample_choice());
  const MeasuredChoice* found = cache.find("conv.fwd A");
  ASSERT_NE(found, nullptr);
  expect_same(*found, sample_choice());
  EXPECT_EQ(cache.counts().hits, 1);
  EXPECT_EQ(cache.counts().misses, 1);
  cache.save();
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST_F(TempDir, MissingFileIsAnEmptyCacheAndSaveCreatesIt) {
  AlgorithmCache cache(file, kH200);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_FALSE(fs::exists(file));
  cache.insert("conv.fwd A", sample_choice());
  cache.save();
  ASSERT_TRUE(fs::exists(file));
  // Atomic: the temporary is gone, and a lock file is all that is left beside it.
  for (const auto& entry : fs::directory_iterator(dir))
    EXPECT_TRUE(entry.path() == file || entry.path().string() == file.string() + ".lock") << entry.path();
}

TEST_F(TempDir, WarmCacheReplaysEveryRecordExactly) {
  {
    AlgorithmCache cold(file, kH200);
    cold.insert("conv.fwd A", sample_choice());
    MeasuredChoice other;
    other.candidates = {candidate("im2col_gemm", -1, 0.5)};
    cold.insert("im2col_gemm.fwd A", other);
    cold.save();
  }
  AlgorithmCache warm(file, kH200);
  ASSERT_EQ(warm.size(), 2u);
  const MeasuredChoice* a = warm.find("conv.fwd A");
  ASSERT_NE(a, nullptr);
  expect_same(*a, sample_choice());
  const MeasuredChoice* b = warm.find("im2col_gemm.fwd A");
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->candidates.size(), 1u);
  EXPECT_EQ(b->candidates[0].name, "im2col_gemm");
  EXPECT_EQ(b->candidates[0].median_ms, 0.5);
  EXPECT_EQ(warm.counts().hits, 2);
  EXPECT_EQ(warm.counts().misses, 0);
}

TEST_F(TempDir, FileIsReadableJsonWithFormatAndContext) {
  AlgorithmCache cache(file, kH200);
  cache.insert("conv.fwd A", sample_choice());
  cache.save();
  const nlohmann::json j = nlohmann::json::parse(read());
  EXPECT_EQ(j.at("format"), "crossbench-algorithm-cache/1");
  ASSERT_EQ(j.at("records").size(), 1u);
  const auto& record = j.at("records")[0];
  EXPECT_EQ(record.at("device"), kH200.device);
  EXPECT_EQ(record.at("libraries"), kH200.libraries);
  EXPECT_EQ(record.at("signature"), "conv.fwd A");
  EXPECT_EQ(record.at("candidates")[0].at("name"), "IMPLICIT_PRECOMP_GEMM/tc");
  EXPECT_EQ(record.at("candidates")[0].at("median_ms"), 0.125);
  EXPECT_TRUE(record.at("candidates")[2].at("median_ms").is_null());  // NaN is written as null
  EXPECT_NE(read().find('\n'), read().rfind('\n'));                     // indented: one field a line
}

TEST_F(TempDir, OtherDevicesAndLibrariesAreIgnoredButKept) {
  const MeasurementContext h100{"NVIDIA H100 cc=9.0 sms=132", kH200.libraries};
  const MeasurementContext newer{kH200.device, "cudnn=9.20.0 cublas=12.9.1 cudart=12.9"};
  for (const MeasurementContext& context : {h100, newer}) {
    AlgorithmCache other(file, context);
    other.insert("conv.fwd A", sample_choice());
    other.save();
  }
  AlgorithmCache cache(file, kH200);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.find("conv.fwd A"), nullptr);
  EXPECT_EQ(cache.counts().misses, 1);
  cache.insert("conv.fwd B", sample_choice());
  cache.save();
  const nlohmann::json j = nlohmann::json::parse(read());
  ASSERT_EQ(j.at("records").size(), 3u);  // the H100's, the newer cuDNN's and ours
  AlgorithmCache again(file, h100);
  EXPECT_NE(again.find("conv.fwd A"), nullptr);
  EXPECT_EQ(again.find("conv.fwd B"), nullptr);
}

TEST_F(TempDir, SaveMergesWhatAnotherProcessAppended) {
  AlgorithmCache first(file, kH200), second(file, kH200);  // both opened the missing file
  first.insert("conv.fwd A", sample_choice());
  second.insert("conv.fwd B", sample_choice());
  first.save();
  second.save();
  AlgorithmCache merged(file, kH200);
  EXPECT_EQ(merged.size(), 2u);
  EXPECT_NE(merged.find("conv.fwd A"), nullptr);
  EXPECT_NE(merged.find("conv.fwd B"), nullptr);
}

TEST_F(TempDir, CorruptFilesAreRefusedWithTheirName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"format\": ", "not valid JSON"},
      {"[1, 2]", "top level is not a JSON object"},
      {"{\"records\": []}", "has no 'format'"},
      {"{\"format\": \"something-else/3\", \"records\": []}", "format 'something-else/3'"},
      {"{\"format\": \"crossbench-algorithm-cache/1\"}", "has no 'records'"},
      {"{\"format\": \"crossbench-algorithm-cache/1\", \"records\": [{\"device\": \"d\", \"libraries\": \"l\"}]}",
       "record 0 has no 'signature'"},
      {"{\"format\": \"crossbench-algorithm-cache/1\", \"records\": [{\"device\": \"d\", \"libraries\": \"l\", "
       "\"signature\": \"s\", \"candidates\": [{\"name\": 3}]}]}",
       "'name' has the wrong type"},
      {"{\"format\": \"crossbench-algorithm-cache/1\", \"records\": [{\"device\": \"d\", \"libraries\": \"l\", "
       "\"signature\": \"s\", \"candidates\": [{\"name\": \"x\", \"algorithm\": 1, \"math\": 0, "
       "\"workspace_bytes\": 0, \"heuristic_rank\": 0, \"repetitions\": 7, \"median_ms\": \"fast\"}]}]}",
       "'median_ms' is neither a number nor null"},
  };
  for (const auto& [text, expected] : cases) {
    write(text);
    try {
      AlgorithmCache cache(file, kH200);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const UsageError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find(file.string()), std::string::npos) << message;
      EXPECT_NE(message.find(expected), std::string::npos) << message;
    }
  }
}

TEST_F(TempDir, DirectoryIsRefused) {
  EXPECT_THROW(AlgorithmCache(dir, kH200), UsageError);
}

TEST_F(TempDir, ThisProcessesRecordsWinOverTheFilesOnSave) {
  {
    AlgorithmCache earlier(file, kH200);
    earlier.insert("conv.fwd A", sample_choice());
    earlier.save();
  }
  MeasuredChoice mine;
  mine.candidates = {candidate("WINOGRAD/tc", 6, 0.1, 2)};
  AlgorithmCache backed(file, kH200);
  backed.insert("conv.fwd A", mine);
  backed.save();
  AlgorithmCache reread(file, kH200);
  const MeasuredChoice* found = reread.find("conv.fwd A");
  ASSERT_NE(found, nullptr);
  expect_same(*found, mine);
}

}  // namespace
}  // namespace crossbench::cudnn
