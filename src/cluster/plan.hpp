// The plan: rank 0's (and every rank's, deterministically) split of the
// matrix over the ranks, grouped by device key (DESIGN.md "Distribution").
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "crossbench/device.hpp"
#include "crossbench/options.hpp"
#include "cluster/calibration.hpp"
#include "cluster/planned_cell.hpp"

namespace crossbench {

struct DeviceGroup {
  std::string key;
  Device device;             // the first rank's description
  std::vector<int> ranks;    // in rank order
};

struct Plan {
  std::vector<DeviceGroup> groups;   // in order of their first rank
  std::vector<PlannedCell> cells;    // every cell of every group, in the order ranks run them
  std::vector<double> rank_load_s;   // estimated busy time per rank [s]
  double makespan_s = 0;             // the largest rank load [s]
  double total_s = 0;                // the sum of all cells' estimates [s]
  // plan --calibrate: the cubes read and one fit per (device key, engine); empty otherwise.
  std::vector<std::filesystem::path> calibration_cubes;
  std::vector<CalibrationFit> calibration;
  CompileCacheState compile_cache;   // engine.compile_cache as the plan found it (cost_model.hpp)
  AlgorithmCacheState algorithm_cache;  // engine.algo_cache as the plan found it (cost_model.hpp)

  // The cells `rank` takes part in, in the order it runs them: the
  // data-parallel cells of its groups first (in one global order, so that the
  // ranks of a group meet), then its single-device cells.
  [[nodiscard]] std::vector<PlannedCell> cells_of(int rank) const;
};

// Engines of the matrix for one device kind: `auto` becomes the native engine.
[[nodiscard]] std::vector<std::string> resolve_engines(const std::vector<std::string>& engines, DeviceKind kind);

// Longest processing time first: items in decreasing cost (stable: ties keep
// their order) each go to the least-loaded rank (lowest rank on a tie) that
// holds no other item of the same conflict class (the replicas of one cell).
// `rank_load` [s] is indexed by rank and updated. Returns the item indices in
// assignment order and each item's rank (-1 when no rank is free of its class).
struct Assignment {
  std::vector<std::size_t> order;
  std::vector<int> rank_of_item;
};
[[nodiscard]] Assignment assign_longest_first(const std::vector<double>& costs, const std::vector<std::string>& conflict_classes,
                                const std::vector<int>& ranks, std::vector<double>& rank_load);
// The same, taking the items in decreasing `priorities` (one per item) while `costs` load the ranks.
[[nodiscard]] Assignment assign_longest_first(const std::vector<double>& costs, const std::vector<double>& priorities,
                                              const std::vector<std::string>& conflict_classes,
                                              const std::vector<int>& ranks, std::vector<double>& rank_load);

// Groups ranks by device key and splits each group's cells over its ranks,
// longest-processing-time first; ties break on the cell order, so the plan is
// the same on every rank. Data-parallel cells come first: each gets the
// cell.gpus least-loaded ranks of its key, so disjoint groups run at the same
// time; then the single-device cells fill the ranks by LPT. The R replicas of a cell go to R distinct ranks;
// a group with fewer than R ranks is a UsageError.
// Cells whose key (cell_key(device key, cell)) is in `done` are left out: a resumed run.
// Each cell's cost is the model's (cost_model.hpp), or with `recorded` (plan
// --calibrate) the recorded or scaled estimate (calibration.hpp).
[[nodiscard]] Plan make_plan(const JobOptions& options, const std::vector<Device>& rank_devices, const std::set<std::string>& done = {},
               const RecordedWallTimes* recorded = nullptr);

}  // namespace crossbench
