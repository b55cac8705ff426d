// `plan --calibrate CUBE.h5,...`: the plan's estimates from the wall times
// earlier runs recorded (DESIGN.md "Distribution"). A planned cell that a cube
// holds `ok` takes its recorded seconds; a cell whose engine, network and phase
// a cube holds ok at another batch or precision takes that preparation (a
// framework's compile: the part the model knows least) plus the model's steps
// scaled by the matched cells; the others of the same engine and device key
// take the cost model scaled by what the matched cells cost against it; with
// nothing matched, the model as it is. Every cell says which.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "crossbench/statistics.hpp"
#include "cluster/planned_cell.hpp"

namespace crossbench {

struct RecordedWallTimes {
  std::vector<std::filesystem::path> cubes;  // as given
  // cell_key(device key, cell with replica 0) → mean over the cubes' ok
  // replicas of preparation_s + search_s (0 where not reported) + timed_s [s].
  std::map<std::string, double> seconds;
  // cell_key(device key, cell with replica 0) → mean timed_s of those cells [s].
  std::map<std::string, double> timed_seconds;
  // preparation_key(...) → mean preparation_s + search_s of the ok cells of that engine, network and
  // phase on the device key, at any batch: with their precision, and with "*" for any precision [s].
  std::map<std::string, double> preparation_seconds;
};

// The key of preparation_seconds: "<device key>|<engine>/<network>/<precision or *>/<phase>".
[[nodiscard]] std::string preparation_key(const std::string& device_key, const CellSpec& cell, bool any_precision);

// Reads the ok cells of every cube. A cube that is missing or not a readable
// crossbench cube is a UsageError naming it (plan exits 2); a cube without
// recorded wall times (schema 2) adds nothing.
[[nodiscard]] RecordedWallTimes read_recorded_wall_times(const std::vector<std::filesystem::path>& cubes);

// The fit of one engine on one device key.
struct CalibrationFit {
  std::string device_key;
  std::string engine;
  int matched_cells = 0;        // planned cells with a recorded time
  double factor = not_a_number; // recorded ÷ model over the matched cells; NaN when none matched
  // timed ÷ the model's steps over the matched cells; NaN when none matched (then 1 is used)
  double steps_factor = not_a_number;
  int recorded_preparations = 0;  // unmatched cells estimated from a recorded preparation
};

// Sets every cell's estimated_s and estimate_source from its model estimate
// (PlannedCell::model) and `recorded`; returns one fit per (device key,
// engine), in the cells' order. Cells the plan cannot run keep their cost; a
// scaled model stays within `cell_time_limit_s` [s], as the run does.
[[nodiscard]] std::vector<CalibrationFit> calibrate_cells(std::vector<PlannedCell>& cells, const RecordedWallTimes& recorded,
                                            double cell_time_limit_s);

}  // namespace crossbench
