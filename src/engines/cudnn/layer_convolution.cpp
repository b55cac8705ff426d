// Convolution: forward, backward data, backward filter and bias gradient
// through cuDNN's convolution API, one descriptor per direction (each keeps
// the math type of its own chosen algorithm, as PyTorch does).
//
// A convolution followed by an in-place relu (and with a bias) may apply both
// in one call, cudnnConvolutionBiasActivationForward, which cuDNN runs only
// with IMPLICIT_PRECOMP_GEMM: heuristic takes it when that is cuDNN's first
// choice; exhaustive when its measured time is within the estimated cost of
// the two passes it saves (bias add and relu: read and write the output each)
// of the fastest algorithm. prepare()'s validation pass falls back to the
// unfused calls if this cuDNN refuses the fused one. Unfused, the bias and
// the relu are one pass of our own kernel (kernels::bias_activation) where
// the output's layout allows, instead of cudnnAddTensor plus the relu's own
// pass.
//
// The weight gradient of a 1x1, stride-1, unpadded convolution in NHWC is one
// GEMM over every pixel of the batch (dW[Cout, Cin] = dY^T X, K = N*H*W). The
// measured search (exhaustive) times cuBLAS's GEMM on the search arena beside
// cuDNN's algorithms and keeps the faster: on an H200 (cuDNN 9.19) cuDNN's
// 16-bit weight gradients of GoogLeNet's 1x1 convolutions took 0.6-0.8 ms each
// at batch 64 where their forward took 0.02-0.2 ms. Decisions say
// "bwd_filter=cublas_gemm".
//
// For fp32 tensors in NCHW (fp32, tf32) the measured search also times the
// forward and the weight gradient as explicit GEMMs over im2col columns
// (im2col_gemm.hpp) where the columns fit the workspace limit, and keeps them
// where they are faster than cuDNN's best (the forward: than cuDNN's best plus
// the epilogue pass its fused call would have saved). Decisions say
// "fwd=im2col_gemm(...)" and "bwd_filter=im2col_gemm(...)" (for a 1x1
// convolution the GEMM reads the input directly, without columns). Over NHWC
// (tf32 and 16-bit cells) it times the forward of a first layer (at most
// kIm2colNhwcMaxChannels real input channels) as one GEMM per chunk of images
// over NHWC im2col columns (Im2colGemmNhwc), for a few chunk sizes, and keeps
// the fastest where it is clearly faster: "fwd=im2col_gemm(chunk=N ...)".
//
// The measured search (exhaustive) also times the direction as a cuDNN Graph
// API graph (graph_api_convolution.hpp): the first kGraphCandidates engine
// configurations of cuDNN's heuristics (modes A and fallback; none that needs
// runtime compilation; strict fp32 without tensor cores) on the search arena,
// in context, cached like the algorithms; the fastest replaces the legacy
// choice where it is clearly faster. The forward of a conv_bias_relu group is
// timed as one graph with its bias and relu epilogue, against the legacy
// choice plus the epilogue pass it saves. Decisions say "fwd=graph(NAME ...)".
// `--algo heuristic` keeps the legacy API alone (the 2017 frameworks' way).
//
// Under the measured search a choice must first compute the convolution: the
// fastest legacy candidate is held to a reference algorithm (IMPLICIT_GEMM,
// ALGO_1), a winning graph plan to the legacy choice, on the search arena,
// after its output and workspace are poisoned (agreeing_candidates,
// graph_plan_difference; DESIGN.md). Decisions say "[refused NAME (differs by
// X)]" and "[graph NAME ... refused: ...]".
//
// Inference folds a batch-norm that only reads the convolution into it (as
// TensorRT and oneDNN's graph do): the weights are scaled by gamma/sqrt(var+eps)
// and the bias becomes the folded shift, once after initialisation (graph.hpp's
// after_initialise), so conv + batch-norm + relu is one call or one kernel
// epilogue. The decisions say "+bn(folded)".
//
// Inference conv_bn_add_relu (tensor-core NHWC cells, exhaustive search): the
// convolution also adds the block's residual and applies the relu after the
// add, y = relu(conv(x, w') + b' + residual), timed as one Graph API graph
// (conv → +bias → +residual → relu) against the unfused ops' estimate (the
// fastest plain forward, plus the bias pass and the add+relu pass it saves:
// four passes over y, the graph's own read of the residual counted) and cached
// like the other graphs ("graph_api.forward+bias+add+relu ..."). Where cuDNN
// lists no plan for the graph, none runs, or it is not clearly faster, the
// convolution's op runs the unfused ops itself: the convolution, its bias
// (our kernel) and kernels::add_relu(y, residual) — the same passes as a
// conv_bn_relu group without relu and an add_relu group — and the decisions
// say why ("+add+relu(kernel, unfused: ...)"). The add has no op either way.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "crossbench/error.hpp"
#include "engines/cudnn/algorithm_cache.hpp"
#include "engines/cudnn/algorithms.hpp"
#include "engines/cudnn/cublaslt_matmul.hpp"
#include "engines/cudnn/gemm_weight_gradient.hpp"
#include "engines/cudnn/graph_api_convolution.hpp"
#include "engines/cudnn/graph.hpp"
#include "engines/cudnn/im2col_gemm.hpp"
#include "engines/cudnn/kernels_elementwise.hpp"
#include "engines/cudnn/kernels_epilogue.hpp"
#include "engines/cudnn/tensor_compare.hpp"

namespace crossbench::cudnn {
namespace {

constexpr double kMemoryBandwidth = 3.0e12;  // [bytes/s] a conservative HBM figure for the fusion estimate
// Graph API engine configurations timed per direction: the heuristics' first ones (each needs a plan build).
constexpr int kGraphCandidates = 6;
// The residual graph's engines compile at runtime (seconds each, in every cold process): its first two.
constexpr int kResidualGraphCandidates = 2;
// engine.search_in_step: the Graph API plans timed within this fraction of the chosen one are its near
// ties, timed again inside the step; at most kInStepOptions plans a choice (the chosen one included).
// The H200's OverFeat tf32 conv5: two configurations 0.6% apart in the search, 3% apart in the step
// (bench/results/2026-12-05/call52).
constexpr double kInStepWindow = 0.02;
constexpr std::size_t kInStepOptions = 3;
// The NHWC im2col + GEMM forward is offered to convolutions of at most this many real input channels (first
// layers: 3), where the columns stay narrow (C*R*S); their chunks: columns of about these sizes [bytes], which an
// H100's or H200's L2 cache (50 / 60 MB) can hold between im2col's write and the GEMM's read.
constexpr std::int64_t kIm2colNhwcMaxChannels = 4;
constexpr std::int64_t kIm2colChunkBytes[] = {std::int64_t{16} << 20, std::int64_t{40} << 20};
// cuBLASLt heuristic plans timed per chunk size for the NHWC im2col forward's GEMM (with its bias epilogue).
constexpr int kIm2colLtCandidates = 4;

std::int64_t round_up_256(std::int64_t bytes) { return (bytes + 255) / 256 * 256; }
// The largest divisor of `n` that is at most `at_most` (at least 1).
std::int64_t largest_divisor_at_most(std::int64_t n, std::int64_t at_most) {
  for (std::int64_t d = std::min(n, at_most); d > 1; --d)
    if (n % d == 0) return d;
  return 1;
}

class Convolution final : public LayerImpl {
 public:
  // Build time.
  std::string name;
  Precision precision = Precision::fp32;
  bool nhwc = false;
  std::int64_t kernel = 1, stride = 1, padding = 0;
  std::int64_t channels = 0;  // the input's real channels (x may store more, zero-padded: Builder::input_channels)
  Tensor x, y, w, bias;
  bool has_bias = false;          // a bias is added (the layer's own, or a folded batch-norm's shift)
  bool folds_batch_norm = false;  // inference: the batch-norm after it is folded in (bias = its shift)
  bool fusion_candidate = false;
  bool training = false;
  // Inference conv_bn_add_relu: y = relu(conv + bias + residual); the relu after the add is always ours.
  Tensor residual;
  bool adds_residual = false;
  bool residual_graph = false;  // graph_forward is the fused graph (conv + bias + residual + relu)
  std::string residual_note;    // why the residual add runs unfused (our add+relu kernel after the bias)
  // Backward (training).
  Tensor dy, dw, db;
  // kernels::channel_sum instead of cudnnConvolutionBackwardBias for bf16 (which
  // cuDNN refuses) and for NHWC gradients (cuDNN 9.19 took 11 ms for VGG's
  // conv1_1 at batch 64 in fp16 NHWC, against 0.6 ms for the whole bf16
  // backward of that layer with this kernel).
  Tensor bias_accumulator;
  bool bias_gradient_kernel = false;  // kernels::channel_sum, else cudnnConvolutionBackwardBias
  float bias_kernel_ms = NAN, bias_cudnn_ms = NAN;  // measured (exhaustive, where both apply) [ms]
  bool data_gradient = false;
  Tensor dx;
  float dx_beta = 0;

  // Setup time.
  TensorDesc xd, yd, bd, dyd, dxd;
  FilterDesc wd;
  ConvDesc forward_cd, data_cd, filter_cd;
  AlgorithmChoice forward, data, filter;
  bool filter_gemm = false;      // the weight gradient as one cuBLAS GEMM (1x1, NHWC)
  float filter_gemm_ms = NAN;    // its measured time on the search arena [ms]
  bool forward_im2col = false;   // the forward as im2col + GEMM (fp32 NCHW, or NHWC: forward_nhwc_chunk)
  float forward_im2col_ms = NAN; // [ms] on the search arena (NHWC: its fastest chunk's)
  std::int64_t forward_nhwc_chunk = 0;  // NHWC im2col + GEMM: images per chunk (the search's fastest)
  // NHWC im2col + GEMM through a cuBLASLt plan, its epilogue adding the bias (and the relu of a group).
  std::optional<LtMatmul> nhwc_matmul;
  std::optional<LtPlan> nhwc_plan;
  cublasLtEpilogue_t nhwc_epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  std::string nhwc_note;  // why the cuBLASLt plan was dropped at run time
  bool filter_im2col = false;    // the weight gradient as im2col + GEMM (fp32 NCHW)
  float filter_im2col_ms = NAN;  // [ms] on the search arena
  std::string forward_times, filter_times, data_times;  // exhaustive: the re-timed candidates [ms]
  // exhaustive: the faster candidates refused for disagreeing with the reference algorithm (agreeing_candidates)
  std::string forward_refused, filter_refused, data_refused;
  // The Graph API's measured plan of each direction, where it won (else null: the legacy choice).
  struct GraphPlan {
    std::shared_ptr<GraphConvolution> graph;  // shared by the session's identical convolutions
    int plan = -1;
    float time_ms = NAN;  // [ms] median in context
    // [ms] what it was clearly faster than: the legacy choice's median, plus, for a graph that fuses
    // the epilogue, the bias and add+relu passes it saves (modelled from y's bytes, not measured)
    double incumbent_ms = NAN;
    std::string name, note;  // the plan; why none was taken (refused graph, slower: its best time)
    // engine.search_in_step: [0] the plan above, then the plans the search timed within kInStepWindow of
    // it that agree with the reference; `signature` keys the choice (the graph's problem and direction).
    struct Option {
      int plan = -1;
      std::string name;
      float time_ms = NAN;  // [ms] the search's median
    };
    std::vector<Option> options;
    std::string signature;
    std::string in_step;  // decisions: the step's choice where it replaced the search's
  };
  GraphPlan graph_forward, graph_data, graph_filter;
  bool fused = false;            // cudnnConvolutionBiasActivationForward
  bool kernel_epilogue = false;  // unfused: bias (+ relu) in one kernels::bias_activation pass
  std::string fallback;  // why a fused forward fell back, if it did

  void plan_search(SetupContext& ctx) override {
    if (ctx.config.algorithm != AlgorithmPolicy::exhaustive) return;
    std::int64_t x_bytes = x.span_bytes(), y_bytes = y.span_bytes();
    if (adds_residual) x_bytes = std::max(x_bytes, y_bytes);  // the fused graph's residual is read from arena x
    if (training) {
      y_bytes = std::max(y_bytes, dy.span_bytes());
      if (data_gradient) x_bytes = std::max(x_bytes, dx.span_bytes());
    }
    // w, then the bias at round_up_256(w.bytes()): the NHWC im2col forward is timed with its epilogue.
    ctx.reserve_arena(x_bytes, round_up_256(w.bytes()) + (has_bias ? bias.bytes() : 0), y_bytes);
  }

  ConvDesc make_conv(Precision p) const {
    ConvDesc cd = make_conv_desc();
    const int pad = static_cast<int>(padding), s = static_cast<int>(stride);
    // fp32 accumulation in every precision (16-bit data: CUDNN_DATA_FLOAT compute, as PyTorch).
    CB_CHECK_CUDNN(cudnnSetConvolution2dDescriptor(cd, pad, pad, s, s, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CB_CHECK_CUDNN(cudnnSetConvolutionMathType(cd, initial_math_type(p)));
    return cd;
  }

  void adopt(cudnnConvolutionDescriptor_t cd, const AlgorithmChoice& c) const {
    if (adopt_math_type(precision)) CB_CHECK_CUDNN(cudnnSetConvolutionMathType(cd, c.math));
  }

  void setup(SetupContext& ctx) override {
    xd = describe_tensor(x);
    yd = describe_tensor(y);
    wd = make_filter_desc();
    CB_CHECK_CUDNN(cudnnSetFilter4dDescriptor(wd, cudnn_type(w.type), nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                              static_cast<int>(w.dims[0]), static_cast<int>(w.dims[1]),
                                              static_cast<int>(w.dims[2]), static_cast<int>(w.dims[3])));
    if (has_bias) bd = describe_tensor(bias);
    kernel_epilogue = has_bias && kernels::bias_activation_supported(y.dims, y.strides);
    forward_cd = make_conv(precision);
    const std::string forward_signature = problem_signature(ctx, {xd, wd, forward_cd, yd});
    const auto candidates = agreeing_candidates(ctx, forward_candidates(ctx, {xd, wd, forward_cd, yd}),
                                                GraphDirection::forward, forward_signature, forward_refused);
    forward = candidates.front();
    forward_times = candidate_times(candidates, forward_algorithm_name);
    if (fusion_candidate && has_bias) {
      const AlgorithmChoice* precomp = nullptr;
      for (const AlgorithmChoice& c : candidates)
        if (c.algorithm == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM) {
          precomp = &c;
          break;
        }
      if (ctx.config.algorithm == AlgorithmPolicy::heuristic) {
        fused = forward.algorithm == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
      } else if (precomp != nullptr) {
        // Unfused costs one extra pass over y (read and write) with our epilogue
        // kernel, else two (cudnnAddTensor, then the relu). For 16-bit data the
        // margin stays at two passes even with the kernel: measured on the H200
        // (cuDNN 9.19), cudnnFind's isolated times understate the unfused
        // IMPLICIT_GEMM kernels it then prefers for GoogLeNet's 1x1
        // convolutions, and the one-pass margin took GoogLeNet bf16 inference
        // from 4.80 ms to 7.37 ms, while no fp32 or tf32 cell of seed2017 got
        // slower by more than 1.3 % with it (within the run-to-run spread).
        const bool sixteen_bit = precision == Precision::fp16 || precision == Precision::bf16;
        const double passes = kernel_epilogue && !sixteen_bit ? 2.0 : 4.0;
        const double saved_ms = passes * static_cast<double>(y.bytes()) / kMemoryBandwidth * 1e3;
        if (precomp->time_ms <= forward.time_ms + saved_ms) {
          forward = *precomp;
          fused = true;
        }
      }
    }
    adopt(forward_cd, forward);
    if (im2col_gemm_applies(ctx, y)) {
      const Im2colGemm shape = im2col_shape(y);
      forward_im2col_ms = measured_times_ms(ctx, "im2col_gemm.forward " + forward_signature, {"im2col_gemm"}, [&] {
        return std::vector<float>{time_on_arena(ctx, shape.forward_workspace_bytes(), [&](const SetupContext::Arena& a,
                                                                                          void* columns) {
          im2col_gemm_forward(ctx.blas, shape, static_cast<const float*>(a.x), static_cast<const float*>(a.w),
                              static_cast<float*>(a.y), columns, ctx.stream);
        })};
      })[0];
      // Unfused, the bias (and relu) cost the same pass after either; fused
      // cuDNN's time already includes them, so the GEMM carries that pass.
      const double epilogue_ms =
          fused ? (kernel_epilogue ? 2.0 : 4.0) * static_cast<double>(y.bytes()) / kMemoryBandwidth * 1e3 : 0.0;
      // Near-ties and NaN (not timed) keep cuDNN's (algorithm_cache.hpp's tie rule).
      if (clearly_faster(forward_im2col_ms + epilogue_ms, forward.time_ms, ctx.config.search_tie)) {
        forward_im2col = true;
        fused = false;
      }
    } else if (im2col_nhwc_applies(ctx)) {
      choose_im2col_nhwc(ctx, forward_signature);
    }
    ctx.need_workspace(!forward_im2col ? forward.workspace_bytes
                       : nhwc_plan ? im2col_nhwc_lt_workspace_bytes(im2col_nhwc_shape(forward_nhwc_chunk), *nhwc_plan)
                       : nhwc      ? im2col_nhwc_shape(forward_nhwc_chunk).forward_workspace_bytes()
                                   : im2col_shape(y).forward_workspace_bytes());
    if (!forward_im2col) {
      // The legacy choice's time with the epilogue pass a fused graph saves (as the fusion estimate above).
      const bool graph_epilogue = fusion_candidate && has_bias;
      const double unfused_epilogue_ms =
          graph_epilogue && !fused ? (kernel_epilogue ? 2.0 : 4.0) * static_cast<double>(y.bytes()) / kMemoryBandwidth * 1e3
                                   : 0.0;
      choose_graph_plan(ctx, GraphDirection::forward, graph_epilogue,
                        std::string(graph_epilogue ? "forward+bias+relu " : "forward ") + forward_signature,
                        forward.time_ms + unfused_epilogue_ms, graph_forward);
      if (graph_forward.graph) fused = false;
      if (adds_residual) choose_residual_graph(ctx, forward_signature);
    }
    if (!training) return;
    dyd = describe_tensor(dy);
    filter_cd = make_conv(precision);
    const std::string filter_signature = problem_signature(ctx, {xd, wd, filter_cd, dyd});
    const auto filter_candidates =
        agreeing_candidates(ctx, backward_filter_candidates(ctx, {xd, wd, filter_cd, dyd}),
                            GraphDirection::backward_filter, filter_signature, filter_refused);
    filter = filter_candidates.front();
    filter_times = candidate_times(filter_candidates, backward_filter_algorithm_name);
    adopt(filter_cd, filter);
    if (ctx.config.algorithm == AlgorithmPolicy::exhaustive && gemm_weight_gradient_applies() && ctx.blas != nullptr) {
      filter_gemm_ms = measured_times_ms(ctx, "cublas_gemm.backward-filter " + filter_signature, {"cublas_gemm"},
                                         [&] { return std::vector<float>{time_gemm_weight_gradient(ctx)}; })[0];
      filter_gemm = clearly_faster(filter_gemm_ms, filter.time_ms, ctx.config.search_tie);  // near-ties and NaN keep cuDNN's
    }
    if (im2col_gemm_applies(ctx, dy)) {
      const Im2colGemm shape = im2col_shape(dy);
      filter_im2col_ms = measured_times_ms(ctx, "im2col_gemm.backward-filter " + filter_signature, {"im2col_gemm"}, [&] {
        return std::vector<float>{time_on_arena(ctx, shape.weight_gradient_workspace_bytes(),
                                                [&](const SetupContext::Arena& a, void* columns) {
                                                  im2col_gemm_weight_gradient(ctx.blas, shape,
                                                                              static_cast<const float*>(a.x),
                                                                              static_cast<const float*>(a.y),
                                                                              static_cast<float*>(a.w), columns,
                                                                              ctx.stream);
                                                })};
      })[0];
      filter_im2col = clearly_faster(filter_im2col_ms, filter.time_ms, ctx.config.search_tie);
    }
    if (filter_im2col) ctx.need_workspace(im2col_shape(dy).weight_gradient_workspace_bytes());
    else if (!filter_gemm) ctx.need_workspace(filter.workspace_bytes);
    {
      const double incumbent_ms = filter_im2col ? filter_im2col_ms : filter_gemm ? filter_gemm_ms : filter.time_ms;
      choose_graph_plan(ctx, GraphDirection::backward_filter, false, "backward-filter " + filter_signature, incumbent_ms,
                        graph_filter);
    }
    choose_bias_gradient(ctx, filter_signature);
    if (data_gradient) {
      dxd = describe_tensor(dx);
      data_cd = make_conv(precision);
      const auto data_candidates =
          agreeing_candidates(ctx, backward_data_candidates(ctx, {dxd, wd, data_cd, dyd}), GraphDirection::backward_data,
                              problem_signature(ctx, {dxd, wd, data_cd, dyd}), data_refused);
      data = data_candidates.front();
      data_times = candidate_times(data_candidates, backward_data_algorithm_name);
      adopt(data_cd, data);
      ctx.need_workspace(data.workspace_bytes);
      // The Graph API writes dx; an accumulated gradient (beta 1) stays with the legacy call.
      if (dx_beta == 0.0f)
        choose_graph_plan(ctx, GraphDirection::backward_data, false,
                          "backward-data " + problem_signature(ctx, {dxd, wd, data_cd, dyd}), data.time_ms, graph_data);
    }
  }

  // conv_bn_add_relu: the fused graph against the unfused ops (the faster plain forward, legacy or graph,
  // plus the bias pass and the add+relu pass: read and write y, then read y and the residual and write y,
  // less the graph's own read of the residual). It replaces the plain choice where clearly faster.
  void choose_residual_graph(SetupContext& ctx, const std::string& forward_signature) {
    const double plain_ms = graph_forward.graph ? graph_forward.time_ms : forward.time_ms;
    const double saved_ms = 4.0 * static_cast<double>(y.bytes()) / kMemoryBandwidth * 1e3;
    GraphPlan fused_graph;
    choose_graph_plan(ctx, GraphDirection::forward, true, "forward+bias+add+relu " + forward_signature,
                      plain_ms + saved_ms, fused_graph, true);
    if (!fused_graph.graph) {
      residual_note = fused_graph.note.empty() ? "no fused graph measured" : "graph " + fused_graph.note;
      return;
    }
    graph_forward = std::move(fused_graph);
    residual_graph = true;
  }

  // Times the first kGraphCandidates plans of a Graph API graph of one direction on the search arena
  // (cached under `signature` like every measured choice) and keeps the fastest where it is clearly
  // faster than `incumbent_ms`, the legacy choice's time; else `note` says why not.
  void choose_graph_plan(SetupContext& ctx, GraphDirection direction, bool bias_relu, const std::string& signature,
                         double incumbent_ms, GraphPlan& out, bool with_residual = false) {
    if (ctx.config.algorithm != AlgorithmPolicy::exhaustive || !ctx.config.graph_api) return;
    if (!graph_api_available()) {
      out.note = graph_api_unavailable_reason();
      return;
    }
    GraphConvolutionProblem problem;
    problem.direction = direction;
    problem.precision = precision;
    problem.x = direction == GraphDirection::backward_data ? dx : x;
    problem.w = direction == GraphDirection::backward_filter ? dw : w;
    problem.y = direction == GraphDirection::forward ? y : dy;
    problem.bias = bias;
    problem.bias_relu = bias_relu;
    if (with_residual) problem.residual = residual;
    problem.padding = static_cast<int>(padding);
    problem.stride = static_cast<int>(stride);
    problem.workspace_limit_bytes = ctx.config.workspace_limit_bytes;
    std::shared_ptr<GraphConvolution> graph;
    try {
      // One graph per distinct problem in the session: a plan an identical layer built is built here too.
      graph = ctx.graph_convolutions != nullptr ? ctx.graph_convolutions->get(ctx.dnn, problem)
                                                : std::shared_ptr<GraphConvolution>(GraphConvolution::create(ctx.dnn, problem));
    } catch (const OutOfMemory&) {
      throw;
    } catch (const Error& e) {
      out.note = std::string("refused: ") + e.what();
      return;
    }
    std::vector<std::string> names;
    const int candidates = with_residual ? kResidualGraphCandidates : kGraphCandidates;
    for (int i = 0; i < graph->plan_count() && i < candidates; ++i) names.push_back(graph->plan_name(i));
    if (names.empty()) {
      out.note = "no engine configuration fits";
      return;
    }
    const std::vector<float> times = measured_times_ms(ctx, "graph_api." + signature, names, [&] {
      std::vector<float> measured(names.size(), NAN);
      const SetupContext::Arena& a = ctx.arena();
      for (std::size_t i = 0; i < names.size(); ++i) {
        const int plan = static_cast<int>(i);
        if (!graph->build(plan) || graph->workspace_bytes(plan) > static_cast<std::int64_t>(a.workspace_bytes)) continue;
        // Arena roles as the legacy search's: x the input (or dx), w the filter (or dw), y the output (or dy).
        measured[i] = static_cast<float>(median_in_context_ms(ctx, [&] {
          // The residual (y's shape) from arena x, which plan_search sized for it.
          return graph->run(ctx.dnn, plan, a.x, a.w, a.y, bias_relu ? a.w : nullptr, with_residual ? a.x : nullptr,
                            a.workspace, true);
        }));
      }
      return measured;
    });
    int best = -1;
    for (std::size_t i = 0; i < times.size(); ++i)
      if (!std::isnan(times[i]) && (best < 0 || times[i] < times[static_cast<std::size_t>(best)])) best = static_cast<int>(i);
    if (best < 0) {
      out.note = "no plan ran";
      return;
    }
    std::ostringstream why;
    why << names[static_cast<std::size_t>(best)] << " " << times[static_cast<std::size_t>(best)] << "ms";
    if (!clearly_faster(times[static_cast<std::size_t>(best)], incumbent_ms, ctx.config.search_tie) || !graph->build(best)) {
      out.note = why.str() + ">=" + std::to_string(incumbent_ms) + "ms";
      return;
    }
    // The difference is measured like the times and cached with them: a replay allocates no search
    // arena and its decisions read the same.
    const double difference =
        measured_times_ms(ctx, "agreement.graph_api." + names[static_cast<std::size_t>(best)] + " " + signature,
                          {names[static_cast<std::size_t>(best)]}, [&] {
                            return std::vector<float>{cacheable_difference(
                                graph_plan_difference(ctx, *graph, best, direction, bias_relu, with_residual))};
                          })[0];
    if (difference > plan_agreement_bound(precision)) {
      out.note = why.str() + " refused: differs from " + legacy_choice_name(direction) + " by " +
                 difference_text(difference) + " of the largest value (bound " +
                 difference_text(plan_agreement_bound(precision)) + ")";
      return;
    }
    out.plan = best;
    out.incumbent_ms = incumbent_ms;
    out.time_ms = times[static_cast<std::size_t>(best)];
    out.name = names[static_cast<std::size_t>(best)];
    out.graph = std::move(graph);
    ctx.need_workspace(static_cast<std::size_t>(out.graph->workspace_bytes(best)));
    if (ctx.config.search_in_step) add_step_options(ctx, direction, bias_relu, with_residual, signature, names, times, out);
  }

  // engine.search_in_step: the plans of out.graph the search timed within kInStepWindow of out's, each
  // agreeing with the reference as out's does (the same cached check), nearest first, at most
  // kInStepOptions in all; their workspaces are reserved so that any of them can run in the step.
  void add_step_options(SetupContext& ctx, GraphDirection direction, bool bias_relu, bool with_residual,
                        const std::string& signature, const std::vector<std::string>& names,
                        const std::vector<float>& times, GraphPlan& out) {
    out.signature = signature;
    out.options = {{out.plan, out.name, out.time_ms}};
    std::vector<int> near;
    for (std::size_t i = 0; i < times.size(); ++i)
      if (static_cast<int>(i) != out.plan && !std::isnan(times[i]) && times[i] <= out.time_ms * (1 + kInStepWindow))
        near.push_back(static_cast<int>(i));
    std::stable_sort(near.begin(), near.end(), [&](int a, int b) { return times[static_cast<std::size_t>(a)] < times[static_cast<std::size_t>(b)]; });
    for (const int plan : near) {
      if (out.options.size() >= kInStepOptions) break;
      const std::string& plan_name = names[static_cast<std::size_t>(plan)];
      if (!out.graph->build(plan)) continue;
      const double difference = measured_times_ms(ctx, "agreement.graph_api." + plan_name + " " + signature, {plan_name}, [&] {
        return std::vector<float>{cacheable_difference(
            graph_plan_difference(ctx, *out.graph, plan, direction, bias_relu, with_residual))};
      })[0];
      if (!(difference <= plan_agreement_bound(precision))) continue;  // NaN: not checked, not taken
      out.options.push_back({plan, plan_name, times[static_cast<std::size_t>(plan)]});
      ctx.need_workspace(static_cast<std::size_t>(out.graph->workspace_bytes(plan)));
    }
    if (out.options.size() < 2) out.options.clear();  // nothing near-tied: no choice to make in the step
  }

  // The step choice of one direction's graph plan, where it has near-tied options.
  static void add_step_choice(std::vector<StepChoice>& choices, GraphPlan& plan, const std::string& what) {
    if (!plan.graph || plan.options.size() < 2) return;
    StepChoice choice;
    choice.key = plan.signature;
    choice.what = what;
    for (const GraphPlan::Option& option : plan.options) {
      choice.options.push_back(option.name);
      choice.search_ms.push_back(option.time_ms);
    }
    choice.use = [&plan](std::size_t i) {
      const GraphPlan::Option& option = plan.options.at(i);
      plan.plan = option.plan;
      plan.name = option.name;
      plan.time_ms = option.time_ms;
    };
    choices.push_back(std::move(choice));
  }

  std::vector<StepChoice> step_choices() override {
    std::vector<StepChoice> choices;
    add_step_choice(choices, graph_forward, name + ":fwd");
    add_step_choice(choices, graph_data, name + ":bwd_data");
    add_step_choice(choices, graph_filter, name + ":bwd_filter");
    return choices;
  }

  // The measured candidates (fastest first) less the faster ones whose output on the search arena,
  // run over a poison of its output and workspace (all-ones bytes: a NaN in every float type), differs
  // from the reference algorithm's (IMPLICIT_GEMM forward, ALGO_1 backward: no workspace-dependent
  // tricks, no atomics) by more than plan_agreement_bound: checked in order until one agrees, so the
  // choice is the fastest candidate that computes the convolution. The differences are measured
  // choices like the times (cached under `signature`). `refused` names
  // the refused ones for decisions. (On an H200 the strict-fp32 AlexNet cells of FullyConnectedFusion
  // differed between two sessions running the same choices, bench/results/2026-12-02/call14.)
  std::vector<AlgorithmChoice> agreeing_candidates(SetupContext& ctx, std::vector<AlgorithmChoice> candidates,
                                                   GraphDirection direction, const std::string& signature,
                                                   std::string& refused) {
    if (ctx.config.algorithm != AlgorithmPolicy::exhaustive || candidates.size() < 2) return candidates;
    const auto name_of = [&](const AlgorithmChoice& c) {
      const char* algorithm = direction == GraphDirection::forward         ? forward_algorithm_name(c.algorithm)
                              : direction == GraphDirection::backward_data ? backward_data_algorithm_name(c.algorithm)
                                                                           : backward_filter_algorithm_name(c.algorithm);
      return std::string(algorithm) + "/" + math(c);
    };
    std::vector<std::string> names;
    for (const AlgorithmChoice& c : candidates) names.push_back(name_of(c));
    // Each candidate's difference from the reference (relative_difference), measured in order until one
    // agrees, NaN for those not checked: cached like the times, so a replay chooses and reads the same.
    const std::vector<float> differences = measured_times_ms(ctx, "agreement." + signature, names, [&] {
      std::vector<float> measured(candidates.size(), NAN);
      const SetupContext::Arena& a = ctx.arena();
      const bool forward_direction = direction == GraphDirection::forward;
      const Tensor& output = forward_direction ? y : direction == GraphDirection::backward_data ? dx : dw;
      void* output_at = forward_direction ? a.y : direction == GraphDirection::backward_data ? a.x : a.w;
      AlgorithmChoice reference;
      reference.algorithm = forward_direction ? static_cast<int>(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM)
                            : direction == GraphDirection::backward_data ? static_cast<int>(CUDNN_CONVOLUTION_BWD_DATA_ALGO_1)
                                                                         : static_cast<int>(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1);
      reference.math = initial_math_type(precision);
      if (candidates.front().algorithm == reference.algorithm && candidates.front().math == reference.math) {
        measured.front() = 0.0f;  // the fastest is the reference itself
        return measured;
      }
      if (run_legacy_on_arena(ctx, direction, reference) != CUDNN_STATUS_SUCCESS) return measured;  // nothing to hold them to
      const DeviceReference reference_output(output_at, output, a.reference, a.counters, ctx.stream);
      const auto difference = [&] { return reference_output.difference_from(output_at); };
      if (std::isinf(difference())) return measured;  // the arena's values overflow this problem: nothing to hold them to
      for (std::size_t i = 0; i < candidates.size(); ++i) {
        // Its output and workspace poisoned first with all-ones bytes (a NaN in every float type): a
        // candidate that reads what it did not write shows as infinitely far.
        CB_CHECK_CUDA(cudaMemsetAsync(output_at, 0xff, static_cast<std::size_t>(output.span_bytes()), ctx.stream));
        if (candidates[i].workspace_bytes > 0 && candidates[i].workspace_bytes <= a.workspace_bytes)
          CB_CHECK_CUDA(cudaMemsetAsync(a.workspace, 0xff, candidates[i].workspace_bytes, ctx.stream));
        const double worst =
            run_legacy_on_arena(ctx, direction, candidates[i]) == CUDNN_STATUS_SUCCESS ? difference() : NAN;
        if (std::isnan(worst)) continue;  // not run here: not held against it
        measured[i] = cacheable_difference(worst);
        if (worst <= plan_agreement_bound(precision)) break;
      }
      ctx.refill_arena(output_at, static_cast<std::size_t>(output.span_bytes()));  // no poison left for later layers
      return measured;
    });
    std::vector<AlgorithmChoice> kept;
    std::ostringstream text;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      if (differences[i] > plan_agreement_bound(precision)) {  // false for NaN: not checked
        text << (text.tellp() > 0 ? ", " : "") << names[i] << " (differs by " << difference_text(differences[i]) << ")";
        continue;
      }
      kept.push_back(candidates[i]);
    }
    if (kept.empty()) return candidates;  // none agrees (the reference's own limits): the measured order, none refused
    refused = text.str();
    return kept;
  }

  // One legacy call of `direction` with `c` on the search arena's roles (x, w, y as choose_graph_plan's):
  // its status (a refusal is no error here).
  cudnnStatus_t run_legacy_on_arena(SetupContext& ctx, GraphDirection direction, const AlgorithmChoice& c) {
    const SetupContext::Arena& a = ctx.arena();
    if (c.workspace_bytes > a.workspace_bytes) return CUDNN_STATUS_NOT_SUPPORTED;
    if (direction == GraphDirection::forward) {
      adopt(forward_cd, c);
      return cudnnConvolutionForward(ctx.dnn, &kOne, xd, a.x, wd, a.w, forward_cd,
                                     static_cast<cudnnConvolutionFwdAlgo_t>(c.algorithm), a.workspace,
                                     a.workspace_bytes, &kZero, yd, a.y);
    }
    if (direction == GraphDirection::backward_data) {
      adopt(data_cd, c);
      return cudnnConvolutionBackwardData(ctx.dnn, &kOne, wd, a.w, dyd, a.y, data_cd,
                                          static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algorithm), a.workspace,
                                          a.workspace_bytes, &kZero, dxd, a.x);
    }
    adopt(filter_cd, c);
    return cudnnConvolutionBackwardFilter(ctx.dnn, &kOne, xd, a.x, dyd, a.y, filter_cd,
                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algorithm), a.workspace,
                                          a.workspace_bytes, &kZero, wd, a.w);
  }

  // How far a measured Graph API plan's output on the search arena is from the legacy choice's (with the
  // bias, the residual and the relu applied in its strides by kernels::bias_relu_strided and
  // strided_add), as relative_difference: the plan run twice over different poison in its output
  // and workspace (all-ones bytes, a NaN in every float type, then 0x7f bytes), the worse run; infinity
  // where it refuses to run again; NaN where nothing can be held to it (the reference overflows on the
  // arena's values). choose_graph_plan refuses it beyond plan_agreement_bound.
  double graph_plan_difference(SetupContext& ctx, const GraphConvolution& graph, int plan, GraphDirection direction,
                               bool bias_relu, bool with_residual) {
    const SetupContext::Arena& a = ctx.arena();
    const bool forward_direction = direction == GraphDirection::forward;
    const Tensor& output = forward_direction ? y : direction == GraphDirection::backward_data ? dx : dw;
    void* output_at = forward_direction ? a.y : direction == GraphDirection::backward_data ? a.x : a.w;
    // The reference: the legacy choice on the same arena roles as choose_graph_plan's runs.
    const AlgorithmChoice& legacy = forward_direction ? forward : direction == GraphDirection::backward_data ? data : filter;
    if (run_legacy_on_arena(ctx, direction, legacy) != CUDNN_STATUS_SUCCESS) return NAN;  // nothing to hold it to
    // The legacy output with the graph's epilogue: + bias, + residual, relu (choose_graph_plan's roles:
    // the bias from arena w, the residual, of y's shape, from arena x), in y's own strides.
    if (forward_direction && bias_relu) {
      kernels::bias_relu_strided(a.y, y.type, y.dims, y.strides, a.w, !with_residual, ctx.stream);
      if (with_residual) {
        kernels::strided_add(a.x, residual.strides, a.y, y.strides, y.dims, y.type, 1.0f, ctx.stream);
        kernels::bias_relu_strided(a.y, y.type, y.dims, y.strides, nullptr, true, ctx.stream);
      }
    }
    const DeviceReference reference(output_at, output, a.reference, a.counters, ctx.stream);
    if (std::isinf(reference.difference_from(output_at))) return NAN;  // the arena's values overflow this problem
    const auto workspace_bytes = static_cast<std::size_t>(graph.workspace_bytes(plan));
    double worst = 0;
    for (const int poison : {0xff, 0x7f}) {
      CB_CHECK_CUDA(cudaMemsetAsync(output_at, poison, static_cast<std::size_t>(output.span_bytes()), ctx.stream));
      if (workspace_bytes > 0) CB_CHECK_CUDA(cudaMemsetAsync(a.workspace, poison, workspace_bytes, ctx.stream));
      if (!graph.run(ctx.dnn, plan, a.x, a.w, a.y, bias_relu ? a.w : nullptr, with_residual ? a.x : nullptr,
                     a.workspace, true)) {
        ctx.refill_arena(output_at, static_cast<std::size_t>(output.span_bytes()));
        return std::numeric_limits<double>::infinity();  // refused to run again
      }
      worst = std::max(worst, reference.difference_from(output_at));
    }
    ctx.refill_arena(output_at, static_cast<std::size_t>(output.span_bytes()));  // no poison left for later layers
    return worst;
  }

  // The legacy choice of `direction` by name (what an agreement check held a candidate to).
  std::string legacy_choice_name(GraphDirection direction) const {
    return direction == GraphDirection::forward         ? forward_algorithm_name(forward.algorithm)
           : direction == GraphDirection::backward_data ? backward_data_algorithm_name(data.algorithm)
                                                        : backward_filter_algorithm_name(filter.algorithm);
  }

  // Rows of a channels-last tensor at a uniform stride (packed, or a channel slice).
  static bool uniform_rows(const Tensor& t) {
    return t.strides[1] == 1 && t.strides[2] == t.strides[3] * t.dims[3] && t.strides[0] == t.strides[2] * t.dims[2];
  }
  bool gemm_weight_gradient_applies() const {
    const bool sixteen_bit = w.type == DType::bf16 || w.type == DType::f16;
    const std::int64_t rows = x.dims[0] * x.dims[2] * x.dims[3];
    return nhwc && sixteen_bit && kernel == 1 && stride == 1 && padding == 0 && uniform_rows(x) && uniform_rows(dy) &&
           w.is_packed() && w.dims[1] == x.dims[1] && rows <= std::numeric_limits<int>::max();
  }
  GemmWeightGradient gemm_shape() const {
    return {w.type, x.dims[0] * x.dims[2] * x.dims[3], x.dims[1], dy.dims[1], x.strides[3], dy.strides[3]};
  }
  // `output`: y for the forward, dy for the weight gradient.
  bool im2col_gemm_applies(const SetupContext& ctx, const Tensor& output) const {
    return ctx.config.algorithm == AlgorithmPolicy::exhaustive && ctx.blas != nullptr && !nhwc &&
           x.type == DType::f32 && im2col_shape(output).supported();
  }
  Im2colGemm im2col_shape(const Tensor& output) const {
    Im2colGemm g;
    g.precision = precision;
    g.x_dims = x.dims;
    g.x_strides = x.strides;
    g.y_dims = output.dims;
    g.y_strides = output.strides;
    g.kernel = static_cast<int>(kernel);
    g.stride = static_cast<int>(stride);
    g.padding = static_cast<int>(padding);
    return g;
  }
  // NHWC im2col + GEMM forward (Im2colGemmNhwc): first layers only, few real input channels and a window.
  bool im2col_nhwc_applies(const SetupContext& ctx) const {
    return ctx.config.algorithm == AlgorithmPolicy::exhaustive && ctx.blas != nullptr && nhwc && kernel > 1 &&
           channels >= 1 && channels <= kIm2colNhwcMaxChannels && im2col_nhwc_shape(1).supported();
  }
  Im2colGemmNhwc im2col_nhwc_shape(std::int64_t chunk_images) const {
    Im2colGemmNhwc g;
    g.precision = precision;
    g.element_bytes = size_of(x.type);
    g.x_dims = x.dims;
    g.x_strides = x.strides;
    g.channels = channels;
    g.y_dims = y.dims;
    g.y_strides = y.strides;
    g.kernel = static_cast<int>(kernel);
    g.stride = static_cast<int>(stride);
    g.padding = static_cast<int>(padding);
    g.chunk_images = chunk_images;
    return g;
  }
  // The NHWC im2col + GEMM forward's candidates, each timed whole (the bias, and the relu of a group,
  // included): cublasGemmEx with chunks of kIm2colChunkBytes' columns and with the largest chunk the workspace
  // limit holds, then our bias(+relu) kernel; and cuBLASLt's first kIm2colLtCandidates plans with the bias
  // (and relu) in the GEMM's epilogue, for the chunk sizes that divide the batch nearest those. The fastest
  // (the tie rule keeps cublasGemmEx) replaces cuDNN's forward where it is clearly faster than cuDNN's best
  // plus the bias pass cuDNN's unfused call leaves (modelled, as above).
  void choose_im2col_nhwc(SetupContext& ctx, const std::string& forward_signature) {
    const Im2colGemmNhwc one = im2col_nhwc_shape(1);
    const std::int64_t batch = x.dims[0];
    // The search arena's workspace is the limit (asking the arena for it would allocate one on a warm cache).
    const std::int64_t packed_filter_bytes = static_cast<std::int64_t>(one.forward_workspace_bytes()) - one.column_bytes();
    const std::int64_t within_limit = ctx.config.workspace_limit_bytes - kCublasWorkspace - packed_filter_bytes - 256;
    std::vector<std::int64_t> chunks, lt_chunks;
    for (const std::int64_t bytes : kIm2colChunkBytes) chunks.push_back(one.images_within(bytes));
    if (within_limit >= one.column_bytes_per_image()) chunks.push_back(one.images_within(within_limit));
    for (const std::int64_t images : chunks) lt_chunks.push_back(largest_divisor_at_most(batch, images));
    for (auto* list : {&chunks, &lt_chunks}) {
      std::sort(list->begin(), list->end());
      list->erase(std::unique(list->begin(), list->end()), list->end());
    }
    const bool bias_epilogue = has_bias && !adds_residual && bias.type == y.type;
    nhwc_epilogue = !bias_epilogue ? CUBLASLT_EPILOGUE_DEFAULT
                    : fusion_candidate ? CUBLASLT_EPILOGUE_RELU_BIAS
                                       : CUBLASLT_EPILOGUE_BIAS;
    const int align_y = alignment_of(static_cast<std::size_t>(y.offset));
    const int align_bias = has_bias ? alignment_of(static_cast<std::size_t>(bias.offset)) : 256;
    const auto lt_shape = [&](std::int64_t images) {
      return im2col_nhwc_lt_shape(im2col_nhwc_shape(images), nhwc_epilogue, align_y, align_bias);
    };
    const std::int64_t bias_at = round_up_256(w.bytes());
    std::ostringstream key;
    key << "im2col_gemm_nhwc.forward epilogue=" << static_cast<unsigned>(nhwc_epilogue) << " relu=" << fusion_candidate
        << " align=" << align_y << "," << align_bias << " workspace_limit=" << ctx.config.workspace_limit_bytes << " "
        << forward_signature;
    const MeasuredChoice record = measured_choice(ctx, key.str(), [&] {
      std::vector<MeasuredCandidate> measured;
      for (const std::int64_t images : chunks) {
        const Im2colGemmNhwc shape = im2col_nhwc_shape(images);
        MeasuredCandidate m;
        m.name = "gemm chunk=" + std::to_string(images);
        m.heuristic_rank = 0;  // a tie keeps cublasGemmEx
        m.workspace_bytes = shape.forward_workspace_bytes();
        m.median_ms = time_on_arena(ctx, shape.forward_workspace_bytes(), [&](const SetupContext::Arena& a, void* scratch) {
          im2col_gemm_nhwc_forward(ctx.blas, shape, a.x, a.w, a.y, scratch, ctx.stream);
          if (has_bias) epilogue_on(ctx.dnn, ctx.stream, a.y, static_cast<char*>(a.w) + bias_at);
        });
        m.repetitions = kRetimeRepetitions;
        measured.push_back(m);
      }
      if (ctx.lt == nullptr) return measured;
      for (const std::int64_t images : lt_chunks) {
        const Im2colGemmNhwc shape = im2col_nhwc_shape(images);
        const LtMatmul matmul = LtMatmul::create(lt_shape(images));
        // What the limit leaves a plan after cuBLAS's own workspace, the columns and the packed filter.
        const std::int64_t lt_limit = ctx.config.workspace_limit_bytes - kCublasWorkspace -
                                      round_up_256(static_cast<std::int64_t>(shape.forward_workspace_bytes()));
        if (lt_limit < 0) continue;
        const std::vector<LtPlan> plans = matmul.heuristic(ctx.lt, kIm2colLtCandidates, static_cast<std::size_t>(lt_limit));
        for (std::size_t i = 0; i < plans.size(); ++i) {
          MeasuredCandidate m;
          m.name = "cublasLt chunk=" + std::to_string(images) + " " + plans[i].name;
          m.heuristic_rank = 1 + static_cast<int>(i);
          // Timed as it will run: rebuilt from its name, as a replay from the cache does.
          const std::optional<LtPlan> plan = matmul.from_name(ctx.lt, plans[i].name);
          m.workspace_bytes = plan ? im2col_nhwc_lt_workspace_bytes(shape, *plan) : 0;
          m.median_ms = !plan ? NAN : time_on_arena(ctx, m.workspace_bytes, [&](const SetupContext::Arena& a, void* scratch) {
            CB_CHECK_CUBLAS(im2col_gemm_nhwc_forward_lt(ctx.lt, matmul, *plan, shape, a.x, a.w, a.y,
                                                        lt_adds_bias() ? static_cast<char*>(a.w) + bias_at : nullptr,
                                                        scratch, ctx.stream));
            if (has_bias && !lt_adds_bias()) epilogue_on(ctx.dnn, ctx.stream, a.y, static_cast<char*>(a.w) + bias_at);
          });
          m.repetitions = kRetimeRepetitions;
          measured.push_back(m);
        }
      }
      return measured;
    });
    // The fastest candidate this process can run (the record is ordered by the tie rule).
    for (const MeasuredCandidate& m : record.candidates) {
      if (std::isnan(m.median_ms)) continue;
      std::istringstream name(m.name);
      std::string how, chunk;
      name >> how >> chunk;
      const std::int64_t images = chunk.rfind("chunk=", 0) == 0 ? std::stoll(chunk.substr(6)) : 0;
      if (images < 1 || images > batch || !im2col_nhwc_shape(images).supported()) continue;
      if (how == "cublasLt") {
        if (ctx.lt == nullptr || batch % images != 0) continue;
        std::string plan_name;
        std::getline(name >> std::ws, plan_name);
        LtMatmul matmul = LtMatmul::create(lt_shape(images));
        std::optional<LtPlan> plan = matmul.from_name(ctx.lt, plan_name);
        if (!plan) continue;
        nhwc_matmul.emplace(std::move(matmul));
        nhwc_plan = std::move(plan);
      } else if (how != "gemm") {
        continue;
      }
      forward_im2col_ms = static_cast<float>(m.median_ms);
      forward_nhwc_chunk = images;
      break;
    }
    // cuDNN's forward with the pass its unfused call leaves (the bias, and the relu with our kernel).
    const double cudnn_epilogue_ms =
        has_bias && !fused ? (kernel_epilogue ? 2.0 : 4.0) * static_cast<double>(y.bytes()) / kMemoryBandwidth * 1e3 : 0.0;
    if (forward_nhwc_chunk > 0 && clearly_faster(forward_im2col_ms, forward.time_ms + cudnn_epilogue_ms, ctx.config.search_tie)) {
      forward_im2col = true;
      fused = false;
      return;
    }
    nhwc_matmul.reset();
    nhwc_plan.reset();
  }
  // Whether the cuBLASLt forward's epilogue adds the bias (else, with a bias, our epilogue runs after it:
  // a bias of another type than y, or a residual add after it).
  bool lt_adds_bias() const { return nhwc_epilogue != CUBLASLT_EPILOGUE_DEFAULT; }
  // The bias (and the relu of a group, with our kernel) after an unfused forward, on given pointers (the arena's
  // in the search; run_epilogue's at run time).
  void epilogue_on(cudnnHandle_t dnn, cudaStream_t stream, void* py, const void* pbias) const {
    if (kernel_epilogue)
      kernels::bias_activation(py, y.type, y.dims, y.strides, pbias, fusion_candidate, stream);
    else
      CB_CHECK_CUDNN(cudnnAddTensor(dnn, &kOne, bd, pbias, &kOne, yd, py));
  }
  float time_gemm_weight_gradient(SetupContext& ctx) const {
    return time_on_arena(ctx, 0, [&](const SetupContext::Arena& a, void*) {
      gemm_weight_gradient(ctx.blas, gemm_shape(), a.x, a.y, a.w);
    });
  }
  // A cuBLAS-based candidate's median on the search arena (algorithms.hpp).
  template <typename Candidate>
  float time_on_arena(SetupContext& ctx, std::size_t scratch_bytes, Candidate&& run) const {
    return time_cublas_on_arena(ctx, scratch_bytes, run);
  }

  // The bias gradient: cuDNN's cudnnConvolutionBackwardBias or our
  // channel_sum, measured on the arena where both apply (on an H200 cuDNN's
  // took a large share of AlexNet's conv1 "backward filter" op in tf32).
  // `filter_signature`: the weight gradient's problem_signature (dy's shape, layout and type).
  void choose_bias_gradient(SetupContext& ctx, const std::string& filter_signature) {
    if (!has_bias || bias_gradient_kernel || ctx.config.algorithm != AlgorithmPolicy::exhaustive) return;
    const auto times = measured_times_ms(ctx, "bias_gradient " + filter_signature, {"cudnn", "kernel"}, [&] {
      const SetupContext::Arena& arena = ctx.arena();
      if (arena.workspace_bytes < static_cast<std::size_t>(bias_accumulator.bytes())) return std::vector<float>{NAN, NAN};
      const cudnnTensorDescriptor_t dy_desc = dyd, db_desc = bd;
      const double cudnn_ms = median_in_context_ms(ctx, [&] {
        CB_CHECK_CUDNN(cudnnConvolutionBackwardBias(ctx.dnn, &kOne, dy_desc, arena.y, &kZero, db_desc, arena.w));
        return true;
      });
      const double kernel_ms = median_in_context_ms(ctx, [&] {
        kernels::channel_sum(arena.y, dy.type, dy.dims, dy.strides, static_cast<float*>(arena.workspace), arena.w,
                             db.type, ctx.stream);
        return true;
      });
      return std::vector<float>{static_cast<float>(cudnn_ms), static_cast<float>(kernel_ms)};
    });
    bias_cudnn_ms = times[0];
    bias_kernel_ms = times[1];
    bias_gradient_kernel = clearly_faster(bias_kernel_ms, bias_cudnn_ms, ctx.config.search_tie);  // near-ties keep cuDNN's
  }

  // The relu after it is applied here: by cuDNN's fused call or by our epilogue kernel; in a
  // conv_bn_add_relu group always (the fused graph, or our add+relu kernel after the bias).
  bool relu_fused() const override {
    return adds_residual ||
           (fusion_candidate && has_bias &&
            (fused || kernel_epilogue || graph_forward.graph != nullptr ||
             (forward_im2col && nhwc_plan && nhwc_epilogue == CUBLASLT_EPILOGUE_RELU_BIAS)));
  }

  const char* math(const AlgorithmChoice& c) const {
    return math_type_name(adopt_math_type(precision) ? c.math : CUDNN_FMA_MATH);
  }

  std::string decisions() const override {
    std::ostringstream text;
    text << name << ":fwd=";
    if (graph_forward.graph)
      // The incumbent as compared: the legacy forward, with the epilogue passes the graph saves.
      text << "graph(" << graph_forward.name << " " << graph_forward.time_ms << "ms<" << graph_forward.incumbent_ms << "ms "
           << forward_algorithm_name(forward.algorithm) << " " << forward.time_ms << "ms"
           << (graph_forward.incumbent_ms > forward.time_ms + 1e-9 ? "+epilogue" : "") << ")";
    else if (forward_im2col && nhwc)
      text << "im2col_gemm(chunk=" << forward_nhwc_chunk << (nhwc_plan ? " cublasLt(" + nhwc_plan->name + ")" : "") << " "
           << forward_im2col_ms << "ms<" << forward.time_ms << "ms " << forward_algorithm_name(forward.algorithm) << ")";
    else if (forward_im2col)
      text << "im2col_gemm(" << forward_im2col_ms << "ms<" << forward.time_ms << "ms "
           << forward_algorithm_name(forward.algorithm) << ")";
    else
      text << forward_algorithm_name(forward.algorithm) << "/" << math(forward);
    if (folds_batch_norm) text << "+bn(folded)";
    const bool bias_relu_epilogue = fusion_candidate && has_bias;
    if (residual_graph) text << "+bias+add+relu";
    else if (fused || (graph_forward.graph && bias_relu_epilogue)) text << "+bias+relu";
    else if (forward_im2col && nhwc_plan && lt_adds_bias())
      text << (nhwc_epilogue == CUBLASLT_EPILOGUE_RELU_BIAS ? "+bias+relu(epilogue)" : "+bias(epilogue)");
    else if (kernel_epilogue) text << (bias_relu_epilogue ? "+bias+relu(kernel)" : "+bias(kernel)");
    if (adds_residual && !residual_graph) text << "+add+relu(kernel, unfused: " << residual_note << ")";
    if (!fallback.empty()) text << "(unfused: " << fallback << ")";
    if (!nhwc_note.empty()) text << "[cublasLt: " << nhwc_note << "]";
    if (!forward_im2col && !std::isnan(forward_im2col_ms)) text << "[im2col_gemm " << forward_im2col_ms << "ms>=" << forward.time_ms << "ms]";
    if (!forward_times.empty()) text << "{" << forward_times << "}";
    if (!forward_refused.empty()) text << "[refused " << forward_refused << "]";
    if (!graph_forward.graph && !graph_forward.note.empty()) text << "[graph " << graph_forward.note << "]";
    if (training) {
      text << ",bwd_data=";
      if (graph_data.graph) text << "graph(" << graph_data.name << " " << graph_data.time_ms << "ms<" << data.time_ms << "ms)";
      else text << (data_gradient ? backward_data_algorithm_name(data.algorithm) : "-");
      if (data_gradient) text << "/" << math(data);
      if (data_gradient && !data_times.empty()) text << "{" << data_times << "}";
      if (data_gradient && !data_refused.empty()) text << "[refused " << data_refused << "]";
      if (!graph_data.graph && !graph_data.note.empty()) text << "[graph " << graph_data.note << "]";
      if (graph_filter.graph)
        text << ",bwd_filter=graph(" << graph_filter.name << " " << graph_filter.time_ms << "ms)";
      else if (filter_im2col)
        text << ",bwd_filter=im2col_gemm(" << filter_im2col_ms << "ms<" << filter.time_ms << "ms "
             << backward_filter_algorithm_name(filter.algorithm) << ")";
      else if (filter_gemm)
        text << ",bwd_filter=cublas_gemm(" << filter_gemm_ms << "ms<" << filter.time_ms << "ms "
             << backward_filter_algorithm_name(filter.algorithm) << ")";
      else
        text << ",bwd_filter=" << backward_filter_algorithm_name(filter.algorithm) << "/" << math(filter);
      if (!filter_im2col && !std::isnan(filter_im2col_ms)) text << "[im2col_gemm " << filter_im2col_ms << "ms>=" << filter.time_ms << "ms]";
      if (!filter_times.empty()) text << "{" << filter_times << "}";
      if (!filter_refused.empty()) text << "[refused " << filter_refused << "]";
      if (!graph_filter.graph && !graph_filter.note.empty()) text << "[graph " << graph_filter.note << "]";
      if (has_bias) {
        text << ",bias_grad=" << (bias_gradient_kernel ? "kernel" : "cudnn");
        if (!std::isnan(bias_kernel_ms))
          text << "(kernel " << bias_kernel_ms << "ms, cudnn " << bias_cudnn_ms << "ms)";
      }
    }
    return text.str();
  }

  void run_forward(const Exec& e) {
    if (graph_forward.graph) {
      const bool epilogue = (fusion_candidate && has_bias) || residual_graph;
      if (graph_forward.graph->run(e.dnn, graph_forward.plan, e.ptr(x), e.ptr(w), e.ptr(y), epilogue ? e.ptr(bias) : nullptr,
                                   residual_graph ? e.ptr(residual) : nullptr, e.workspace, e.probing)) {
        if (!epilogue) run_epilogue(e);
        return;
      }
      fallback = "graph plan " + graph_forward.name + " refused at run time";  // prepare()'s validation pass only
      if (residual_graph) residual_note = fallback;
      graph_forward.graph.reset();
      residual_graph = false;
    }
    if (forward_im2col && nhwc && nhwc_plan) {
      const cublasStatus_t status = im2col_gemm_nhwc_forward_lt(e.lt, *nhwc_matmul, *nhwc_plan, im2col_nhwc_shape(forward_nhwc_chunk),
                                                                e.ptr(x), e.ptr(w), e.ptr(y), lt_adds_bias() ? e.ptr(bias) : nullptr,
                                                                e.workspace, e.stream);
      if (status == CUBLAS_STATUS_SUCCESS) {
        if (!lt_adds_bias()) run_epilogue(e);  // else the bias (and relu) were in its epilogue
        return;
      }
      if (!e.probing) CB_CHECK_CUBLAS(status);
      nhwc_note = std::string("plan ") + nhwc_plan->name + " refused at run time: " + cublas_status_name(status);
      nhwc_plan.reset();  // prepare()'s validation pass: cublasGemmEx and our epilogue from now on
    }
    if (forward_im2col && nhwc) {
      im2col_gemm_nhwc_forward(e.blas, im2col_nhwc_shape(forward_nhwc_chunk), e.ptr(x), e.ptr(w), e.ptr(y), e.workspace,
                               e.stream);
      run_epilogue(e);
      return;
    }
    if (forward_im2col) {
      im2col_gemm_forward(e.blas, im2col_shape(y), e.ptr_as<const float>(x), e.ptr_as<const float>(w),
                          e.ptr_as<float>(y), e.workspace, e.stream);
      run_epilogue(e);
      return;
    }
    if (fused) {
      const cudnnStatus_t status = cudnnConvolutionBiasActivationForward(
          e.dnn, &kOne, xd, e.ptr(x), wd, e.ptr(w), forward_cd,
          static_cast<cudnnConvolutionFwdAlgo_t>(forward.algorithm), e.workspace, e.workspace_bytes, &kZero, yd,
          e.ptr(y), bd, e.ptr(bias), relu_descriptor(), yd, e.ptr(y));
      if (status == CUDNN_STATUS_SUCCESS) return;
      const bool refused = status / 1000 == CUDNN_STATUS_NOT_SUPPORTED / 1000 ||
                           status / 1000 == CUDNN_STATUS_BAD_PARAM / 1000;
      if (!(e.probing && refused)) CB_CHECK_CUDNN(status);
      fused = false;  // this cuDNN does not fuse it: the relu op after us runs on its own
      fallback = cudnnGetErrorString(status);
    }
    CB_CHECK_CUDNN(cudnnConvolutionForward(e.dnn, &kOne, xd, e.ptr(x), wd, e.ptr(w), forward_cd,
                                           static_cast<cudnnConvolutionFwdAlgo_t>(forward.algorithm), e.workspace,
                                           e.workspace_bytes, &kZero, yd, e.ptr(y)));
    run_epilogue(e);
  }

  // The bias (and the relu, with the kernel) after an unfused forward; in a conv_bn_add_relu group then
  // the residual add and the relu, one pass of our add+relu kernel.
  void run_epilogue(const Exec& e) {
    if (!has_bias) return;
    epilogue_on(e.dnn, e.stream, e.ptr(y), e.ptr(bias));
    if (adds_residual) kernels::add_relu(e.ptr(y), e.ptr(residual), e.ptr(y), y.type, y.elements(), e.stream);
  }

  void run_backward_filter(const Exec& e) {
    const bool by_graph =
        graph_filter.graph &&
        graph_filter.graph->run(e.dnn, graph_filter.plan, e.ptr(x), e.ptr(dw), e.ptr(dy), nullptr, nullptr, e.workspace,
                                e.probing);
    if (graph_filter.graph && !by_graph) graph_filter.graph.reset();  // refused in prepare()'s validation pass
    if (by_graph) {
      // dw written by the Graph API plan
    } else if (filter_im2col)
      im2col_gemm_weight_gradient(e.blas, im2col_shape(dy), e.ptr_as<const float>(x), e.ptr_as<const float>(dy),
                                  e.ptr_as<float>(dw), e.workspace, e.stream);
    else if (filter_gemm)
      gemm_weight_gradient(e.blas, gemm_shape(), e.ptr(x), e.ptr(dy), e.ptr(dw));
    else
      CB_CHECK_CUDNN(cudnnConvolutionBackwardFilter(e.dnn, &kOne, xd, e.ptr(x), dyd, e.ptr(dy), filter_cd,
                                                  static_cast<cudnnConvolutionBwdFilterAlgo_t>(filter.algorithm),
                                                  e.workspace, e.workspace_bytes, &kZero, wd, e.ptr(dw)));
    if (!has_bias) return;
    if (bias_gradient_kernel)
      kernels::channel_sum(e.ptr(dy), dy.type, dy.dims, dy.strides, e.ptr_as<float>(bias_accumulator), e.ptr(db),
                           db.type, e.stream);
    else
      CB_CHECK_CUDNN(cudnnConvolutionBackwardBias(e.dnn, &kOne, dyd, e.ptr(dy), &kZero, bd, e.ptr(db)));
  }

  void run_backward_data(const Exec& e) {
    if (graph_data.graph) {
      if (graph_data.graph->run(e.dnn, graph_data.plan, e.ptr(dx), e.ptr(w), e.ptr(dy), nullptr, nullptr, e.workspace,
                                e.probing))
        return;
      graph_data.graph.reset();  // refused in prepare()'s validation pass: the legacy choice
    }
    CB_CHECK_CUDNN(cudnnConvolutionBackwardData(e.dnn, &kOne, wd, e.ptr(w), dyd, e.ptr(dy), data_cd,
                                                static_cast<cudnnConvolutionBwdDataAlgo_t>(data.algorithm),
                                                e.workspace, e.workspace_bytes, &dx_beta, dxd, e.ptr(dx)));
  }
};

}  // namespace

void forward_convolution(Builder& b, int index) {
  const Layer& layer = b.layer(index);
  const int from = b.input_of(index);
  auto* c = b.make_impl<Convolution>(index);
  c->name = layer.name;
  c->precision = b.cell.precision;
  c->nhwc = b.nhwc;
  c->kernel = layer.params.kernel;
  c->stride = layer.params.stride;
  c->padding = layer.params.padding;
  c->channels = b.layer(from).output.channels;
  c->has_bias = layer.params.bias;
  c->training = b.training;
  c->fusion_candidate = b.state(index).fusable_relu >= 0;
  c->x = b.state(from).out;
  const std::int64_t in_channels = b.layer(from).output.channels;
  const std::array<std::int64_t, 4> filter{layer.params.out_channels, in_channels, c->kernel, c->kernel};
  const auto fan_in = static_cast<double>(in_channels * c->kernel * c->kernel);
  // The input may be stored with zero-padded channels (Builder::input_channels): so is the filter.
  const int weight = b.add_parameter(index, synthetic::Slot::weight, b.type, filter, b.nhwc,
                                     Parameter::Init::he_uniform, static_cast<float>(std::sqrt(6.0 / fan_in)),
                                     c->x.c());
  c->w = b.parameter(weight).value;
  if (c->has_bias) {
    const int bias = b.add_parameter(index, synthetic::Slot::bias, b.type, {1, layer.params.out_channels, 1, 1},
                                     b.nhwc, Parameter::Init::zeros);
    c->bias = b.parameter(bias).value;
  }
  LayerState& s = b.state(index);
  if (s.folded_batch_norm >= 0) {
    // The batch-norm's builder registers the fold itself (it owns the statistics).
    c->folds_batch_norm = true;
    s.fold_weight = c->w;
    s.fold_conv_bias = c->has_bias ? c->bias : Tensor{};
    s.fold_shift = b.new_tensor({1, layer.params.out_channels, 1, 1}, b.type, b.label(index, "folded batch-norm shift"),
                                true);
    c->bias = s.fold_shift;
    c->has_bias = true;
  }
  c->y = b.new_output(index, b.type);
  s.out = c->y;
  if (s.fused_residual >= 0) {
    // conv_bn_add_relu (graph_builder.cpp's pre-pass): the skip connection exists already (the kit's planner
    // anchors the group at the convolution that runs after it), and nothing writes over it before this op
    // (it has the add for a reader, so no relu or add runs in place over it).
    c->adds_residual = true;
    c->residual = b.state(s.fused_residual).out;
    if (!c->residual.is_packed() || c->residual.strides != c->y.strides || c->residual.type != c->y.type || !c->y.is_packed())
      throw Error("cuDNN engine: " + layer.name + " adds a residual " + shape_text(c->residual) +
                  " that is not packed like its output " + shape_text(c->y));
  }
  if (b.training) b.state(from).value_needed = true;  // backward filter reads x
  b.push(index, Stage::forward, b.label(index, "forward"), {c->x, c->w, c->bias, c->y, c->residual},
         [c](const Exec& e) { c->run_forward(e); });
}

void backward_convolution(Builder& b, int index) {
  auto* c = b.impl_of<Convolution>(index);
  const int from = b.input_of(index);
  c->dy = b.gradient(index);
  for (const Parameter& p : b.parameters)
    if (p.layer == index) (p.slot == synthetic::Slot::weight ? c->dw : c->db) = p.gradient;
  c->bias_gradient_kernel = c->has_bias && (b.type == DType::bf16 || c->dy.channels_last);
  if (c->has_bias)  // C floats; also where the measured search may choose the kernel over cuDNN's
    c->bias_accumulator = b.new_tensor({1, c->dy.c(), 1, 1}, DType::f32, b.label(index, "bias gradient accumulator"));
  b.push(index, Stage::backward, b.label(index, "backward filter"), {c->x, c->dy, c->dw, c->db, c->bias_accumulator},
         [c](const Exec& e) { c->run_backward_filter(e); });
  if (b.state(from).needs_grad) {
    c->data_gradient = true;
    const Builder::Sink sink = b.gradient_sink(from);
    c->dx = sink.target;
    c->dx_beta = sink.beta;
    b.push(index, Stage::backward, b.label(index, "backward data"), {c->w, c->dy, c->dx},
           [c](const Exec& e) { c->run_backward_data(e); });
  }
}

}  // namespace crossbench::cudnn
