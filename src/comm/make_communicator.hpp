// The communicator of a data-parallel group for the rank's kind of device.
#pragma once

#include <mpi.h>

#include <memory>

#include "crossbench/communicator.hpp"
#include "crossbench/device.hpp"

namespace crossbench {

// Collective over `group`. GPUs: NCCL on the rank's GPU `gpu_ordinal`
// (Unsupported in a build without CUDA); CPUs: MPI. Collectives that do not
// complete within `timeout_s` end the cell (CellTimeout).
std::unique_ptr<Communicator> make_communicator(DeviceKind kind, MPI_Comm group, int gpu_ordinal, double timeout_s);

}  // namespace crossbench
