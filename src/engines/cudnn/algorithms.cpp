// Algorithm candidates of the three convolution directions, by policy.
#include "engines/cudnn/algorithms.hpp"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <vector>

#include "crossbench/error.hpp"
#include "engines/cudnn/algorithm_cache.hpp"
#include "engines/cudnn/handles.hpp"

namespace crossbench::cudnn {
namespace {

// The screening pass of the measured search (see algorithms.hpp): a candidate
// whose first, untimed run took more than kScreenCut times the best screened
// time so far (and more than kScreenFloor, so that a kernel's first load does
// not cut a fast one) is not run again: slow algorithms (FFT, direct 16-bit
// NHWC gradients) cost one run, where cudnnFind*Ex ran each of them, and ran
// twice because its first pass also loads the kernels (CUDA's lazy module
// loading ranked every not-yet-loaded candidate as slow).
constexpr double kScreenCut = 8.0;
constexpr double kScreenFloor = 2.0;  // [ms]
constexpr int kScreenRuns = 2;        // timed runs of a candidate that passed the cut; the minimum counts
// Re-timed: the screening's top kRetimeCandidates within this factor of its
// fastest. In-context medians moved candidates by a few percent, never by
// half, so a candidate 1.5x slower when screened does not win.
constexpr double kRetimeWindow = 1.5;

std::size_t limit_of(const SetupContext& ctx) {
  return static_cast<std::size_t>(std::max<std::int64_t>(0, ctx.config.workspace_limit_bytes));
}

// Keeps results that succeeded and fit the limit, in the heuristic's order.
template <typename Perf>
std::vector<AlgorithmChoice> usable(const Perf* results, int count, std::size_t limit) {
  std::vector<AlgorithmChoice> choices;
  for (int i = 0; i < count; ++i) {
    const Perf& r = results[i];
    if (r.status != CUDNN_STATUS_SUCCESS || r.memory > limit) continue;
    AlgorithmChoice c;
    c.algorithm = static_cast<int>(r.algo);
    c.workspace_bytes = r.memory;
    c.math = r.mathType;
    c.time_ms = NAN;
    choices.push_back(c);
  }
  return choices;
}

[[noreturn]] void none_fits(const char* direction, std::size_t limit);

const char* type_name(cudnnDataType_t type) {
  switch (type) {
    case CUDNN_DATA_FLOAT: return "f32";
    case CUDNN_DATA_DOUBLE: return "f64";
    case CUDNN_DATA_HALF: return "f16";
    case CUDNN_DATA_BFLOAT16: return "bf16";
    case CUDNN_DATA_INT8: return "i8";
    case CUDNN_DATA_INT32: return "i32";
    default: return "?";
  }
}

ConvolutionSignature::Tensor tensor_signature(cudnnTensorDescriptor_t desc) {
  cudnnDataType_t type{};
  ConvolutionSignature::Tensor t;
  CB_CHECK_CUDNN(cudnnGetTensor4dDescriptor(desc, &type, &t.dims[0], &t.dims[1], &t.dims[2], &t.dims[3],
                                            &t.strides[0], &t.strides[1], &t.strides[2], &t.strides[3]));
  t.type = type_name(type);
  return t;
}

// Fills `perf` with cuDNN's heuristic ranking of every algorithm; returns how many it wrote.
using Search = std::function<int(int max_count)>;

// Runs one algorithm on the search arena with its math type: the status.
using RunAlgorithm = std::function<cudnnStatus_t(const AlgorithmChoice&)>;

// The [ms] from events[i] to events[i + 1] for i = 0, step, 2 step, ..., once
// the last has completed: step 1, between consecutive events (warm: a chain of
// runs); step 2, within each pair (cold: a start and a stop around each run,
// the L2 flush between the pairs).
std::vector<double> intervals_ms(const std::vector<Event>& events, std::size_t step = 1) {
  CB_CHECK_CUDA(cudaEventSynchronize(events.back()));
  std::vector<double> samples;
  for (std::size_t i = 0; i + 1 < events.size(); i += step) {
    float ms = 0;
    CB_CHECK_CUDA(cudaEventElapsedTime(&ms, events[i], events[i + 1]));
    samples.push_back(ms);
  }
  return samples;
}

// engine.search_warmup_ms: `launch` (one untimed run of a candidate, or one replay of its runs'
// graph) enqueued back to back until at least that much GPU time has passed, so that the timed
// runs that follow find the clocks of a busy GPU, not those after the host's pause between two
// searches (graph builds, NVRTC, heuristics queries). Enqueued in rounds sized from the time so
// far (events around them), then once more, not waited for, so the GPU is still busy as the
// timed runs are enqueued right behind. At 0: `launch` once where `at_least_once`, else nothing
// (the searches before the option). false where a launch failed.
constexpr long kMaxWarmupLaunches = 100000;  // per round: a bound for a candidate that runs in no time at all
bool warm_up(SetupContext& ctx, const std::function<bool()>& launch, bool at_least_once) {
  const double warmup_ms = ctx.config.search_warmup_ms;
  if (warmup_ms <= 0) return !at_least_once || launch();
  const Event start = make_event(), stop = make_event();
  CB_CHECK_CUDA(cudaEventRecord(start, ctx.stream));
  long launched = 0, round = 1;
  for (int rounds = 0; rounds < 8; ++rounds) {  // the clocks rise as it runs: a round or two more
    for (long i = 0; i < round; ++i, ++launched)
      if (!launch()) return false;
    CB_CHECK_CUDA(cudaEventRecord(stop, ctx.stream));
    CB_CHECK_CUDA(cudaEventSynchronize(stop));
    float elapsed_ms = 0;  // [ms] since the first launch
    CB_CHECK_CUDA(cudaEventElapsedTime(&elapsed_ms, start, stop));
    if (elapsed_ms >= warmup_ms) break;
    const double per_launch_ms = std::max(static_cast<double>(elapsed_ms) / static_cast<double>(launched), 1e-4);
    round = static_cast<long>(std::clamp(std::ceil((warmup_ms - elapsed_ms) / per_launch_ms), 1.0,
                                         static_cast<double>(kMaxWarmupLaunches)));
  }
  return launch();  // busy while the host enqueues the timed runs
}

// kRetimeRepetitions runs back to back, an event between each two, captured
// as one CUDA graph and replayed twice (the first replay untimed, and more of
// them under engine.search_warmup_ms): how a
// graphed step runs them, with no host launch gap in the times. Under
// engine.search_l2 = cold each run has an event pair of its own and the L2
// flush (a memset node) before its start event, outside its timed interval.
// Empty where the runs cannot be captured (the caller then times them eagerly).
std::vector<double> graphed_runs(SetupContext& ctx, const std::function<bool()>& run) {
  const cudaStream_t stream = ctx.stream;
  const bool cold = ctx.l2_cold();
  std::vector<Event> events;  // warm: a chain of kRetimeRepetitions + 1; cold: a pair per run
  for (int i = 0; i < (cold ? 2 * kRetimeRepetitions : kRetimeRepetitions + 1); ++i) events.push_back(make_event());
  const auto record = [&](std::size_t i) {
    return cudaEventRecordWithFlags(events[i], stream, cudaEventRecordExternal) == cudaSuccess;
  };
  CB_CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));  // as CudnnSession::capture_graph
  bool captured_all = true;
  cudaGraph_t captured = nullptr;
  try {
    if (cold) {
      for (std::size_t i = 0; i < static_cast<std::size_t>(kRetimeRepetitions) && captured_all; ++i) {
        ctx.flush_l2();
        captured_all = record(2 * i) && run() && record(2 * i + 1);
      }
    } else {
      for (int i = 0; i <= kRetimeRepetitions && captured_all; ++i) {
        captured_all = record(static_cast<std::size_t>(i));
        if (captured_all && i < kRetimeRepetitions) captured_all = run();
      }
    }
  } catch (...) {
    (void)cudaStreamEndCapture(stream, &captured);  // never leave the stream capturing
    if (captured != nullptr) (void)cudaGraphDestroy(captured);
    (void)cudaGetLastError();
    throw;
  }
  const cudaError_t ended = cudaStreamEndCapture(stream, &captured);
  const Graph graph(captured);
  cudaGraphExec_t exec = nullptr;
  if (!captured_all || ended != cudaSuccess || captured == nullptr ||
      compat::graph_instantiate(&exec, captured) != cudaSuccess) {  // CUDA 11.8 has the older signature
    (void)cudaGetLastError();  // a refused capture is not the next call's error
    return {};
  }
  const GraphExec replay(exec);
  (void)warm_up(ctx, [&] {  // the first replay untimed (and engine.search_warmup_ms)
    CB_CHECK_CUDA(cudaGraphLaunch(replay, stream));
    return true;
  }, true);
  CB_CHECK_CUDA(cudaGraphLaunch(replay, stream));
  CB_CHECK_CUDA(cudaStreamSynchronize(stream));  // the events were recorded by the graph's nodes
  return intervals_ms(events, cold ? 2 : 1);
}

// kRetimeRepetitions runs enqueued back to back, an event between each two:
// how an ungraphed step runs them. Under engine.search_l2 = cold each run has
// an event pair of its own, the L2 flush enqueued before its start event.
// Empty where a run fails.
std::vector<double> eager_runs(SetupContext& ctx, const std::function<bool()>& run) {
  const cudaStream_t stream = ctx.stream;
  if (!warm_up(ctx, run, false)) {  // engine.search_warmup_ms (median_in_context_ms ran it once already)
    CB_CHECK_CUDA(cudaStreamSynchronize(stream));
    return {};
  }
  if (ctx.l2_cold()) {
    std::vector<Event> events;
    for (int i = 0; i < 2 * kRetimeRepetitions; ++i) events.push_back(make_event());
    for (std::size_t i = 0; i < static_cast<std::size_t>(kRetimeRepetitions); ++i) {
      ctx.flush_l2();
      CB_CHECK_CUDA(cudaEventRecord(events[2 * i], stream));
      const bool ran = run();
      CB_CHECK_CUDA(cudaEventRecord(events[2 * i + 1], stream));
      if (!ran) {
        CB_CHECK_CUDA(cudaStreamSynchronize(stream));
        return {};
      }
    }
    return intervals_ms(events, 2);
  }
  std::vector<Event> events;
  for (int i = 0; i <= kRetimeRepetitions; ++i) events.push_back(make_event());
  for (int i = 0; i < kRetimeRepetitions; ++i) {
    CB_CHECK_CUDA(cudaEventRecord(events[static_cast<std::size_t>(i)], stream));
    if (!run()) {
      CB_CHECK_CUDA(cudaStreamSynchronize(stream));
      return {};
    }
  }
  CB_CHECK_CUDA(cudaEventRecord(events.back(), stream));
  return intervals_ms(events);
}

// The screening pass (see kScreenCut): every candidate run once untimed,
// then, unless cut, kScreenRuns times between two events on the session's
// stream; ordered by the fastest timed run (a cut candidate by its untimed
// one). Candidates that fail to run (the arena's workspace is smaller than
// the limit where memory is short) are dropped. Under engine.search_l2 = cold
// the L2 is flushed before each of these runs, outside its events.
std::vector<AlgorithmChoice> screened(SetupContext& ctx, const std::vector<AlgorithmChoice>& candidates,
                                      const RunAlgorithm& run) {
  const Event start = make_event(), stop = make_event();
  const auto timed_run = [&](const AlgorithmChoice& c, float& ms) {
    ctx.flush_l2();
    CB_CHECK_CUDA(cudaEventRecord(start, ctx.stream));
    const cudnnStatus_t status = run(c);
    CB_CHECK_CUDA(cudaEventRecord(stop, ctx.stream));
    CB_CHECK_CUDA(cudaEventSynchronize(stop));
    if (status != CUDNN_STATUS_SUCCESS) return false;
    CB_CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    return true;
  };
  double best_ms = INFINITY;
  std::vector<AlgorithmChoice> kept;
  for (AlgorithmChoice c : candidates) {
    float first_ms = 0;
    if (!timed_run(c, first_ms)) continue;
    float fastest_ms = first_ms;
    if (!(first_ms > kScreenCut * best_ms && first_ms > kScreenFloor)) {
      fastest_ms = INFINITY;
      for (int i = 0; i < kScreenRuns; ++i) {
        float ms = 0;
        if (timed_run(c, ms)) fastest_ms = std::min(fastest_ms, ms);
      }
      if (!std::isfinite(fastest_ms)) continue;
      best_ms = std::min(best_ms, static_cast<double>(fastest_ms));
    }
    c.time_ms = fastest_ms;
    kept.push_back(c);
  }
  std::stable_sort(kept.begin(), kept.end(),
                   [](const AlgorithmChoice& a, const AlgorithmChoice& b) { return a.time_ms < b.time_ms; });
  return kept;
}

// Graphed and eager runs are different timing contexts (median_in_context_ms), and so are
// L2-warm and L2-cold runs (engine.search_l2): each has its own records.
std::string timing_of(const SetupContext& ctx) {
  return search_timing_context(ctx.config.cuda_graphs, ctx.config.search_l2, ctx.config.search_warmup_ms);
}

bool same(const AlgorithmChoice& a, const AlgorithmChoice& b) { return a.algorithm == b.algorithm && a.math == b.math; }

// The candidates of one direction by policy (see algorithms.hpp).
// `always`: an algorithm re-timed whatever its rank (-1: none).
template <typename Perf>
std::vector<AlgorithmChoice> candidates_by_policy(SetupContext& ctx, const ConvolutionProblem& p, const char* direction,
                                                 const char* (*name)(int), int max_count, std::vector<Perf>& results,
                                                 const Search& search, const RunAlgorithm& run, int always) {
  const std::size_t limit = limit_of(ctx);
  if (ctx.config.algorithm != AlgorithmPolicy::exhaustive) {
    auto choices = usable(results.data(), search(max_count), limit);
    if (choices.empty()) none_fits(direction, limit);
    return choices;
  }
  const std::string signature = std::string("conv.") + direction + " " + problem_signature(ctx, p) + timing_of(ctx);
  std::vector<MeasuredCandidate> measured;
  const MeasuredChoice* cached = ctx.algorithm_cache ? ctx.algorithm_cache->find(signature) : nullptr;
  if (cached != nullptr) {
    measured = cached->candidates;
    order_by_median(measured, ctx.config.search_tie);  // the run's tie, not the one that measured it
  } else {
    const auto heuristic = usable(results.data(), search(max_count), limit);
    const auto found = screened(ctx, heuristic, run);
    std::vector<AlgorithmChoice> retimed;
    const auto add = [&](const AlgorithmChoice& c) {
      if (std::none_of(retimed.begin(), retimed.end(), [&](const AlgorithmChoice& r) { return same(r, c); }))
        retimed.push_back(c);
    };
    // Only candidates the screening put within kRetimeWindow of its best can
    // win the re-timing; `always` is re-timed whatever its time (the fusion
    // decision reads it).
    const auto within_window = [&](const AlgorithmChoice& c) {
      return !found.empty() && c.time_ms <= kRetimeWindow * found.front().time_ms;
    };
    for (std::size_t i = 0; i < found.size() && i < static_cast<std::size_t>(kRetimeCandidates); ++i)
      if (within_window(found[i])) add(found[i]);
    if (!heuristic.empty())
      for (const AlgorithmChoice& c : found)
        if (same(c, heuristic.front()) && within_window(c)) add(c);
    for (const AlgorithmChoice& c : found)
      if (c.algorithm == always) {
        add(c);
        break;
      }
    for (const AlgorithmChoice& c : retimed) {
      MeasuredCandidate m;
      m.name = std::string(name(c.algorithm)) + "/" + math_type_name(c.math);
      m.algorithm = c.algorithm;
      m.math = static_cast<int>(c.math);
      m.workspace_bytes = c.workspace_bytes;
      for (std::size_t rank = 0; rank < heuristic.size(); ++rank)
        if (same(heuristic[rank], c)) {
          m.heuristic_rank = static_cast<int>(rank);
          break;
        }
      m.median_ms = median_in_context_ms(ctx, [&] { return run(c) == CUDNN_STATUS_SUCCESS; });
      m.repetitions = kRetimeRepetitions;
      measured.push_back(m);
    }
    CB_CHECK_CUDNN(cudnnSetConvolutionMathType(p.conv, initial_math_type(ctx.precision)));
    order_by_median(measured, ctx.config.search_tie);
    if (ctx.algorithm_cache) ctx.algorithm_cache->insert(signature, MeasuredChoice{measured});
  }
  std::vector<AlgorithmChoice> choices;
  for (const MeasuredCandidate& m : measured) {
    AlgorithmChoice c;
    c.algorithm = m.algorithm;
    c.math = static_cast<cudnnMathType_t>(m.math);
    c.workspace_bytes = m.workspace_bytes;
    c.time_ms = static_cast<float>(m.median_ms);
    choices.push_back(c);
  }
  if (choices.empty()) none_fits(direction, limit);
  return choices;
}

// Sets the descriptor's math type to the candidate's where the precision allows (see adopt_math_type).
void use_math(const SetupContext& ctx, cudnnConvolutionDescriptor_t conv, const AlgorithmChoice& c) {
  const cudnnMathType_t math = adopt_math_type(ctx.precision) ? c.math : initial_math_type(ctx.precision);
  CB_CHECK_CUDNN(cudnnSetConvolutionMathType(conv, math));
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

std::string problem_signature(const SetupContext& ctx, const ConvolutionProblem& p) {
  ConvolutionSignature s;
  s.x = tensor_signature(p.x);
  s.y = tensor_signature(p.y);
  cudnnDataType_t filter_type{};
  cudnnTensorFormat_t format{};
  CB_CHECK_CUDNN(cudnnGetFilter4dDescriptor(p.w, &filter_type, &format, &s.filter_dims[0], &s.filter_dims[1],
                                            &s.filter_dims[2], &s.filter_dims[3]));
  s.filter_type = type_name(filter_type);
  s.filter_format = format == CUDNN_TENSOR_NHWC ? "nhwc" : format == CUDNN_TENSOR_NCHW ? "nchw" : "other";
  cudnnConvolutionMode_t mode{};
  cudnnDataType_t compute{};
  CB_CHECK_CUDNN(cudnnGetConvolution2dDescriptor(p.conv, &s.padding[0], &s.padding[1], &s.stride[0], &s.stride[1],
                                                 &s.dilation[0], &s.dilation[1], &mode, &compute));
  CB_CHECK_CUDNN(cudnnGetConvolutionGroupCount(p.conv, &s.groups));
  cudnnMathType_t math{};
  CB_CHECK_CUDNN(cudnnGetConvolutionMathType(p.conv, &math));
  s.mode = mode == CUDNN_CROSS_CORRELATION ? "xcorr" : "conv";
  s.compute_type = type_name(compute);
  s.math = math_type_name(math);
  s.workspace_limit_bytes = limit_of(ctx);
  return s.text();
}

std::vector<AlgorithmChoice> forward_candidates(SetupContext& ctx, const ConvolutionProblem& p) {
  int max_count = 0;
  CB_CHECK_CUDNN(cudnnGetConvolutionForwardAlgorithmMaxCount(ctx.dnn, &max_count));
  max_count = std::max(max_count, 1);
  std::vector<cudnnConvolutionFwdAlgoPerf_t> results(static_cast<std::size_t>(max_count));
  const Search search = [&](int count) {
    int returned = 0;
    CB_CHECK_CUDNN(cudnnGetConvolutionForwardAlgorithm_v7(ctx.dnn, p.x, p.w, p.conv, p.y, count, &returned,
                                                          results.data()));
    return returned;
  };
  const RunAlgorithm run = [&](const AlgorithmChoice& c) {
    const SetupContext::Arena& a = ctx.arena();
    use_math(ctx, p.conv, c);
    return cudnnConvolutionForward(ctx.dnn, &kOne, p.x, a.x, p.w, a.w, p.conv,
                                   static_cast<cudnnConvolutionFwdAlgo_t>(c.algorithm), a.workspace,
                                   a.workspace_bytes, &kZero, p.y, a.y);
  };
  return candidates_by_policy(ctx, p, "forward", forward_algorithm_name, max_count, results, search, run,
                             CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
}

std::vector<AlgorithmChoice> backward_data_candidates(SetupContext& ctx, const ConvolutionProblem& p) {
  int max_count = 0;
  CB_CHECK_CUDNN(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(ctx.dnn, &max_count));
  max_count = std::max(max_count, 1);
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> results(static_cast<std::size_t>(max_count));
  const Search search = [&](int count) {
    int returned = 0;
    CB_CHECK_CUDNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx.dnn, p.w, p.y, p.conv, p.x, count, &returned,
                                                               results.data()));
    return returned;
  };
  const RunAlgorithm run = [&](const AlgorithmChoice& c) {
    const SetupContext::Arena& a = ctx.arena();
    use_math(ctx, p.conv, c);
    return cudnnConvolutionBackwardData(ctx.dnn, &kOne, p.w, a.w, p.y, a.y, p.conv,
                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algorithm), a.workspace,
                                        a.workspace_bytes, &kZero, p.x, a.x);
  };
  return candidates_by_policy(ctx, p, "backward-data", backward_data_algorithm_name, max_count, results, search, run,
                             -1);
}

std::vector<AlgorithmChoice> backward_filter_candidates(SetupContext& ctx, const ConvolutionProblem& p) {
  int max_count = 0;
  CB_CHECK_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(ctx.dnn, &max_count));
  max_count = std::max(max_count, 1);
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> results(static_cast<std::size_t>(max_count));
  const Search search = [&](int count) {
    int returned = 0;
    CB_CHECK_CUDNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx.dnn, p.x, p.y, p.conv, p.w, count, &returned,
                                                                 results.data()));
    return returned;
  };
  const RunAlgorithm run = [&](const AlgorithmChoice& c) {
    const SetupContext::Arena& a = ctx.arena();
    use_math(ctx, p.conv, c);
    return cudnnConvolutionBackwardFilter(ctx.dnn, &kOne, p.x, a.x, p.y, a.y, p.conv,
                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algorithm), a.workspace,
                                          a.workspace_bytes, &kZero, p.w, a.w);
  };
  return candidates_by_policy(ctx, p, "backward-filter", backward_filter_algorithm_name, max_count, results, search,
                             run, -1);
}

double median_in_context_ms(SetupContext& ctx, const std::function<bool()>& run) {
  ctx.flush_l2();  // cold: allocates the flush buffer now, never inside graphed_runs' capture
  if (!run()) return NAN;
  CB_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
  std::vector<double> samples;
  if (ctx.config.cuda_graphs) samples = graphed_runs(ctx, run);
  if (samples.empty()) samples = eager_runs(ctx, run);
  return median_ms(std::move(samples));
}

std::vector<float> measured_times_ms(SetupContext& ctx, const std::string& signature,
                                     const std::vector<std::string>& names,
                                     const std::function<std::vector<float>()>& measure) {
  std::vector<float> times(names.size(), NAN);
  const std::string key = signature + timing_of(ctx);
  const MeasuredChoice* cached = ctx.algorithm_cache ? ctx.algorithm_cache->find(key) : nullptr;
  if (cached != nullptr) {
    for (std::size_t i = 0; i < names.size(); ++i)
      for (const MeasuredCandidate& m : cached->candidates)
        if (m.name == names[i]) times[i] = static_cast<float>(m.median_ms);
    return times;
  }
  const std::vector<float> measured = measure();
  MeasuredChoice record;  // the candidates as named, not ordered: the layer decides
  for (std::size_t i = 0; i < names.size() && i < measured.size(); ++i) {
    times[i] = measured[i];
    MeasuredCandidate m;
    m.name = names[i];
    m.median_ms = measured[i];
    record.candidates.push_back(m);
  }
  if (ctx.algorithm_cache) ctx.algorithm_cache->insert(key, std::move(record));
  return times;
}

const MeasuredChoice* peek_measured(const SetupContext& ctx, const std::string& signature) {
  return ctx.algorithm_cache ? ctx.algorithm_cache->peek(signature + timing_of(ctx)) : nullptr;
}

MeasuredChoice measured_choice(SetupContext& ctx, const std::string& signature,
                               const std::function<std::vector<MeasuredCandidate>()>& measure) {
  const std::string key = signature + timing_of(ctx);
  const MeasuredChoice* cached = ctx.algorithm_cache ? ctx.algorithm_cache->find(key) : nullptr;
  if (cached != nullptr) {
    MeasuredChoice replayed = *cached;
    order_by_median(replayed.candidates, ctx.config.search_tie);  // the run's tie, not the one that measured it
    return replayed;
  }
  MeasuredChoice record{measure()};
  order_by_median(record.candidates, ctx.config.search_tie);
  if (ctx.algorithm_cache) ctx.algorithm_cache->insert(key, record);
  return record;
}

float time_cublas_on_arena(SetupContext& ctx, std::size_t scratch_bytes,
                           const std::function<void(const SetupContext::Arena&, void*)>& run) {
  const SetupContext::Arena& arena = ctx.arena();
  const auto blas_bytes = static_cast<std::size_t>(kCublasWorkspace);
  if (arena.workspace_bytes < blas_bytes + scratch_bytes) return NAN;
  void* scratch = static_cast<char*>(arena.workspace) + blas_bytes;
  float ms = NAN;
  try {
    CB_CHECK_CUBLAS(cublasSetWorkspace(ctx.blas, arena.workspace, blas_bytes));
    ms = static_cast<float>(median_in_context_ms(ctx, [&] {
      run(arena, scratch);
      return true;
    }));
  } catch (const OutOfMemory&) {
    throw;  // the cell's answer is oom, as for any allocation
  } catch (const Error&) {
    ms = NAN;  // cuBLAS refused this GEMM: the incumbent stays
  }
  // The arena goes away after setup: the session points cuBLAS at its own
  // workspace once its pool is allocated, before any step.
  CB_CHECK_CUBLAS(cublasSetWorkspace(ctx.blas, nullptr, 0));
  return ms;
}

std::string candidate_times(const std::vector<AlgorithmChoice>& candidates, const char* (*name)(int)) {
  std::ostringstream text;
  text << std::setprecision(4);
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (std::isnan(candidates[i].time_ms)) continue;
    text << (text.tellp() > 0 ? ", " : "") << name(candidates[i].algorithm) << "/" << math_type_name(candidates[i].math)
         << " " << candidates[i].time_ms;
  }
  return text.str();
}

}  // namespace crossbench::cudnn
