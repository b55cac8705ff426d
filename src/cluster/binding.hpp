// Which device a rank measures on (DESIGN.md "Distribution").
#pragma once

#include <string>
#include <vector>

#include "crossbench/device.hpp"
#include "cluster/mpi_session.hpp"

namespace crossbench {

// The GPU that Slurm or CUDA_VISIBLE_DEVICES gives the rank (it then sees
// exactly one), else its local rank modulo the visible GPUs; with no GPU, the
// CPU with the threads of the rank's binding (OMP_NUM_THREADS when set).
[[nodiscard]] Device bind_device(const MpiSession& mpi, const std::string& device_tag);

// Every rank's device description, in rank order, on every rank.
[[nodiscard]] std::vector<Device> gather_devices(const MpiSession& mpi, const Device& mine);

}  // namespace crossbench
