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
#include "engines/cudnn/layer_convolution.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "crossbench/error.hpp"
#include "engines/cudnn/algorithm_cache.hpp"
#include "engines/cudnn/kernels_elementwise.hpp"
#include "engines/cudnn/kernels_epilogue.hpp"

namespace crossbench::cudnn {

namespace {

// The largest divisor of `n` that is at most `at_most` (at least 1).
std::int64_t largest_divisor_at_most(std::int64_t n, std::int64_t at_most) {
  for (std::int64_t d = std::min(n, at_most); d > 1; --d)
    if (n % d == 0) return d;
  return 1;
}

}  // namespace

// Rows of a channels-last tensor at a uniform stride (packed, or a channel slice).
bool Convolution::uniform_rows(const Tensor& t) {
  return t.strides[1] == 1 && t.strides[2] == t.strides[3] * t.dims[3] && t.strides[0] == t.strides[2] * t.dims[2];
}

bool Convolution::gemm_weight_gradient_applies() const {
  const bool sixteen_bit = w.type == DType::bf16 || w.type == DType::f16;
  const std::int64_t rows = x.dims[0] * x.dims[2] * x.dims[3];
  return nhwc && sixteen_bit && kernel == 1 && stride == 1 && padding == 0 && uniform_rows(x) && uniform_rows(dy) &&
         w.is_packed() && w.dims[1] == x.dims[1] && rows <= std::numeric_limits<int>::max();
}

GemmWeightGradient Convolution::gemm_shape() const {
  return {w.type, x.dims[0] * x.dims[2] * x.dims[3], x.dims[1], dy.dims[1], x.strides[3], dy.strides[3]};
}

// `output`: y for the forward, dy for the weight gradient.
bool Convolution::im2col_gemm_applies(const SetupContext& ctx, const Tensor& output) const {
  return ctx.config.algorithm == AlgorithmPolicy::exhaustive && ctx.blas != nullptr && !nhwc &&
         x.type == DType::f32 && im2col_shape(output).supported();
}

Im2colGemm Convolution::im2col_shape(const Tensor& output) const {
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
bool Convolution::im2col_nhwc_applies(const SetupContext& ctx) const {
  return ctx.config.algorithm == AlgorithmPolicy::exhaustive && ctx.blas != nullptr && nhwc && kernel > 1 &&
         channels >= 1 && channels <= kIm2colNhwcMaxChannels && im2col_nhwc_shape(1).supported();
}

Im2colGemmNhwc Convolution::im2col_nhwc_shape(std::int64_t chunk_images) const {
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
void Convolution::choose_im2col_nhwc(SetupContext& ctx, const std::string& forward_signature) {
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

float Convolution::time_gemm_weight_gradient(SetupContext& ctx) const {
  return time_on_arena(ctx, 0, [&](const SetupContext::Arena& a, void*) {
    gemm_weight_gradient(ctx.blas, gemm_shape(), a.x, a.y, a.w);
  });
}

// The bias gradient: cuDNN's cudnnConvolutionBackwardBias or our
// channel_sum, measured on the arena where both apply (on an H200 cuDNN's
// took a large share of AlexNet's conv1 "backward filter" op in tf32).
// `filter_signature`: the weight gradient's problem_signature (dy's shape, layout and type).
void Convolution::choose_bias_gradient(SetupContext& ctx, const std::string& filter_signature) {
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

}  // namespace crossbench::cudnn
