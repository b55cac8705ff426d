// Running a data-parallel cell (gpus > 1): the ranks of its group form an MPI
// communicator, the device's gradient communicator (NCCL or MPI) and a step
// agreement, run the cell together, and the group's first rank reports it.
#pragma once

#include "crossbench/engine.hpp"
#include "crossbench/result.hpp"
#include "cluster/mpi_session.hpp"
#include "cluster/plan.hpp"

namespace crossbench {

// Every rank of planned.group_ranks calls this, in the plan's order of
// data-parallel cells. Returns the cell's result on the group's first rank
// (its status is the first failure of any member, naming that rank); other
// ranks get their own, which they do not report.
[[nodiscard]] CellResult run_data_parallel_cell(Engine* engine, const Network& network, const PlannedCell& planned,
                                  const Device& device, const MeasureOptions& options, const MpiSession& mpi);

}  // namespace crossbench
