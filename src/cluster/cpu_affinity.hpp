// Where a rank's CPU threads run relative to its GPU (DESIGN.md "CPU affinity"),
// through hwloc, the topology library Open MPI itself binds with. Each rank
// records its CPU set and its GPU's NUMA node (/ranks `cpu_set`, `numa_node`);
// `--bind-near-gpu` binds the rank's process (every thread, and every thread it
// starts later: OpenMP, oneDNN, a worker process) to the cores of its GPU's
// nearest non-I/O ancestor in the topology (its NUMA node or package).
#pragma once

#include <cerrno>
#include <cstring>
#include <string>

#include "crossbench/device.hpp"
#include "crossbench/error.hpp"

namespace crossbench {

// hwloc return codes: -1 (or NULL) with errno on failure; names the call.
#define CB_CHECK_HWLOC(expr)                                                              \
  ([&]() {                                                                                \
    auto cb_hwloc_result_ = (expr);                                                       \
    if (cb_hwloc_result_ < 0)                                                             \
      ::crossbench::throw_library_error("hwloc", #expr, __FILE__, __LINE__,               \
                                        std::strerror(errno));                            \
    return cb_hwloc_result_;                                                              \
  }())

struct CpuPlacement {
  std::string cpu_set;          // the process's CPU binding now, Linux list syntax ("0-3,8")
  int numa_node = -1;           // NUMA node (OS index) nearest the GPU; -1: no GPU, or hwloc cannot tell
  std::string near_gpu_cpu_set; // the cores nearest the GPU ("" without a GPU the topology shows)
};

// The placement of this process for `device` (its GPU found by PCI bus id).
CpuPlacement cpu_placement(const Device& device);

// Binds this process to the cores nearest `device`'s GPU and returns the placement
// after binding; a CPU device, or a GPU hwloc does not show, is left as it is.
CpuPlacement bind_near_gpu(const Device& device);

}  // namespace crossbench
