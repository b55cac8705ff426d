// Fully-connected layers through cuBLAS (cublasGemmEx) with the compute type
// of the precision: fp32 CUBLAS_COMPUTE_32F on a handle in
// CUBLAS_DEFAULT_MATH (no TF32: strict, as PyTorch with allow_tf32 off),
// tf32 CUBLAS_COMPUTE_32F_FAST_TF32, fp16/bf16 16-bit A and B with
// CUBLAS_COMPUTE_32F (fp32 accumulation). The layer feeding the loss writes
// fp32 logits in every precision, so the loss is computed in fp32 (what
// autocast does for cross_entropy).
//
// Row-major y (N x out) = x (N x in) W^T, with W (out x in) row-major, is in
// cuBLAS's column-major terms Y (out x N, ld out) = op_T(W: in x out, ld in) X (in x N, ld in):
// gemm(T, N, out, N, in). Backward data: dX (in x N) = W (in x out) dY (out x N);
// weights: dW (in x out) = X (in x N) dY^T.
// The input is taken flattened in its physical order: in NHWC that is
// (H, W, C), so the weight is stored (out, H, W, C) — the canonical (out, C, H, W)
// weights of synthetic.hpp, permuted when they are generated.
//
// With fusion on (engine.fuse, the default) the forward is one cuBLASLt GEMM
// with the bias in its epilogue (CUBLASLT_EPILOGUE_BIAS), and with the relu
// too (RELU_BIAS) where the layer anchors a lowered fc_bias_relu group (the
// relu's own op then does nothing, as after a convolution); the weight
// gradient is one cuBLASLt GEMM whose epilogue reduces the bias gradient
// (BGRADB: dy is operand B of dW = X dY^T above, and db sums dY over the
// batch, the GEMM's k). The dReLU stays in the relu's backward op: cuBLASLt's
// DRELU_BGRAD epilogue would fold it into the next layer's data-gradient GEMM
// (with a relu mask saved by the forward, RELU_AUX_BIAS), but VGG puts a
// dropout after every fully-connected relu and AlexNet after relu6, so only
// AlexNet's relu7 -> fc8 could take it; not done.
// cuBLASLt's plans are chosen by the --algo policy (cublaslt_matmul.hpp):
//   heuristic   cuBLASLt's first heuristic plan (the 2017 frameworks had no
//               such epilogues; a deployment that fuses takes this one);
//   exhaustive  its heuristic's first kLtCandidates plans within the workspace
//               limit and the legacy path (cublasGemmEx, then our bias
//               kernels) timed in context on the search arena
//               (median_in_context_ms), ordered with algorithm_cache.hpp's tie
//               rule and recorded in the algorithm cache (--algo-cache) by the
//               plans' names, which rebuild them on replay; the legacy path
//               stays a candidate, so the search cannot make a layer slower.
// Where cuBLASLt cannot take the problem (the 16-bit logits layer: fp32 output
// with a 16-bit bias, which cuBLASLt's bias epilogue does not take: its bias
// has the output's type outside fp8 and IMMA kernels, cublasLt.h) or has no
// plan, the legacy path runs and the decisions say why. With fusion off
// (--fuse false) every fully-connected layer runs the legacy path: cublasGemmEx
// and our add_bias and bias_gradient kernels (and the relu's own op).
#include <array>
#include <cmath>
#include <optional>
#include <sstream>

#include "crossbench/error.hpp"
#include "engines/cudnn/algorithm_cache.hpp"
#include "engines/cudnn/algorithms.hpp"
#include "engines/cudnn/cublaslt_matmul.hpp"
#include "engines/cudnn/graph.hpp"
#include "engines/cudnn/im2col_gemm.hpp"
#include "engines/cudnn/kernels_epilogue.hpp"

namespace crossbench::cudnn {
namespace {

// cuBLASLt heuristic plans timed per GEMM by the measured search.
constexpr int kLtCandidates = 8;
// The legacy candidate's name in the algorithm cache and the decisions.
constexpr const char* kLegacy = "cublasGemmEx+kernel";

std::int64_t round_up(std::int64_t bytes) { return (bytes + 255) / 256 * 256; }

class FullyConnected final : public LayerImpl {
 public:
  std::string name;
  Precision precision = Precision::fp32;
  std::int64_t rows = 0, in = 0, out = 0;
  Tensor x, y, w, bias, dy, dx, dw, db;
  float dx_beta = 0;
  bool has_bias = false;
  bool training = false;
  bool lt_allowed = false;  // engine.fuse: cuBLASLt's epilogues may replace the legacy calls
  bool relu = false;        // the anchor of a lowered fc_bias_relu group: the forward applies the relu

  // One GEMM with its epilogue: cuBLASLt's chosen plan, or the legacy calls.
  struct Choice {
    std::optional<LtMatmul> matmul;  // the problem, where cuBLASLt takes it
    std::optional<LtPlan> plan;      // the chosen plan; none: the legacy calls
    std::string how;                 // "heuristic" or the measured times
    std::string note;                // why the legacy calls run
  };
  Choice forward, weights;

  bool relu_fused() const override { return relu; }

  void plan_search(SetupContext& ctx) override {
    if (!lt_allowed || ctx.config.algorithm != AlgorithmPolicy::exhaustive) return;
    // Arena roles: x the input, w the weights then the bias (or their gradients), y the output (or dy).
    const std::int64_t bias_bytes = out * 4;  // the widest bias type
    ctx.reserve_arena(x.bytes(), round_up(w.bytes()) + bias_bytes, std::max(y.bytes(), training ? dy.bytes() : 0));
  }

  // D (m x n) = op_a(A) op_b(B) with leading dimensions `ld` (A, B, D) and the bias (or its gradient) `vector`.
  LtGemmShape gemm(cublasOperation_t trans_a, cublasOperation_t trans_b, std::array<std::int64_t, 3> mnk,
                   std::array<std::int64_t, 3> ld, const Tensor& a, const Tensor& b, const Tensor& d,
                   const Tensor& vector, cublasLtEpilogue_t epilogue) const {
    LtGemmShape s;
    s.trans_a = trans_a;
    s.trans_b = trans_b;
    s.m = static_cast<int>(mnk[0]);
    s.n = static_cast<int>(mnk[1]);
    s.k = static_cast<int>(mnk[2]);
    s.lda = static_cast<int>(ld[0]);
    s.ldb = static_cast<int>(ld[1]);
    s.ldd = static_cast<int>(ld[2]);
    s.a_type = cuda_type(a.type);
    s.b_type = cuda_type(b.type);
    s.d_type = cuda_type(d.type);
    s.bias_type = vector.valid() ? cuda_type(vector.type) : s.d_type;
    s.compute = gemm_compute_type(precision);
    s.epilogue = epilogue;
    s.align_a = alignment_of(static_cast<std::size_t>(a.offset));
    s.align_b = alignment_of(static_cast<std::size_t>(b.offset));
    s.align_d = alignment_of(static_cast<std::size_t>(d.offset));
    s.align_bias = vector.valid() ? alignment_of(static_cast<std::size_t>(vector.offset)) : 256;
    return s;
  }
  // Y (out x N) = op_T(W) X, the bias (and relu) in the epilogue.
  LtGemmShape forward_shape() const {
    const cublasLtEpilogue_t epilogue =
        relu ? (has_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU) : CUBLASLT_EPILOGUE_BIAS;
    return gemm(CUBLAS_OP_T, CUBLAS_OP_N, {out, rows, in}, {in, in, out}, w, x, y, has_bias ? bias : Tensor{}, epilogue);
  }
  // dW (in x out) = X op_T(dY), db = the sum of dY (operand B) over k, the batch.
  LtGemmShape weights_shape() const {
    return gemm(CUBLAS_OP_N, CUBLAS_OP_T, {in, out, rows}, {in, out, in}, x, dy, dw, db, CUBLASLT_EPILOGUE_BGRADB);
  }

  // Why cuBLASLt cannot take the problem by its documented type rules, or nullopt.
  static std::optional<std::string> unsupported(const LtGemmShape& s) {
    if (s.a_type != s.b_type) return "A and B of different types";
    const bool bias = s.epilogue != CUBLASLT_EPILOGUE_RELU;
    if (bias && s.bias_type != s.d_type)
      return std::string("bias ") + (s.bias_type == CUDA_R_16BF ? "bf16" : s.bias_type == CUDA_R_16F ? "f16" : "f32") +
             " with an f32 output: cuBLASLt's bias has the output's type outside fp8 and IMMA kernels (cublasLt.h)";
    return std::nullopt;
  }

  static std::string signature(const char* what, const LtGemmShape& s, std::size_t workspace_limit) {
    std::ostringstream text;
    const auto type = [](cudaDataType_t t) { return t == CUDA_R_16BF ? "bf16" : t == CUDA_R_16F ? "f16" : "f32"; };
    text << "fc." << what << " m=" << s.m << " n=" << s.n << " k=" << s.k << " op=" << (s.trans_a == CUBLAS_OP_N ? "N" : "T")
         << (s.trans_b == CUBLAS_OP_N ? "N" : "T") << " ld=" << s.lda << "," << s.ldb << "," << s.ldd << " a=" << type(s.a_type)
         << " b=" << type(s.b_type) << " d=" << type(s.d_type) << " bias=" << type(s.bias_type)
         << " compute=" << compute_type_name(s.compute) << " epilogue=" << static_cast<unsigned>(s.epilogue)
         << " align=" << s.align_a << "," << s.align_b << "," << s.align_d << "," << s.align_bias
         << " workspace_limit=" << workspace_limit;
    return text.str();
  }

  // Arena pointers of one GEMM: A, B, D and the bias (read, or its gradient written).
  struct ArenaRoles {
    const void* a;
    const void* b;
    void* d;
    void* bias;
  };

  // Chooses `c`'s plan by the policy; `legacy` times the legacy calls on the arena.
  void choose(SetupContext& ctx, Choice& c, const char* what, const LtGemmShape& shape,
              const std::function<ArenaRoles(const SetupContext::Arena&)>& roles,
              const std::function<void(const SetupContext::Arena&)>& legacy) {
    if (const auto why = unsupported(shape)) {
      c.note = *why;
      return;
    }
    c.matmul = LtMatmul::create(shape);
    const auto limit = static_cast<std::size_t>(std::max<std::int64_t>(0, ctx.config.workspace_limit_bytes));
    if (ctx.config.algorithm != AlgorithmPolicy::exhaustive) {
      const std::vector<LtPlan> plans = c.matmul->heuristic(ctx.lt, 1, limit);
      if (plans.empty()) {
        c.note = "cuBLASLt has no plan for it within the workspace limit";
        return;
      }
      c.plan = plans.front();
      c.how = "heuristic";
      ctx.need_workspace(c.plan->workspace_bytes);
      return;
    }
    const LtMatmul& matmul = *c.matmul;
    const MeasuredChoice record = measured_choice(ctx, signature(what, shape, limit), [&] {
      std::vector<MeasuredCandidate> measured;
      const SetupContext::Arena& arena = ctx.arena();
      const ArenaRoles r = roles(arena);
      const std::vector<LtPlan> plans = matmul.heuristic(ctx.lt, kLtCandidates, std::min(limit, arena.workspace_bytes));
      for (std::size_t i = 0; i < plans.size(); ++i) {
        MeasuredCandidate m;
        m.name = plans[i].name;
        m.heuristic_rank = static_cast<int>(i);
        m.workspace_bytes = plans[i].workspace_bytes;
        // Timed as it will run: rebuilt from its name, as a replay from the cache does.
        std::optional<LtPlan> plan = matmul.from_name(ctx.lt, plans[i].name);
        if (plan && plan->workspace_bytes > std::min(limit, arena.workspace_bytes)) plan.reset();
        m.median_ms = !plan ? NAN : median_in_context_ms(ctx, [&] {
          return matmul.run(ctx.lt, *plan, r.a, r.b, r.d, r.bias, arena.workspace, ctx.stream) == CUBLAS_STATUS_SUCCESS;
        });
        m.repetitions = kRetimeRepetitions;
        measured.push_back(m);
      }
      MeasuredCandidate old;
      old.name = kLegacy;
      old.median_ms = time_cublas_on_arena(ctx, 0, [&](const SetupContext::Arena& a, void*) { legacy(a); });
      old.repetitions = kRetimeRepetitions;
      measured.push_back(old);
      return measured;
    });
    // The decisions: the chosen (or fastest) cuBLASLt plan's median and the legacy path's [ms].
    double best_lt_ms = NAN, legacy_ms = NAN;
    bool legacy_first = false;  // the legacy calls are the fastest left: no plan is taken
    for (const MeasuredCandidate& m : record.candidates) {
      if (m.name == kLegacy) {
        legacy_ms = m.median_ms;
        legacy_first = !c.plan;
        continue;
      }
      if (std::isnan(best_lt_ms)) best_lt_ms = m.median_ms;
      if (c.plan || legacy_first) continue;
      c.plan = matmul.from_name(ctx.lt, m.name);
      if (c.plan && c.plan->workspace_bytes > limit) c.plan.reset();
      if (c.plan) best_lt_ms = m.median_ms;
    }
    std::ostringstream how;
    how.precision(4);
    how << best_lt_ms << "ms vs " << kLegacy << " " << legacy_ms << "ms";
    if (!c.plan) {
      c.note = record.candidates.empty() ? "measured: no candidate ran" : "measured: cuBLASLt's best " + how.str();
      return;
    }
    c.how = how.str();
    ctx.need_workspace(c.plan->workspace_bytes);
  }

  void setup(SetupContext& ctx) override {
    if (!lt_allowed || ctx.lt == nullptr) return;
    if (precision == Precision::fp32 && training && ctx.config.algorithm == AlgorithmPolicy::exhaustive) {
      // On the H200 the measured search's cuBLASLt choices for AlexNet in strict fp32 (split-K 8 forwards)
      // left its fully-connected weight gradients up to 10% of a tensor's largest value from cublasGemmEx's,
      // with the logits alike to 1e-4, where the heuristic's first plan agrees to 1e-6 (FullyConnectedFusion,
      // bench/results/2026-12-02/call7). One relu7 unit on the other side of 0 moves a whole sample's fc6
      // gradient, so that may be a flip, not a defect; until a test tells the two apart, strict fp32 training
      // under the search keeps the legacy GEMMs (with the group's bias+relu kernel). Inference has no
      // gradient to flip: its forwards are searched, split-K plans included, where cublasGemmEx runs AlexNet's
      // fc6 and fc7 at batch 64 at 9.4 TFLOPS (16 output tiles on 132 SMs; bench/results/2026-12-04/call49).
      forward.note = weights.note = "strict fp32 training under the measured search: the legacy GEMMs (call7)";
      return;
    }
    if (has_bias || relu) {
      const std::int64_t bias_at = round_up(w.bytes());
      choose(ctx, forward, relu ? "forward+bias+relu" : "forward+bias", forward_shape(),
             [&](const SetupContext::Arena& a) {
               return ArenaRoles{a.w, a.x, a.y, has_bias ? static_cast<char*>(a.w) + bias_at : nullptr};
             },
             [&](const SetupContext::Arena& a) {
               legacy_forward(ctx.blas, ctx.stream, a.x, a.w, a.y, static_cast<char*>(a.w) + bias_at);
             });
    }
    if (training && has_bias) {
      const std::int64_t bias_at = round_up(dw.bytes());
      choose(ctx, weights, "backward-weights+bgradb", weights_shape(),
             [&](const SetupContext::Arena& a) {
               return ArenaRoles{a.x, a.y, a.w, static_cast<char*>(a.w) + bias_at};
             },
             [&](const SetupContext::Arena& a) {
               legacy_weights(ctx.blas, ctx.stream, a.x, a.y, a.w, static_cast<char*>(a.w) + bias_at);
             });
    }
  }

  std::string decisions() const override {
    if (!lt_allowed) return {};  // the session's fc=cublas says it
    std::ostringstream text;
    const auto say = [&](const Choice& c, const char* epilogue) {
      if (c.plan) text << "cublasLt(" << c.plan->name << " " << c.how << ")" << epilogue;
      else text << kLegacy << (c.note.empty() ? "" : "[cublasLt: " + c.note + "]");
    };
    text << name << ":fwd=";
    if (!has_bias && !relu) text << "cublasGemmEx";
    else say(forward, relu ? (has_bias ? "+bias+relu" : "+relu") : "+bias");
    if (training && has_bias) {
      text << ",bwd_weights=";
      say(weights, "+bgradb");
    }
    return text.str();
  }

  // The legacy forward: cublasGemmEx, then the bias (and, in a group, the relu) in our kernels.
  void legacy_forward(cublasHandle_t blas, cudaStream_t stream, const void* px, const void* pw, void* py,
                      const void* pbias) const {
    CB_CHECK_CUBLAS(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out), static_cast<int>(rows),
                                 static_cast<int>(in), &kOne, pw, cuda_type(w.type), static_cast<int>(in), px,
                                 cuda_type(x.type), static_cast<int>(in), &kZero, py, cuda_type(y.type),
                                 static_cast<int>(out), gemm_compute_type(precision), CUBLAS_GEMM_DEFAULT));
    if (relu && has_bias && y.type == bias.type && kernels::bias_activation_supported(y.dims, y.strides)) {
      kernels::bias_activation(py, y.type, y.dims, y.strides, pbias, true, stream);
      return;
    }
    if (has_bias) kernels::add_bias(py, y.type, pbias, bias.type, rows, out, stream);
    if (relu) kernels::relu(py, py, y.type, y.elements(), stream);
  }
  // The legacy weight gradient: cublasGemmEx, then our bias-gradient kernel.
  void legacy_weights(cublasHandle_t blas, cudaStream_t stream, const void* px, const void* pdy, void* pdw,
                      void* pdb) const {
    CB_CHECK_CUBLAS(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(in), static_cast<int>(out),
                                 static_cast<int>(rows), &kOne, px, cuda_type(x.type), static_cast<int>(in), pdy,
                                 cuda_type(dy.type), static_cast<int>(out), &kZero, pdw, cuda_type(dw.type),
                                 static_cast<int>(in), gemm_compute_type(precision), CUBLAS_GEMM_DEFAULT));
    if (has_bias) kernels::bias_gradient(pdy, dy.type, pdb, db.type, rows, out, stream);
  }

  // cuBLASLt's plan where one was chosen: false where prepare()'s validation
  // pass saw it refused (the legacy calls run from then on; the decisions say so).
  bool run_lt(const Exec& e, Choice& c, const void* a, const void* b, void* d, void* vector) {
    if (!c.plan) return false;
    if (!e.probing) {
      CB_CHECK_CUBLAS(c.matmul->run(e.lt, *c.plan, a, b, d, vector, e.workspace, e.stream));
      return true;
    }
    const cublasStatus_t status = c.matmul->run(e.lt, *c.plan, a, b, d, vector, e.workspace, e.stream);
    if (status == CUBLAS_STATUS_SUCCESS) return true;
    c.note = std::string("plan ") + c.plan->name + " refused at run time: " + cublas_status_name(status);
    c.plan.reset();
    return false;
  }

  void run_forward(const Exec& e) {
    if (run_lt(e, forward, e.ptr(w), e.ptr(x), e.ptr(y), has_bias ? e.ptr(bias) : nullptr)) return;
    legacy_forward(e.blas, e.stream, e.ptr(x), e.ptr(w), e.ptr(y), has_bias ? e.ptr(bias) : nullptr);
  }
  void run_backward_data(const Exec& e) const {
    CB_CHECK_CUBLAS(cublasGemmEx(e.blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(in), static_cast<int>(rows),
                                 static_cast<int>(out), &kOne, e.ptr(w), cuda_type(w.type), static_cast<int>(in),
                                 e.ptr(dy), cuda_type(dy.type), static_cast<int>(out), &dx_beta, e.ptr(dx),
                                 cuda_type(dx.type), static_cast<int>(in), gemm_compute_type(precision),
                                 CUBLAS_GEMM_DEFAULT));
  }
  void run_backward_weights(const Exec& e) {
    if (run_lt(e, weights, e.ptr(x), e.ptr(dy), e.ptr(dw), has_bias ? e.ptr(db) : nullptr)) return;
    legacy_weights(e.blas, e.stream, e.ptr(x), e.ptr(dy), e.ptr(dw), has_bias ? e.ptr(db) : nullptr);
  }
};

}  // namespace

void forward_fully_connected(Builder& b, int index) {
  const Layer& layer = b.layer(index);
  const int from = b.input_of(index);
  auto* fc = b.make_impl<FullyConnected>(index);
  fc->name = layer.name;
  fc->precision = b.cell.precision;
  fc->training = b.training;
  fc->lt_allowed = b.config.fuse && b.config.fc_epilogues;
  fc->relu = b.state(index).fusable_relu >= 0;  // graph_builder.cpp's pre-pass: a lowered fc_bias_relu group
  fc->x = b.state(from).out;
  if (!fc->x.is_packed()) throw Error("fully-connected input is not packed: " + shape_text(fc->x));
  fc->rows = b.batch;
  fc->in = fc->x.c() * fc->x.h() * fc->x.w();
  fc->out = layer.params.out_channels;
  fc->has_bias = layer.params.bias;
  if (fc->rows > INT32_MAX || fc->in > INT32_MAX || fc->out > INT32_MAX)
    throw Error("fully-connected dimensions exceed cuBLAS's 32-bit sizes");
  const auto logical = b.logical_dims(from);  // (C, H, W) of the flattened map: the weight's canonical columns
  if (logical[1] * logical[2] * logical[3] != fc->in) throw Error("fully-connected input size mismatch");
  const std::array<std::int64_t, 4> weight{fc->out, logical[1], logical[2], logical[3]};
  fc->w = b.parameter(b.add_parameter(index, synthetic::Slot::weight, b.type, weight, fc->x.channels_last,
                                      Parameter::Init::he_uniform,
                                      static_cast<float>(std::sqrt(6.0 / static_cast<double>(fc->in)))))
              .value;
  if (fc->has_bias)
    fc->bias = b.parameter(b.add_parameter(index, synthetic::Slot::bias, b.type, {1, fc->out, 1, 1}, false,
                                           Parameter::Init::zeros))
                   .value;
  const bool logits = index == b.network.logits_layer();
  fc->y = b.new_output(index, logits ? DType::f32 : b.type);
  b.state(index).out = fc->y;
  if (b.training) b.state(from).value_needed = true;  // the weight gradient reads x
  b.push(index, Stage::forward, b.label(index, "forward"), {fc->x, fc->w, fc->bias, fc->y},
         [fc](const Exec& e) { fc->run_forward(e); });
}

void backward_fully_connected(Builder& b, int index) {
  auto* fc = b.impl_of<FullyConnected>(index);
  const int from = b.input_of(index);
  fc->dy = b.gradient(index);
  if (!fc->dy.is_packed()) throw Error("fully-connected output gradient is not packed");
  for (const Parameter& p : b.parameters)
    if (p.layer == index) (p.slot == synthetic::Slot::weight ? fc->dw : fc->db) = p.gradient;
  b.push(index, Stage::backward, b.label(index, "backward weights"), {fc->x, fc->dy, fc->dw, fc->db},
         [fc](const Exec& e) { fc->run_backward_weights(e); });
  if (!b.state(from).needs_grad) return;
  const Builder::Sink sink = b.gradient_sink(from);
  if (!sink.target.is_packed()) throw Error("fully-connected input gradient is not packed");
  fc->dx = sink.target;
  fc->dx_beta = sink.beta;
  b.push(index, Stage::backward, b.label(index, "backward data"), {fc->w, fc->dy, fc->dx},
         [fc](const Exec& e) { fc->run_backward_data(e); });
}

}  // namespace crossbench::cudnn
