// The cell vocabulary (core): every precision names its recipe once, the
// native engines' refusal of the frameworks' amp-* recipes says why, one cell
// key, one expansion of the matrix and one failure-to-status mapping.
#include <gtest/gtest.h>

#include <algorithm>
#include <new>
#include <stdexcept>
#include <string>

#include "crossbench/cell.hpp"
#include "crossbench/error.hpp"
#include "crossbench/stop_flag.hpp"

namespace crossbench {
namespace {

TEST(Recipes, EveryPrecisionNamesItsRecipe) {
  for (const std::string& name : precision_names()) {
    const Precision precision = *precision_from_string(name);
    const std::string recipe(recipe_of(precision));
    EXPECT_EQ(recipe.rfind("recipe=", 0), 0u) << recipe;
    EXPECT_NE(recipe.find(" ("), std::string::npos) << recipe;  // the name, then what it means
  }
  EXPECT_EQ(recipe_of(Precision::fp32).substr(0, 19), "recipe=fp32-strict ");
  EXPECT_NE(recipe_of(Precision::tf32).find("TF32 tensor-core math"), std::string::npos);
  EXPECT_EQ(recipe_of(Precision::bf16),
            "recipe=pure-bf16 (bf16 weights, activations, gradients; fp32 accumulation, loss and batch-norm statistics)");
  EXPECT_NE(recipe_of(Precision::amp_bf16).find("fp32 master weights"), std::string::npos);
  EXPECT_NE(recipe_of(Precision::amp_fp16), recipe_of(Precision::amp_bf16));
}

TEST(Recipes, MixedPrecisionRefusalNamesTheEngineAndWhatItRunsInstead) {
  const std::string why = mixed_precision_refusal(Precision::amp_bf16, "cudnn", "bf16");
  EXPECT_EQ(why.rfind("amp-bf16 is the frameworks' mixed-precision recipe", 0), 0u) << why;
  EXPECT_NE(why.find("cudnn engine keeps no fp32 master copy"), std::string::npos) << why;
  EXPECT_NE(why.find("precision bf16"), std::string::npos) << why;
}

// The one key of a cell within a run: the device key, then describe(cell),
// so that the journal, the plan, resume and the cube's layer-time index agree.
TEST(CellKey, IsTheDeviceKeyThenTheCellsDescription) {
  const CellSpec cell{"onednn", "alexnet", Precision::bf16, 64, Phase::training, 1, 2};
  EXPECT_EQ(cell_key("Xeon|8 cores", cell), "Xeon|8 cores|onednn/alexnet/bf16/b64/training/g2/r1");
  CellSpec other_replica = cell;
  other_replica.replica = 0;
  EXPECT_NE(cell_key("dev", cell), cell_key("dev", other_replica));
  EXPECT_NE(cell_key("dev", cell), cell_key("dev2", cell));
}

// The one expansion of the matrix: every combination once, in matrix order
// (engine outermost, replica innermost).
TEST(ExpandMatrix, EveryCombinationOnceInMatrixOrder) {
  MatrixOptions matrix;
  matrix.networks = {"alexnet", "vgg11"};
  matrix.precisions = {Precision::fp32, Precision::tf32};
  matrix.batches = {1, 64};
  matrix.phases = {Phase::inference, Phase::training};
  matrix.gpus = {1, 2};
  const std::vector<CellSpec> cells = expand_matrix(matrix, {"cudnn", "pytorch"}, 3);
  ASSERT_EQ(cells.size(), 2u * 2 * 2 * 2 * 2 * 2 * 3);
  EXPECT_EQ(cells.front(), (CellSpec{"cudnn", "alexnet", Precision::fp32, 1, Phase::inference, 0, 1}));
  EXPECT_EQ(cells[1], (CellSpec{"cudnn", "alexnet", Precision::fp32, 1, Phase::inference, 1, 1}));
  EXPECT_EQ(cells[3], (CellSpec{"cudnn", "alexnet", Precision::fp32, 1, Phase::inference, 0, 2}));
  EXPECT_EQ(cells.back(), (CellSpec{"pytorch", "vgg11", Precision::tf32, 64, Phase::training, 2, 2}));
  std::vector<std::string> keys;
  for (const CellSpec& cell : cells) keys.push_back(cell_key("d", cell));
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end()) << "a cell twice";
  EXPECT_TRUE(expand_matrix(matrix, {}, 1).empty());
}

// The one failure-to-status mapping of run and check.
TEST(CellFailureMapping, EveryFailureHasItsStatusAndMessage) {
  const auto failure_of = [](auto thrown) {
    try {
      throw thrown;
    } catch (...) {
      return cell_failure(std::current_exception());
    }
  };
  const auto expect = [](const CellFailure& failure, Status status, const std::string& message) {
    EXPECT_EQ(failure.status, status) << to_string(failure.status) << ": " << failure.message;
    EXPECT_EQ(failure.message, message);
  };
  expect(failure_of(Unsupported("no bf16 here")), Status::unsupported, "no bf16 here");
  expect(failure_of(CellInterrupted("stopped by signal 15")), Status::not_run, "stopped by signal 15");
  expect(failure_of(CellTimeout("worker silent for 600 s")), Status::timeout, "worker silent for 600 s");
  expect(failure_of(OutOfMemory("cudaMalloc of 8 GiB")), Status::oom, "cudaMalloc of 8 GiB");
  expect(failure_of(std::bad_alloc()), Status::oom, "host allocation failed (std::bad_alloc)");
  expect(failure_of(Error("cudnnConvolutionForward failed")), Status::failed, "cudnnConvolutionForward failed");
  expect(failure_of(std::runtime_error("anything else")), Status::failed, "anything else");
  expect(failure_of(42), Status::failed, "unknown exception");
}

}  // namespace
}  // namespace crossbench
