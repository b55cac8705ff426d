#include "cluster/calibration.hpp"

#include <algorithm>
#include <cmath>

#include "crossbench/cube.hpp"
#include "crossbench/error.hpp"

namespace crossbench {
namespace {

// A recorded cell's key: its coordinates without the replica (replicas are
// the same cell measured on another device of the key).
std::string recorded_key(const std::string& device_key, CellSpec cell) {
  cell.replica = 0;
  return cell_key(device_key, cell);
}

// Wall seconds of an ok cell, or NaN when the cube did not record them.
double wall_seconds(const CellResult& result) {
  const double search_s = std::isfinite(result.search_s) ? result.search_s : 0.0;  // NaN: inside preparation
  return result.preparation_s + search_s + result.timed_s;
}

}  // namespace

RecordedWallTimes read_recorded_wall_times(const std::vector<std::filesystem::path>& cubes) {
  RecordedWallTimes recorded;
  recorded.cubes = cubes;
  std::map<std::string, std::pair<double, int>> sums;  // key → (sum [s], cells)
  for (const auto& path : cubes) {
    CubeContents contents;
    try {
      contents = read_cube(path);
    } catch (const Error& failure) {
      throw UsageError("plan --calibrate '" + path.string() + "': " + failure.what());
    }
    for (const CellResult& result : contents.cells) {
      const double seconds = wall_seconds(result);
      if (result.status != Status::ok || !std::isfinite(seconds)) continue;
      auto& [sum, count] = sums[recorded_key(result.device_key, result.cell)];
      sum += seconds;
      ++count;
    }
  }
  for (const auto& [key, sum] : sums) recorded.seconds[key] = sum.first / sum.second;
  return recorded;
}

std::vector<CalibrationFit> calibrate_cells(std::vector<PlannedCell>& cells, const RecordedWallTimes& recorded,
                                            double cell_time_limit_s) {
  std::vector<CalibrationFit> fits;
  const auto fit_of = [&](const PlannedCell& planned) -> CalibrationFit& {
    auto found = std::find_if(fits.begin(), fits.end(), [&](const CalibrationFit& fit) {
      return fit.device_key == planned.device_key && fit.engine == planned.cell.engine;
    });
    if (found == fits.end()) found = fits.insert(fits.end(), {planned.device_key, planned.cell.engine});
    return *found;
  };
  // Recorded cells first; the factor is their total over the model's total for
  // them, so the long cells, which decide the makespan, weigh the most.
  std::map<std::pair<std::string, std::string>, std::pair<double, double>> totals;  // (key, engine) → (recorded, model) [s]
  for (PlannedCell& planned : cells) {
    CalibrationFit& fit = fit_of(planned);
    planned.estimated_s = planned.model.total_s();
    planned.estimate_source = kEstimateModel;
    if (!planned.unrunnable_reason.empty()) continue;
    const auto found = recorded.seconds.find(recorded_key(planned.device_key, planned.cell));
    if (found == recorded.seconds.end()) continue;
    planned.estimated_s = found->second;
    planned.estimate_source = kEstimateRecorded;
    ++fit.matched_cells;
    auto& [recorded_s, model_s] = totals[{fit.device_key, fit.engine}];
    recorded_s += found->second;
    model_s += planned.model.total_s();
  }
  for (CalibrationFit& fit : fits) {
    const auto& [recorded_s, model_s] = totals[{fit.device_key, fit.engine}];
    if (fit.matched_cells > 0 && model_s > 0) fit.factor = recorded_s / model_s;
  }
  for (PlannedCell& planned : cells) {
    if (planned.estimate_source != kEstimateModel || !planned.unrunnable_reason.empty()) continue;
    const CalibrationFit& fit = fit_of(planned);
    if (!std::isfinite(fit.factor)) continue;
    planned.estimated_s = std::min(planned.model.total_s() * fit.factor, cell_time_limit_s);
    planned.estimate_source = kEstimateScaledModel;
  }
  return fits;
}

}  // namespace crossbench
