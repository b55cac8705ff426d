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
// Records the rank's CPU set and its GPU's NUMA node (cluster/cpu_affinity.hpp);
// `bind_near_gpu` first binds the process to the cores nearest its GPU.
[[nodiscard]] Device bind_device(const MpiSession& mpi, const std::string& device_tag, bool bind_near_gpu = false);

// Every rank's device description, in rank order, on every rank.
[[nodiscard]] std::vector<Device> gather_devices(const MpiSession& mpi, const Device& mine);

}  // namespace crossbench
