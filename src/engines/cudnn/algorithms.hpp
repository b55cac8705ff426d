// Convolution algorithm choice (DESIGN.md `--algo`):
//   heuristic   cuDNN's first choice (cudnnGet*Algorithm_v7) that fits the
//               workspace limit, as TensorFlow and Caffe did;
//   exhaustive  a measured search on real memory in prepare(), never in the
//               timed steps, as torch.backends.cudnn.benchmark does:
//               a screening pass runs every algorithm the heuristic lists
//               (once untimed, which loads its kernels, then twice timed;
//               one run only for a candidate far slower than the best so
//               far: algorithms.cpp's kScreenCut) and ranks them; its top
//               candidates and the heuristic's first choice, those within
//               kRetimeWindow of the screening's best (and for the forward
//               IMPLICIT_PRECOMP_GEMM, the one cuDNN fuses bias and relu
//               with, always) are then re-timed as the step runs them
//               (median_in_context_ms: the session's stream, the search
//               workspace, inside a CUDA graph where the steps are graphed),
//               kRetimeRepetitions runs each, and ordered by MEDIAN with
//               algorithm_cache.hpp's tie rule. cudnnFind*AlgorithmEx,
//               which this replaces, ran every algorithm to completion,
//               twice (its first pass loading the kernels), and its
//               isolated single timings disagreed with in-graph times and
//               picked differently in every process (GoogLeNet bf16
//               inference: 3.85-5.47 ms over six processes on the H200).
//               Each measurement is a record of ctx.algorithm_cache: an
//               identical convolution (in this network, an earlier cell, or
//               the --algo-cache file) is not searched again.
// And the math type each precision allows: fp32 is strict (CUDNN_FMA_MATH:
// no TF32), tf32 lets cuDNN use TF32 tensor cores (CUDNN_DEFAULT_MATH, as
// PyTorch with allow_tf32), 16-bit types use tensor cores (TENSOR_OP_MATH).
#pragma once

#include <cudnn.h>

#include <cmath>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "crossbench/cell.hpp"
#include "engines/cudnn/algorithm_cache.hpp"
#include "engines/cudnn/graph.hpp"

namespace crossbench::cudnn {

struct AlgorithmChoice {
  int algorithm = -1;                 // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  std::size_t workspace_bytes = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  float time_ms = NAN;                // exhaustive: median of the re-timed runs [ms], else NaN
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

// The re-timed candidates of a search: the top of the screening's ranking.
inline constexpr int kRetimeCandidates = 3;
// Timed runs per re-timed candidate (after one untimed); the median decides.
inline constexpr int kRetimeRepetitions = 7;

// The key of a convolution problem: shapes, strides, types, layout, math
// mode and workspace limit, read back from its descriptors (callers put the
// op's direction in front). Taken before a chosen math type is adopted.
std::string problem_signature(const SetupContext& ctx, const ConvolutionProblem& p);

// Every candidate (in the policy's order of preference) that fits the workspace
// limit; for exhaustive, the re-timed ones with their median times, replayed
// from ctx.algorithm_cache where it holds the problem. Throws Error when none fits.
std::vector<AlgorithmChoice> forward_candidates(SetupContext& ctx, const ConvolutionProblem& p);
std::vector<AlgorithmChoice> backward_data_candidates(SetupContext& ctx, const ConvolutionProblem& p);
std::vector<AlgorithmChoice> backward_filter_candidates(SetupContext& ctx, const ConvolutionProblem& p);

// The median [ms] of kRetimeRepetitions runs of `run` in the context the
// step runs in, after one untimed run (and, under engine.search_warmup_ms,
// untimed runs for that much GPU time right before): on the session's stream, back to back
// with an event between each two, captured as one CUDA graph and replayed
// where the cell's steps are graphed (else, or where capture is refused,
// enqueued eagerly), so host launch gaps that a graphed step does not have
// do not rank the candidates. Under engine.search_l2 = cold every timed run
// starts L2-cold: ctx.flush_l2() before its own pair of events, outside them.
// `run` returns false where the candidate fails (NaN then); its exceptions
// pass through.
double median_in_context_ms(SetupContext& ctx, const std::function<bool()>& run);

// Candidates of our own (cuBLAS GEMMs, our kernels), one time each [ms] in
// the order of `names`: replayed from ctx.algorithm_cache where it holds
// `signature`, else `measure()`d and recorded there. NaN: not timed or refused.
std::vector<float> measured_times_ms(SetupContext& ctx, const std::string& signature,
                                     const std::vector<std::string>& names,
                                     const std::function<std::vector<float>()>& measure);

// ctx.algorithm_cache's record of `signature` in this timing context, as measured_times_ms reads it, or
// null (no cache, or not measured yet), counting nothing (AlgorithmCache::peek): count_hit() where used.
const MeasuredChoice* peek_measured(const SetupContext& ctx, const std::string& signature);

// A measured choice of our own candidates (cuBLASLt plans beside a legacy
// call: layer_fully_connected.cpp): ctx.algorithm_cache's record of
// `signature` (in this timing context) where it holds one, else `measure()`d,
// ordered by order_by_median (algorithm_cache.hpp) and recorded there. Each
// candidate's name is what the layer needs to run it again.
MeasuredChoice measured_choice(SetupContext& ctx, const std::string& signature,
                               const std::function<std::vector<MeasuredCandidate>()>& measure);

// The median [ms] of a cuBLAS-based candidate's runs on the search arena
// (median_in_context_ms). The arena's workspace holds the workspace the steps
// give the session's cuBLAS handle (kCublasWorkspace: its choice of split-K
// depends on it), then `scratch_bytes` for the candidate (`run`'s second
// argument). NaN where the arena's workspace is smaller or cuBLAS refuses, so
// that the incumbent stays. OutOfMemory passes through.
float time_cublas_on_arena(SetupContext& ctx, std::size_t scratch_bytes,
                           const std::function<void(const SetupContext::Arena&, void*)>& run);

// The re-timed candidates for the decisions: "IMPLICIT_GEMM/tc 0.101, WINOGRAD/tc 0.104" [ms].
std::string candidate_times(const std::vector<AlgorithmChoice>& candidates, const char* (*name)(int));

}  // namespace crossbench::cudnn
