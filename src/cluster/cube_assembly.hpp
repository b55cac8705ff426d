// Rank 0 turns the plan and the results gathered so far into CubeContents.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "crossbench/cube.hpp"
#include "crossbench/options.hpp"
#include "cluster/plan.hpp"

namespace crossbench {

// Axes from the plan (every group's device key, the resolved engines, the
// matrix), one /ranks row per rank, the run's attributes, and the results.
// Sets scaling_efficiency of every ok data-parallel cell whose gpus = 1 cell
// (same coordinates; the same replica, else replica 0) is ok among `cells`.
void add_scaling_efficiency(std::vector<CellResult>& cells);

[[nodiscard]] CubeContents assemble_cube(const Options& options, const Plan& plan, const std::vector<Device>& rank_devices,
                           const std::vector<CellResult>& results,
                           const std::map<std::string, std::string>& attributes);

}  // namespace crossbench
