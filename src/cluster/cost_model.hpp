// The plan's cost model (DESIGN.md "Distribution"): a cell's wall time
// estimated from its FLOPs and the device's peak, plus its preparation and
// its search, before anything has run. `plan --calibrate` replaces or scales
// it with recorded wall times (cluster/calibration.hpp).
#pragma once

#include <string>

#include "crossbench/device.hpp"
#include "crossbench/network.hpp"
#include "crossbench/engine.hpp"
#include "crossbench/measure.hpp"

namespace crossbench {

// What a cell that cannot run costs: it is recorded at once [s].
inline constexpr double kUnsupportedCellSeconds = 0.001;

// One cell's estimate in the parts a cube records (preparation_s, search_s, timed_s) [s].
struct CellEstimate {
  double preparation_s = 0;  // prepare() without the search: primitives, buffers, a worker's model
  double search_s = 0;       // measured choices: exhaustive algorithm search, torch.compile, jit
  double steps_s = 0;        // warm-up + min_steps steps at an assumed fraction of the device's peak
  // Why the cell cannot run on the device ("cudnn is a GPU engine; this device is a CPU"); empty: it can.
  // `plan` prints it instead of the cell's token cost.
  std::string unsupported;
  bool capped = false;       // the model exceeded the cell time limit and was cut to it
  double total_s() const { return preparation_s + search_s + steps_s; }
};

// The model's estimate of a cell on a device, at most the cell time limit
// (which includes preparation); kUnsupportedCellSeconds (all in steps_s) for
// a cell the engine cannot run there. It reads the measurement's steps and
// time limit and the engines' algorithm policy (engine.algo).
[[nodiscard]] CellEstimate model_cell_estimate(const Network& network, const CellSpec& cell, const Device& device,
                                               const MeasureOptions& measure, const EngineConfig& engine);

}  // namespace crossbench
