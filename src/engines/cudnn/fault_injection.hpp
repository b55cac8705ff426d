// Test-only GPU faults (issue 28, tests/faults/test_gpu_faults.py), off
// unless the environment variable CROSSBENCH_GPU_FAULT is set:
//
//   trap:REGEX:STEP   after step STEP (1-based, warm-up steps count) of a cell
//                     whose name (describe(cell)) REGEX matches, a kernel
//                     executes a device-side trap on the session's stream: a
//                     sticky error, the context is lost (DESIGN.md "Measurement")
//   oom:REGEX         every device allocation (DeviceBuffer: the memory pool
//                     with its cuDNN and cuBLAS workspaces) of a matching cell
//                     throws OutOfMemory, as a failed cudaMalloc, without allocating
//
// A cell a fault applies to names it in its decisions ("fault_injection=trap
// after step 3 (CROSSBENCH_GPU_FAULT)"), so that no cube made with one passes
// for a measurement. An unparsable value throws Error naming it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

namespace crossbench::cudnn::fault_injection {

// Called when a cell's preparation starts: the cell the faults apply to now.
void arm(const std::string& cell_name);
// What the armed cell's decisions add ("" without a fault for it).
std::string decision();
// Before a device allocation of `bytes` for `what` ("the memory pool", ...):
// throws OutOfMemory naming the fault when one applies, as a failed cudaMalloc would.
void before_allocation(const char* what, std::size_t bytes);
// Called after each step of the armed cell, with the steps taken so far.
void after_step(long long steps, cudaStream_t stream);

}  // namespace crossbench::cudnn::fault_injection
