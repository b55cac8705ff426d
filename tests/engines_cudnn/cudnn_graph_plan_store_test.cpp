// engine.graph_plan_reuse's store and its file beside the algorithm cache (plain C++, cpu): what one
// process keeps, the next reads in its own context only; other contexts' plans survive a save; two
// processes saving one file lose nothing; a file that is not a store is refused by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "crossbench/error.hpp"
#include "engines/cudnn/graph_plan_store.hpp"

namespace crossbench::cudnn {
namespace {

namespace fs = std::filesystem;

const std::string kH200 = "NVIDIA H200 cc=90 sms=132 | cudnn=9.14.0 cublas=13.1.0";
const std::string kH100 = "NVIDIA H100 80GB HBM3 cc=90 sms=132 | cudnn=9.14.0 cublas=13.1.0";

class GraphPlanFile : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = fs::temp_directory_path() / ("cb_plan_store_" + std::to_string(::getpid()) + "_" +
                                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(directory_);
    fs::create_directories(directory_);
    file_ = directory_ / "algorithms.json.plans";
  }
  void TearDown() override { fs::remove_all(directory_); }
  void write(const std::string& bytes) const {
    std::ofstream out(file_, std::ios::binary);
    out << bytes;
  }
  fs::path directory_, file_;
};

std::vector<std::uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

TEST_F(GraphPlanFile, AMissingFileIsAnEmptyStoreAndTheFirstSaveWritesIt) {
  GraphPlanStore store(file_, kH200);
  EXPECT_EQ(store.plans(), 0);
  EXPECT_EQ(store.loaded(), 0);
  EXPECT_FALSE(fs::exists(file_));
  store.save();
  EXPECT_FALSE(fs::exists(file_)) << "nothing kept: nothing written";
  store.keep("conv1;plan=eng4_k2=1", bytes_of(std::string("\0\x01\xff plan", 8)));
  store.save();
  ASSERT_TRUE(fs::exists(file_));
  GraphPlanStore next(file_, kH200);
  EXPECT_EQ(next.loaded(), 1);
  ASSERT_NE(next.find("conv1;plan=eng4_k2=1"), nullptr);
  EXPECT_EQ(*next.find("conv1;plan=eng4_k2=1"), bytes_of(std::string("\0\x01\xff plan", 8)))
      << "the bytes as kept, zeros and high bytes included";
}

TEST_F(GraphPlanFile, AnotherContextsPlansAreKeptButNeverFound) {
  {
    GraphPlanStore h100(file_, kH100);
    h100.keep("k", bytes_of("h100 bytes"));
    h100.save();
  }
  {
    GraphPlanStore h200(file_, kH200);
    EXPECT_EQ(h200.loaded(), 0);
    EXPECT_EQ(h200.find("k"), nullptr) << "bytes of another device or library are no plan here";
    h200.keep("k", bytes_of("h200 bytes"));
    h200.save();
  }
  GraphPlanStore h100(file_, kH100), h200(file_, kH200);
  ASSERT_NE(h100.find("k"), nullptr);
  ASSERT_NE(h200.find("k"), nullptr);
  EXPECT_EQ(*h100.find("k"), bytes_of("h100 bytes"));
  EXPECT_EQ(*h200.find("k"), bytes_of("h200 bytes"));
}

TEST_F(GraphPlanFile, TwoProcessesSavingOneFileLoseNothing) {
  GraphPlanStore first(file_, kH200), second(file_, kH200);  // both read it empty
  first.keep("a", bytes_of("plan a"));
  second.keep("b", bytes_of("plan b"));
  second.keep("a", bytes_of("second's a"));
  first.save();
  second.save();  // merges what first wrote; its own "a" stays its own
  GraphPlanStore reader(file_, kH200);
  EXPECT_EQ(reader.loaded(), 2);
  ASSERT_NE(reader.find("a"), nullptr);
  ASSERT_NE(reader.find("b"), nullptr);
  EXPECT_EQ(*reader.find("b"), bytes_of("plan b"));
  EXPECT_EQ(*second.find("a"), bytes_of("second's a")) << "the first kept stays, in the process that kept it";
}

TEST_F(GraphPlanFile, TheFirstKeptStays) {
  GraphPlanStore store;
  EXPECT_FALSE(store.file_backed());
  store.keep("k", bytes_of("first"));
  store.keep("k", bytes_of("second"));
  store.keep("empty", {});
  EXPECT_EQ(*store.find("k"), bytes_of("first"));
  EXPECT_EQ(store.find("empty"), nullptr) << "no bytes: nothing to restore";
  store.save();  // in memory: a no-op
}

void expect_refused(const fs::path& file, const std::string& message) {
  try {
    GraphPlanStore store(file, kH200);
    ADD_FAILURE() << "accepted; expected: " << message;
  } catch (const UsageError& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find(file.string()), std::string::npos) << text;
    EXPECT_NE(text.find(message), std::string::npos) << text;
  }
}

TEST_F(GraphPlanFile, AFileThatIsNotAStoreIsRefusedByName) {
  write("{\"format\": \"crossbench-algorithm-cache/1\"}");
  expect_refused(file_, "does not begin with the format's line");
  GraphPlanStore good(fs::path{}, kH200);
  good.keep("k", bytes_of("plan bytes"));
  const std::string whole = good.serialized();
  write(whole.substr(0, whole.size() - 3));
  expect_refused(file_, "record 0's plan claims 10 bytes");
  write(whole.substr(0, std::string("crossbench-graph-plans/1\n").size() + 2));
  expect_refused(file_, "record 0's context is cut short");
  fs::remove(file_);
  fs::create_directories(file_);
  expect_refused(file_, "is a directory");
}

}  // namespace
}  // namespace crossbench::cudnn
