// Convolution algorithm choice (DESIGN.md `--algo`):
//   heuristic   cuDNN's first choice (cudnnGet*Algorithm_v7) that fits the
//               workspace limit, as TensorFlow and Caffe did;
//   exhaustive  a measured search (cudnnFind*AlgorithmEx) on real memory in
//               prepare(), never in the timed steps, as
//               torch.backends.cudnn.benchmark does.
// And the math type each precision allows: fp32 is strict (CUDNN_FMA_MATH:
// no TF32), tf32 lets cuDNN use TF32 tensor cores (CUDNN_DEFAULT_MATH, as
// PyTorch with allow_tf32), 16-bit types use tensor cores (TENSOR_OP_MATH).
#pragma once

#include <cudnn.h>

#include <cmath>
#include <cstddef>
#include <string>

#include "crossbench/cell.hpp"
#include "engines/cudnn/graph.hpp"

namespace crossbench::cudnn {

struct AlgorithmChoice {
  int algorithm = -1;                 // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  std::size_t workspace_bytes = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  float time_ms = NAN;                // measured (exhaustive), else NaN
  bool valid() const { return algorithm >= 0; }
};

// The math type a convolution descriptor starts with for a precision.
cudnnMathType_t initial_math_type(Precision precision);
// Whether a chosen algorithm's math type may be set on the descriptor (never for strict fp32).
bool adopt_math_type(Precision precision);

const char* forward_algorithm_name(int algorithm);
const char* backward_data_algorithm_name(int algorithm);
const char* backward_filter_algorithm_name(int algorithm);
const char* math_type_name(cudnnMathType_t math);

struct ConvolutionProblem {
  cudnnTensorDescriptor_t x = nullptr;  // input (backward data: dx)
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnTensorDescriptor_t y = nullptr;  // output (backward: dy)
};

// Every candidate (in the policy's order of preference) that fits the workspace
// limit; for exhaustive, with measured times. Throws Error when none fits.
std::vector<AlgorithmChoice> forward_candidates(SetupContext& ctx, const ConvolutionProblem& p);
std::vector<AlgorithmChoice> backward_data_candidates(SetupContext& ctx, const ConvolutionProblem& p);
std::vector<AlgorithmChoice> backward_filter_candidates(SetupContext& ctx, const ConvolutionProblem& p);

}  // namespace crossbench::cudnn
