// Device tensors read back to the host as float: the session's accessors for
// the tests (cudnn_session.cpp) and the check a measured Graph API plan passes
// before it replaces the legacy choice (layer_convolution.cpp).
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "crossbench/cell.hpp"
#include "engines/cudnn/tensor.hpp"

namespace crossbench::cudnn {

// The logical elements of `t` (fp32, bf16 or fp16, any strides) whose first
// element is at `first` in device memory, as float in N, C, H, W index order.
// Synchronous: waits for `stream` first.
std::vector<float> host_floats(const void* first, const Tensor& t, cudaStream_t stream, const char* what);

// Whether every value is finite (no NaN, no infinity).
[[nodiscard]] bool all_finite(const std::vector<float>& values);

// The largest |got - want| over the largest |want| (infinity where either
// holds a NaN or an infinity): how far apart two computations of one tensor are.
[[nodiscard]] double relative_difference(const std::vector<float>& want, const std::vector<float>& got);

// The largest relative_difference a measured plan may have from the legacy
// algorithm on the same data: another summation order, or another algorithm of
// the same math, stays far below it (fp32 1e-3, tf32 1e-2, 16-bit 5e-2), while
// a plan that reads memory it did not write, or writes too little, does not.
[[nodiscard]] double plan_agreement_bound(Precision precision);

}  // namespace crossbench::cudnn
