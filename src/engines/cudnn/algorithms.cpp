// Algorithm candidates of the three convolution directions, by policy.
#include "engines/cudnn/algorithms.hpp"

#include <vector>

#include "crossbench/error.hpp"

namespace crossbench::cudnn {
namespace {

// The measured search runs twice and keeps the second answer: with CUDA's lazy
// module loading (the default since CUDA 12), the first launch of each cuDNN
// kernel includes loading it, so a single cudnnFind*Ex ranks every
// not-yet-loaded candidate as slow and picks whichever kernel was already
// warm. Seen on the H200: ResNet-50 bf16 training took 21.7 ms after its
// kernels had been loaded by earlier cells and 37.7 ms with a single search in
// a fresh process.
constexpr int kFindPasses = 2;

std::size_t limit_of(const SetupContext& ctx) {
  return static_cast<std::size_t>(std::max<std::int64_t>(0, ctx.config.workspace_limit_bytes));
}

// Keeps results that succeeded and fit the limit, in cuDNN's order (heuristic
// rank, or measured time for Find).
template <typename Perf>
std::vector<AlgorithmChoice> usable(const Perf* results, int count, std::size_t limit, bool measured) {
  std::vector<AlgorithmChoice> choices;
  for (int i = 0; i < count; ++i) {
    const Perf& r = results[i];
    if (r.status != CUDNN_STATUS_SUCCESS || r.memory > limit) continue;
    if (measured && !(r.time >= 0)) continue;
    AlgorithmChoice c;
    c.algorithm = static_cast<int>(r.algo);
    c.workspace_bytes = r.memory;
    c.math = r.mathType;
    c.time_ms = measured ? r.time : NAN;
    choices.push_back(c);
  }
  return choices;
}

[[noreturn]] void none_fits(const char* direction, std::size_t limit) {
  throw Error(std::string("no cuDNN ") + direction + " algorithm supports this convolution within the workspace limit of " +
              format_bytes(static_cast<double>(limit)) + " (raise [engine] workspace_limit_mb)");
}

}  // namespace

cudnnMathType_t initial_math_type(Precision precision) {
  switch (precision) {
    case Precision::fp32: return CUDNN_FMA_MATH;
    case Precision::tf32: return CUDNN_DEFAULT_MATH;
    case Precision::fp16:
    case Precision::bf16: return CUDNN_TENSOR_OP_MATH;
    case Precision::amp_fp16: case Precision::amp_bf16: break;  // unsupported by supports()
  }
  return CUDNN_FMA_MATH;
}

bool adopt_math_type(Precision precision) { return precision != Precision::fp32; }

const char* forward_algorithm_name(int algorithm) {
  switch (algorithm) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "?";
  }
}

const char* backward_data_algorithm_name(int algorithm) {
  switch (algorithm) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "?";
  }
}

const char* backward_filter_algorithm_name(int algorithm) {
  switch (algorithm) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0: return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1: return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3: return "ALGO_3";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING: return "FFT_TILING";
    default: return "?";
  }
}

const char* math_type_name(cudnnMathType_t math) {
  switch (math) {
    case CUDNN_DEFAULT_MATH: return "default";
    case CUDNN_TENSOR_OP_MATH: return "tc";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tc-conv";
    case CUDNN_FMA_MATH: return "fma";
  }
  return "?";
}

std::vector<AlgorithmChoice> forward_candidates(SetupContext& ctx, const ConvolutionProblem& p) {
  int max_count = 0;
  CB_CHECK_CUDNN(cudnnGetConvolutionForwardAlgorithmMaxCount(ctx.dnn, &max_count));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> results(static_cast<std::size_t>(std::max(max_count, 1)));
  int returned = 0;
  const bool measured = ctx.config.algorithm == AlgorithmPolicy::exhaustive;
  if (measured) {
    const SetupContext::Arena& a = ctx.arena();
    for (int pass = 0; pass < kFindPasses; ++pass)
      CB_CHECK_CUDNN(cudnnFindConvolutionForwardAlgorithmEx(ctx.dnn, p.x, a.x, p.w, a.w, p.conv, p.y, a.y, max_count,
                                                            &returned, results.data(), a.workspace,
                                                            a.workspace_bytes));
  } else {
    CB_CHECK_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(ctx.dnn, p.x, p.w, p.conv, p.y, max_count, &returned,
                                                          results.data()));
  }
  auto choices = usable(results.data(), returned, limit_of(ctx), measured);
  if (choices.empty()) none_fits("forward", limit_of(ctx));
  return choices;
}

std::vector<AlgorithmChoice> backward_data_candidates(SetupContext& ctx, const ConvolutionProblem& p) {
  int max_count = 0;
  CB_CHECK_CUDNN(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(ctx.dnn, &max_count));
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> results(static_cast<std::size_t>(std::max(max_count, 1)));
  int returned = 0;
  const bool measured = ctx.config.algorithm == AlgorithmPolicy::exhaustive;
  if (measured) {
    const SetupContext::Arena& a = ctx.arena();
    for (int pass = 0; pass < kFindPasses; ++pass)
      CB_CHECK_CUDNN(cudnnFindConvolutionBackwardDataAlgorithmEx(ctx.dnn, p.w, a.w, p.y, a.y, p.conv, p.x, a.x,
                                                                 max_count, &returned, results.data(), a.workspace,
                                                                 a.workspace_bytes));
  } else {
    CB_CHECK_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx.dnn, p.w, p.y, p.conv, p.x, max_count, &returned,
                                                               results.data()));
  }
  auto choices = usable(results.data(), returned, limit_of(ctx), measured);
  if (choices.empty()) none_fits("backward-data", limit_of(ctx));
  return choices;
}

std::vector<AlgorithmChoice> backward_filter_candidates(SetupContext& ctx, const ConvolutionProblem& p) {
  int max_count = 0;
  CB_CHECK_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(ctx.dnn, &max_count));
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> results(static_cast<std::size_t>(std::max(max_count, 1)));
  int returned = 0;
  const bool measured = ctx.config.algorithm == AlgorithmPolicy::exhaustive;
  if (measured) {
    const SetupContext::Arena& a = ctx.arena();
    for (int pass = 0; pass < kFindPasses; ++pass)
      CB_CHECK_CUDNN(cudnnFindConvolutionBackwardFilterAlgorithmEx(ctx.dnn, p.x, a.x, p.y, a.y, p.conv, p.w, a.w,
                                                                   max_count, &returned, results.data(), a.workspace,
                                                                   a.workspace_bytes));
  } else {
    CB_CHECK_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx.dnn, p.x, p.y, p.conv, p.w, max_count,
                                                                 &returned, results.data()));
  }
  auto choices = usable(results.data(), returned, limit_of(ctx), measured);
  if (choices.empty()) none_fits("backward-filter", limit_of(ctx));
  return choices;
}

}  // namespace crossbench::cudnn
