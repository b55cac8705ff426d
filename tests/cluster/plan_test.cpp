#include "cluster/plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "crossbench/cell.hpp"
#include "crossbench/error.hpp"

namespace crossbench {
namespace {

TEST(LongestFirst, BalancesKnownCosts) {
  // Costs 7 5 4 3 3 2 on two ranks: LPT gives 7+3+2 | 5+4+3 = 12 | 12, the ideal.
  std::vector<double> load(2, 0.0);
  const Assignment a = assign_longest_first({3, 7, 2, 5, 4, 3}, {"a", "b", "c", "d", "e", "f"}, {0, 1}, load);
  EXPECT_EQ(a.order, (std::vector<std::size_t>{1, 3, 4, 0, 5, 2}));
  EXPECT_EQ(a.rank_of_item, (std::vector<int>{0, 0, 0, 1, 1, 1}));
  EXPECT_DOUBLE_EQ(load[0], 12);
  EXPECT_DOUBLE_EQ(load[1], 12);
}

TEST(LongestFirst, ConflictClassesGoToDistinctRanks) {
  // Three replicas of one expensive cell must land on three different ranks even
  // though a single rank would be least loaded for each of them.
  std::vector<double> load(4, 0.0);
  const Assignment a = assign_longest_first({1, 10, 10, 10}, {"small", "big", "big", "big"}, {0, 1, 2, 3}, load);
  std::set<int> ranks{a.rank_of_item[1], a.rank_of_item[2], a.rank_of_item[3]};
  EXPECT_EQ(ranks.size(), 3u);
  EXPECT_EQ(a.rank_of_item[0], 3);  // the small one goes to the only idle rank
}

TEST(LongestFirst, NoFreeRankIsReported) {
  std::vector<double> load(1, 0.0);
  const Assignment a = assign_longest_first({1, 1}, {"x", "x"}, {0}, load);
  EXPECT_EQ(a.rank_of_item[1], -1);
}

Options seed_like_options() {
  Options options;
  options.matrix.networks = {"alexnet", "overfeat", "vgg11", "googlenet", "resnet50", "resnet101", "resnet152"};
  options.matrix.engines = {"auto"};
  options.matrix.precisions = {Precision::fp32};
  options.matrix.batches = {64};
  options.matrix.phases = {Phase::inference, Phase::training};
  return options;
}

Device cpu_device(const std::string& tag) {
  Device device;
  device.model = "Test CPU";
  device.memory_bytes = 64LL << 30;
  device.compute_units = 8;
  device.architecture = "avx2";
  device.peak_fp32_tflops = 1.0;
  device.tag = tag;
  return device;
}

TEST(Plan, EveryCellOnceAndDeterministic) {
  const Options options = seed_like_options();
  const std::vector<Device> devices(4, cpu_device(""));
  const Plan first = make_plan(options, devices);
  const Plan second = make_plan(options, devices);
  ASSERT_EQ(first.cells.size(), 14u);
  std::set<std::string> seen;
  for (std::size_t i = 0; i < first.cells.size(); ++i) {
    EXPECT_TRUE(seen.insert(describe(first.cells[i].cell)).second);
    EXPECT_EQ(describe(first.cells[i].cell), describe(second.cells[i].cell));
    EXPECT_EQ(first.cells[i].rank, second.cells[i].rank);
    EXPECT_GE(first.cells[i].rank, 0);
    EXPECT_EQ(first.cells[i].cell.engine, "onednn");  // auto on a CPU
  }
  double total = 0;
  for (double load : first.rank_load_s) total += load;
  EXPECT_NEAR(total, first.total_s, 1e-9);
  EXPECT_GE(first.makespan_s, first.total_s / 4);
}

TEST(Plan, GroupsByDeviceKeyAndTag) {
  const Options options = seed_like_options();
  const std::vector<Device> devices{cpu_device("a"), cpu_device("b"), cpu_device("a"), cpu_device("b")};
  const Plan plan = make_plan(options, devices);
  ASSERT_EQ(plan.groups.size(), 2u);
  EXPECT_EQ(plan.groups[0].ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(plan.groups[1].ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(plan.cells.size(), 28u);  // the whole matrix once per group
  for (const auto& planned : plan.cells) {
    const auto& group = planned.device_key == plan.groups[0].key ? plan.groups[0] : plan.groups[1];
    EXPECT_NE(std::find(group.ranks.begin(), group.ranks.end(), planned.rank), group.ranks.end());
  }
}

TEST(Plan, ReplicasNeedEnoughRanks) {
  Options options = seed_like_options();
  options.replicas = 3;
  EXPECT_THROW(make_plan(options, std::vector<Device>(2, cpu_device(""))), UsageError);
  const Plan plan = make_plan(options, std::vector<Device>(3, cpu_device("")));
  EXPECT_EQ(plan.cells.size(), 42u);
  // Replicas of one cell run on distinct ranks.
  for (const auto& a : plan.cells)
    for (const auto& b : plan.cells)
      if (&a != &b && a.cell.network == b.cell.network && a.cell.phase == b.cell.phase) EXPECT_NE(a.rank, b.rank);
}

TEST(Plan, SeedJobIsWellBalancedOnFourRanks) {
  const Plan plan = make_plan(seed_like_options(), std::vector<Device>(4, cpu_device("")));
  // 14 cells of very different cost on 4 ranks: LPT keeps the makespan near the ideal.
  EXPECT_LT(plan.makespan_s / (plan.total_s / 4), 1.15);
}

TEST(Plan, WithoutCalibrationEveryCellIsTheModelWithItsPreparation) {
  const Plan plan = make_plan(seed_like_options(), std::vector<Device>(2, cpu_device("")));
  for (const auto& planned : plan.cells) {
    EXPECT_EQ(planned.estimate_source, kEstimateModel);
    EXPECT_GT(planned.model.preparation_s, 0);  // preparation is part of every runnable cell's cost
    EXPECT_DOUBLE_EQ(planned.estimated_s, planned.model.total_s());
  }
  EXPECT_TRUE(plan.calibration.empty());
}

TEST(Plan, CalibrationUsesRecordedSecondsAndScalesTheRest) {
  Options options = seed_like_options();
  options.matrix.networks = {"alexnet", "resnet50"};
  options.matrix.phases = {Phase::inference};
  const std::vector<Device> devices{cpu_device("a"), cpu_device("b")};
  const Plan model = make_plan(options, devices);
  const auto find = [](const Plan& plan, const std::string& key, const std::string& network) {
    for (const auto& planned : plan.cells)
      if (planned.device_key == key && planned.cell.network == network) return planned;
    ADD_FAILURE() << key << " " << network;
    return PlannedCell{};
  };
  const std::string a = cpu_device("a").key(), b = cpu_device("b").key();
  const PlannedCell alexnet = find(model, a, "alexnet");
  // Device a recorded alexnet at 4x the model; device b recorded nothing.
  RecordedWallTimes recorded;
  recorded.cubes = {"earlier.h5"};
  recorded.seconds[cell_key(a, alexnet.cell)] = 4 * alexnet.model.total_s();
  const Plan plan = make_plan(options, devices, {}, &recorded);
  EXPECT_EQ(find(plan, a, "alexnet").estimate_source, kEstimateRecorded);
  EXPECT_DOUBLE_EQ(find(plan, a, "alexnet").estimated_s, 4 * alexnet.model.total_s());
  const PlannedCell resnet = find(plan, a, "resnet50");
  EXPECT_EQ(resnet.estimate_source, kEstimateScaledModel);
  EXPECT_NEAR(resnet.estimated_s, std::min(4 * resnet.model.total_s(), options.measure.cell_time_limit_s), 1e-9);
  EXPECT_EQ(find(plan, b, "resnet50").estimate_source, kEstimateModel);  // nothing matched on b
  ASSERT_EQ(plan.calibration.size(), 2u);
  EXPECT_EQ(plan.calibration[0].device_key, a);
  EXPECT_EQ(plan.calibration[0].matched_cells, 1);
  EXPECT_DOUBLE_EQ(plan.calibration[0].factor, 4);
  EXPECT_EQ(plan.calibration[1].matched_cells, 0);
  EXPECT_TRUE(std::isnan(plan.calibration[1].factor));
  EXPECT_EQ(plan.calibration_cubes, recorded.cubes);
}

TEST(Plan, AMissingCalibrationCubeIsBadInputNamingIt) {
  try {
    static_cast<void>(read_recorded_wall_times({"/nonexistent/earlier.h5"}));
    FAIL() << "a missing cube was accepted";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("/nonexistent/earlier.h5"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace crossbench
