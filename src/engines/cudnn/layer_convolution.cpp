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
//
// Training with engine.conv_statistics: a convolution whose output only a fused batch-norm reads may also
// write that output's per-channel sum and sum of squares for it (a Graph API graph with cuDNN's genstats,
// layer_convolution_graph_search.cpp's choose_statistics_graph), so that the batch-norm skips its own
// statistics pass; the decisions say "+statistics(for BN)" or why not.
#include "engines/cudnn/layer_convolution.hpp"

#include <array>
#include <cmath>
#include <sstream>

#include "crossbench/error.hpp"
#include "engines/cudnn/kernels_epilogue.hpp"
#include "engines/cudnn/kernels_elementwise.hpp"

namespace crossbench::cudnn {

void Convolution::plan_search(SetupContext& ctx) {
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

ConvDesc Convolution::make_conv(Precision p) const {
  ConvDesc cd = make_conv_desc();
  const int pad = static_cast<int>(padding), s = static_cast<int>(stride);
  // fp32 accumulation in every precision (16-bit data: CUDNN_DATA_FLOAT compute, as PyTorch).
  CB_CHECK_CUDNN(cudnnSetConvolution2dDescriptor(cd, pad, pad, s, s, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CB_CHECK_CUDNN(cudnnSetConvolutionMathType(cd, initial_math_type(p)));
  return cd;
}

void Convolution::adopt(cudnnConvolutionDescriptor_t cd, const AlgorithmChoice& c) const {
  if (adopt_math_type(precision)) CB_CHECK_CUDNN(cudnnSetConvolutionMathType(cd, c.math));
}

void Convolution::setup(SetupContext& ctx) {
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
  if (statistics) choose_statistics_graph(ctx, forward_signature);
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

// The bias (and the relu of a group, with our kernel) after an unfused forward, on given pointers (the arena's
// in the search; run_epilogue's at run time).
void Convolution::epilogue_on(cudnnHandle_t dnn, cudaStream_t stream, void* py, const void* pbias) const {
  if (kernel_epilogue)
    kernels::bias_activation(py, y.type, y.dims, y.strides, pbias, fusion_candidate, stream);
  else
    CB_CHECK_CUDNN(cudnnAddTensor(dnn, &kOne, bd, pbias, &kOne, yd, py));
}

// The relu after it is applied here: by cuDNN's fused call or by our epilogue kernel; in a
// conv_bn_add_relu group always (the fused graph, or our add+relu kernel after the bias).
bool Convolution::relu_fused() const {
  return adds_residual ||
         (fusion_candidate && has_bias &&
          (fused || kernel_epilogue || graph_forward.graph != nullptr ||
           (forward_im2col && nhwc_plan && nhwc_epilogue == CUBLASLT_EPILOGUE_RELU_BIAS)));
}

const char* Convolution::math(const AlgorithmChoice& c) const {
  return math_type_name(adopt_math_type(precision) ? c.math : CUDNN_FMA_MATH);
}

std::string Convolution::decisions() const {
  std::ostringstream text;
  text << name << ":fwd=";
  if (graph_forward.graph)
    // The incumbent as compared: the legacy forward, with the epilogue passes the graph saves.
    text << "graph(" << graph_forward.name << " " << graph_forward.time_ms << "ms<" << graph_forward.incumbent_ms << "ms "
         << forward_algorithm_name(forward.algorithm) << " " << forward.time_ms << "ms"
         << (graph_forward.incumbent_ms > forward.time_ms + 1e-9 ? "+epilogue" : "")
         << (graph_forward.unchecked ? " unchecked" : "") << ")";
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
  if (statistics_graph) text << "+statistics(for " << statistics_for << ")";
  else if (statistics) text << "[statistics for " << statistics_for << ": " << statistics_note << "]";
  if (!fallback.empty()) text << "(unfused: " << fallback << ")";
  if (!nhwc_note.empty()) text << "[cublasLt: " << nhwc_note << "]";
  if (!forward_im2col && !std::isnan(forward_im2col_ms)) text << "[im2col_gemm " << forward_im2col_ms << "ms>=" << forward.time_ms << "ms]";
  if (!forward_times.empty()) text << "{" << forward_times << "}";
  if (!forward_refused.empty()) text << "[refused " << forward_refused << "]";
  if (!graph_forward.graph && !graph_forward.note.empty()) text << "[graph " << graph_forward.note << "]";
  if (training) {
    text << ",bwd_data=";
    if (graph_data.graph)
      text << "graph(" << graph_data.name << " " << graph_data.time_ms << "ms<" << data.time_ms << "ms"
           << (graph_data.unchecked ? " unchecked" : "") << ")";
    else text << (data_gradient ? backward_data_algorithm_name(data.algorithm) : "-");
    if (data_gradient) text << "/" << math(data);
    if (data_gradient && !data_times.empty()) text << "{" << data_times << "}";
    if (data_gradient && !data_refused.empty()) text << "[refused " << data_refused << "]";
    if (!graph_data.graph && !graph_data.note.empty()) text << "[graph " << graph_data.note << "]";
    if (graph_filter.graph)
      text << ",bwd_filter=graph(" << graph_filter.name << " " << graph_filter.time_ms << "ms"
           << (graph_filter.unchecked ? " unchecked" : "") << ")";
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

void Convolution::run_forward(const Exec& e) {
  if (graph_forward.graph) {
    const bool epilogue = (fusion_candidate && has_bias) || residual_graph;
    const bool ran =
        statistics_graph
            ? graph_forward.graph->run_with_statistics(e.dnn, graph_forward.plan, e.ptr(x), e.ptr(w), e.ptr(y),
                                                       e.ptr_as<float>(statistics->sum),
                                                       e.ptr_as<float>(statistics->sum_of_squares), e.workspace, e.probing)
            : graph_forward.graph->run(e.dnn, graph_forward.plan, e.ptr(x), e.ptr(w), e.ptr(y),
                                       epilogue ? e.ptr(bias) : nullptr, residual_graph ? e.ptr(residual) : nullptr,
                                       e.workspace, e.probing);
    if (ran) {
      if (!epilogue) run_epilogue(e);
      return;
    }
    fallback = "graph plan " + graph_forward.name + " refused at run time";  // prepare()'s validation pass only
    if (residual_graph) residual_note = fallback;
    if (statistics_graph) {
      // The batch-norm after it computes its own (its op runs after this one, in this pass too).
      statistics_note = fallback;
      statistics->written = false;
    }
    graph_forward.graph.reset();
    residual_graph = false;
    statistics_graph = false;
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
void Convolution::run_epilogue(const Exec& e) {
  if (!has_bias) return;
  epilogue_on(e.dnn, e.stream, e.ptr(y), e.ptr(bias));
  if (adds_residual) kernels::add_relu(e.ptr(y), e.ptr(residual), e.ptr(y), y.type, y.elements(), e.stream);
}

void Convolution::run_backward_filter(const Exec& e) {
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

void Convolution::run_backward_data(const Exec& e) {
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
  if (s.statistics_for >= 0) {
    // engine.conv_statistics: the batch-norm after it may take its statistics from this op (setup decides).
    // Zero once; the batch-norm's forward leaves them 0 after reading them.
    auto statistics = std::make_shared<ConvolutionStatistics>();
    const std::array<std::int64_t, 4> per_channel{1, layer.params.out_channels, 1, 1};
    statistics->sum = b.new_tensor(per_channel, DType::f32, b.label(index, "statistics: sum"), true);
    statistics->sum_of_squares = b.new_tensor(per_channel, DType::f32, b.label(index, "statistics: sum of squares"), true);
    statistics->convolution = layer.name;
    c->statistics_for = b.layer(s.statistics_for).name;
    b.after_initialise.push_back([statistics](const Exec& e) {
      for (const Tensor* t : {&statistics->sum, &statistics->sum_of_squares})
        CB_CHECK_CUDA(cudaMemsetAsync(e.ptr(*t), 0, static_cast<std::size_t>(t->bytes()), e.stream));
    });
    c->statistics = s.statistics = std::move(statistics);
  }
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
  std::vector<Tensor> touched{c->x, c->w, c->bias, c->y, c->residual};
  if (c->statistics) touched.insert(touched.end(), {c->statistics->sum, c->statistics->sum_of_squares});
  b.push(index, Stage::forward, b.label(index, "forward"), touched, [c](const Exec& e) { c->run_forward(e); });
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
