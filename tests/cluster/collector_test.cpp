// Rank 0's Collector: each planned cell once, to every reporter in order
// (the cube's first), earlier results of a resume kept but not reported
// again, and how the run ended handed to every reporter with all results.
#include "cluster/collector.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "crossbench/error.hpp"

namespace crossbench {
namespace {

// Logs what it receives, into a log shared by every reporter of the test.
class RecordingReporter final : public Reporter {
 public:
  RecordingReporter(std::string name, std::vector<std::string>& log) : name_(std::move(name)), log_(log) {}
  void report_cell(const CellResult& result, double estimated_s) override {
    log_.push_back(name_ + " cell " + describe(result.cell) + " " + std::to_string(static_cast<int>(estimated_s)));
  }
  void idle() override { log_.push_back(name_ + " idle"); }
  void finish(const std::vector<CellResult>& results, const RunEnd& end) override {
    log_.push_back(name_ + " finish " + std::to_string(results.size()) + " " + end.run_state());
  }

 private:
  std::string name_;
  std::vector<std::string>& log_;
};

PlannedCell planned(const std::string& network, double estimated_s) {
  PlannedCell cell;
  cell.device_key = "cpu";
  cell.cell = {"onednn", network, Precision::fp32, 1, Phase::inference, 0};
  cell.estimated_s = estimated_s;
  return cell;
}

CellResult result_of(const PlannedCell& cell, Status status) {
  CellResult result;
  result.device_key = cell.device_key;
  result.cell = cell.cell;
  result.status = status;
  return result;
}

TEST(Collector, EveryPlannedCellOnceToEveryReporterInOrder) {
  Plan plan;
  plan.cells = {planned("alexnet", 3), planned("vgg11", 7), planned("googlenet", 5)};
  std::vector<std::string> log;
  std::vector<std::unique_ptr<Reporter>> reporters;
  reporters.push_back(std::make_unique<RecordingReporter>("cube", log));
  reporters.push_back(std::make_unique<RecordingReporter>("console", log));
  const CellResult earlier = result_of(plan.cells[2], Status::ok);  // a resumed journal's
  Collector collector(plan, {earlier}, std::move(reporters));

  collector.add(result_of(plan.cells[1], Status::ok));
  EXPECT_EQ(log, (std::vector<std::string>{"cube cell onednn/vgg11/fp32/b1/inference/r0 7",
                                           "console cell onednn/vgg11/fp32/b1/inference/r0 7"}));
  EXPECT_THROW(collector.add(result_of(plan.cells[1], Status::ok)), Error) << "a cell reported twice";
  CellResult stranger = result_of(plan.cells[0], Status::ok);
  stranger.device_key = "gpu";
  EXPECT_THROW(collector.add(stranger), Error) << "a cell outside the plan";
  collector.add(result_of(plan.cells[0], Status::not_run));  // a cell a stop interrupted
  EXPECT_EQ(collector.results().size(), 3u);
  EXPECT_EQ(collector.new_final_results(), 1u);  // not_run is not final

  log.clear();
  collector.idle();
  RunEnd end;
  end.complete = false;
  end.cells_not_run = 1;
  end.stop_signal = 15;
  collector.finish(end);
  const std::string state = "incomplete: stopped by signal 15 with 1 cells not run; resume with --resume";
  EXPECT_EQ(log, (std::vector<std::string>{"cube idle", "console idle", "cube finish 3 " + state,
                                           "console finish 3 " + state}));
  EXPECT_EQ(RunEnd{}.run_state(), "complete");
}

// Run segments: every new result is recorded as measured by this run's segment
// before a reporter (the journal first) sees it; a resumed journal's results
// keep the segment that measured them.
class SegmentReporter final : public Reporter {
 public:
  explicit SegmentReporter(std::vector<std::int32_t>& seen) : seen_(seen) {}
  void report_cell(const CellResult& result, double) override { seen_.push_back(result.segment); }

 private:
  std::vector<std::int32_t>& seen_;
};

TEST(Collector, NewResultsRecordThisRunsSegment) {
  Plan plan;
  plan.cells = {planned("alexnet", 3), planned("vgg11", 7)};
  std::vector<std::int32_t> seen;
  std::vector<std::unique_ptr<Reporter>> reporters;
  reporters.push_back(std::make_unique<SegmentReporter>(seen));
  CellResult earlier = result_of(plan.cells[0], Status::ok);
  earlier.segment = 0;  // measured by the first run
  Collector collector(plan, {earlier}, std::move(reporters), 1);
  CellResult fresh = result_of(plan.cells[1], Status::ok);
  fresh.segment = -1;
  collector.add(fresh);
  EXPECT_EQ(seen, (std::vector<std::int32_t>{1}));
  ASSERT_EQ(collector.results().size(), 2u);
  EXPECT_EQ(collector.results()[0].segment, 0);
  EXPECT_EQ(collector.results()[1].segment, 1);
}

}  // namespace
}  // namespace crossbench
