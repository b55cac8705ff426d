// measure.oom_boundary = stop (src/cluster/oom_boundary.hpp): what an oom
// teaches about its series, and the run order that lets it.
#include "cluster/oom_boundary.hpp"

#include <gtest/gtest.h>

namespace crossbench {
namespace {

CellSpec cell(std::int64_t batch, Precision precision = Precision::bf16, Phase phase = Phase::training) {
  return {"cudnn", "resnet50", precision, batch, phase};
}

CellResult finished(const std::string& device_key, const CellSpec& spec, Status status) {
  CellResult result;
  result.device_key = device_key;
  result.cell = spec;
  result.status = status;
  return result;
}

TEST(OomBoundary, AnOomBoundsItsSeriesAndNothingElse) {
  OomBoundary boundary;
  boundary.note(finished("H200", cell(512), Status::ok));
  boundary.note(finished("H200", cell(2048), Status::failed));  // not memory: teaches nothing
  EXPECT_FALSE(boundary.exceeded_by("H200", cell(4096)));
  boundary.note(finished("H200", cell(2048), Status::oom));
  EXPECT_EQ(boundary.exceeded_by("H200", cell(4096)), 2048);
  EXPECT_FALSE(boundary.exceeded_by("H200", cell(2048)));  // the batch itself ran
  EXPECT_FALSE(boundary.exceeded_by("H200", cell(1024)));
  EXPECT_FALSE(boundary.exceeded_by("A100", cell(4096)));  // another device key
  EXPECT_FALSE(boundary.exceeded_by("H200", cell(4096, Precision::tf32)));
  EXPECT_FALSE(boundary.exceeded_by("H200", cell(4096, Precision::bf16, Phase::inference)));
  CellSpec replica = cell(4096);
  replica.replica = 1;  // another device of the key: the same memory
  EXPECT_EQ(boundary.exceeded_by("H200", replica), 2048);
  boundary.note(finished("H200", cell(1024), Status::oom));  // a smaller oom lowers it
  EXPECT_EQ(boundary.exceeded_by("H200", cell(2048)), 1024);
  boundary.note(finished("H200", cell(4096), Status::oom));  // a larger one does not raise it
  EXPECT_EQ(boundary.exceeded_by("H200", cell(2048)), 1024);
}

TEST(OomBoundary, APastCellIsOomNotRunAndNamesTheBatchThatRanOut) {
  const CellResult result = OomBoundary::past_boundary("H200", cell(4096), 3, 2048);
  EXPECT_EQ(result.status, Status::oom);
  EXPECT_EQ(result.rank, 3);
  EXPECT_EQ(result.device_key, "H200");
  EXPECT_EQ(result.cell.batch, 4096);
  EXPECT_NE(result.message.find("not run: past the OOM boundary"), std::string::npos) << result.message;
  EXPECT_NE(result.message.find("batch 2048"), std::string::npos) << result.message;
  EXPECT_FALSE(result.started_utc.empty());
  EXPECT_EQ(result.started_utc, result.finished_utc);
}

TEST(OomBoundary, EachSeriesRunsSmallestFirstInThePositionsItHeld) {
  // The plan's longest-first order: large batches first, two series interleaved, another key's cell.
  std::vector<PlannedCell> cells;
  const auto add = [&](const std::string& key, const CellSpec& spec) {
    PlannedCell planned;
    planned.device_key = key;
    planned.cell = spec;
    planned.rank = static_cast<int>(cells.size()) % 2;
    cells.push_back(planned);
  };
  add("H200", cell(4096));
  add("H200", cell(4096, Precision::tf32));
  add("H200", cell(1024));
  add("A100", cell(4096));
  add("H200", cell(1));
  add("H200", cell(1024, Precision::tf32));
  const std::vector<int> ranks_before{cells[0].rank, cells[1].rank, cells[2].rank, cells[3].rank, cells[4].rank, cells[5].rank};
  order_series_by_batch(cells);
  std::vector<std::string> order;
  for (const auto& planned : cells)
    order.push_back(planned.device_key + " " + std::string(to_string(planned.cell.precision)) + " " + std::to_string(planned.cell.batch));
  EXPECT_EQ(order, (std::vector<std::string>{"H200 bf16 1", "H200 tf32 1024", "H200 bf16 1024", "A100 bf16 4096",
                                             "H200 bf16 4096", "H200 tf32 4096"}));
  // Each cell keeps its rank: a rank's set of cells is the plan's.
  std::vector<int> ranks_of_batch_4096_bf16;
  for (const auto& planned : cells)
    if (planned.device_key == "H200" && planned.cell.precision == Precision::bf16 && planned.cell.batch == 4096)
      ranks_of_batch_4096_bf16.push_back(planned.rank);
  EXPECT_EQ(ranks_of_batch_4096_bf16, (std::vector<int>{ranks_before[0]}));
}

}  // namespace
}  // namespace crossbench
