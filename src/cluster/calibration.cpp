#include "cluster/calibration.hpp"

#include <algorithm>
#include <cmath>

#include "core/utc_time.hpp"
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

// Wall seconds of an ok cell: its start to its end where the cube recorded both (what the plan
// estimates: warm-up, check and the worker's exit included), else its preparation, search and timed
// steps; NaN when the cube recorded neither.
double wall_seconds(const CellResult& result) {
  if (const double wall_s = utc_seconds_between(result.started_utc, result.finished_utc); std::isfinite(wall_s) && wall_s >= 0)
    return wall_s;
  const double search_s = std::isfinite(result.search_s) ? result.search_s : 0.0;  // NaN: inside preparation
  return result.preparation_s + search_s + result.timed_s;
}

// Sums and counts into means.
std::map<std::string, double> means(const std::map<std::string, std::pair<double, int>>& sums) {
  std::map<std::string, double> result;
  for (const auto& [key, sum] : sums) result[key] = sum.first / sum.second;
  return result;
}

}  // namespace

std::string preparation_key(const std::string& device_key, const CellSpec& cell, bool any_precision) {
  return device_key + "|" + cell.engine + "/" + cell.network + "/" +
         (any_precision ? std::string("*") : std::string(to_string(cell.precision))) + "/" + std::string(to_string(cell.phase));
}

RecordedWallTimes read_recorded_wall_times(const std::vector<std::filesystem::path>& cubes) {
  RecordedWallTimes recorded;
  recorded.cubes = cubes;
  std::map<std::string, std::pair<double, int>> sums, timed, preparation;  // key → (sum [s], cells)
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
      const std::string key = recorded_key(result.device_key, result.cell);
      const auto add = [](std::pair<double, int>& sum, double value) {
        sum.first += value;
        ++sum.second;
      };
      add(sums[key], seconds);
      add(timed[key], result.timed_s);
      // Preparation + search (a framework's compile), and from a cube with start and end times the cell's end too.
      const double prepared_s = seconds - result.timed_s;
      add(preparation[preparation_key(result.device_key, result.cell, false)], prepared_s);
      add(preparation[preparation_key(result.device_key, result.cell, true)], prepared_s);
    }
  }
  recorded.seconds = means(sums);
  recorded.timed_seconds = means(timed);
  recorded.preparation_seconds = means(preparation);
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
  std::map<std::pair<std::string, std::string>, std::pair<double, double>> steps;   // (key, engine) → (timed, model steps) [s]
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
    if (const auto timed = recorded.timed_seconds.find(found->first); timed != recorded.timed_seconds.end()) {
      auto& [timed_s, model_steps_s] = steps[{fit.device_key, fit.engine}];
      timed_s += timed->second;
      model_steps_s += planned.model.steps_s;
    }
  }
  for (CalibrationFit& fit : fits) {
    const auto& [recorded_s, model_s] = totals[{fit.device_key, fit.engine}];
    if (fit.matched_cells > 0 && model_s > 0) fit.factor = recorded_s / model_s;
    const auto& [timed_s, model_steps_s] = steps[{fit.device_key, fit.engine}];
    if (fit.matched_cells > 0 && model_steps_s > 0) fit.steps_factor = timed_s / model_steps_s;
  }
  for (PlannedCell& planned : cells) {
    if (planned.estimate_source != kEstimateModel || !planned.unrunnable_reason.empty()) continue;
    CalibrationFit& fit = fit_of(planned);
    // The same engine, network and phase prepared before (at another batch or precision): its
    // preparation, which for a framework is mostly the compile, is a better guess than the model's.
    auto preparation = recorded.preparation_seconds.find(preparation_key(planned.device_key, planned.cell, false));
    if (preparation == recorded.preparation_seconds.end())
      preparation = recorded.preparation_seconds.find(preparation_key(planned.device_key, planned.cell, true));
    if (preparation != recorded.preparation_seconds.end()) {
      const double steps_factor = std::isfinite(fit.steps_factor) ? fit.steps_factor : 1.0;
      planned.estimated_s = std::min(preparation->second + planned.model.steps_s * steps_factor, cell_time_limit_s);
      planned.estimate_source = kEstimateRecordedPreparation;
      ++fit.recorded_preparations;
      continue;
    }
    if (!std::isfinite(fit.factor)) continue;
    planned.estimated_s = std::min(planned.model.total_s() * fit.factor, cell_time_limit_s);
    planned.estimate_source = kEstimateScaledModel;
  }
  return fits;
}

}  // namespace crossbench
