// Rank 0 turns the plan and the results gathered so far into CubeContents.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "crossbench/cube.hpp"
#include "crossbench/options.hpp"
#include "cluster/plan.hpp"
#include "cluster/run_segment.hpp"

namespace crossbench {

// Axes from the plan (every group's device key, the resolved engines, the
// matrix), every run segment (/segments, and its ranks in /ranks), the run's
// attributes, and the results.
// Sets scaling_efficiency of every ok data-parallel cell whose gpus = 1 cell
// (same coordinates; the same replica, else replica 0) is ok among `cells`.
void add_scaling_efficiency(std::vector<CellResult>& cells);

[[nodiscard]] CubeContents assemble_cube(const JobOptions& options, const Plan& plan, const std::vector<RunSegment>& segments,
                           const std::vector<CellResult>& results,
                           const std::map<std::string, std::string>& attributes);

}  // namespace crossbench
