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
#include <cmath>

#include "crossbench/error.hpp"
#include "engines/cudnn/graph.hpp"
#include "engines/cudnn/im2col_gemm.hpp"
#include "engines/cudnn/kernels_epilogue.hpp"

namespace crossbench::cudnn {
namespace {

class FullyConnected final : public LayerImpl {
 public:
  Precision precision = Precision::fp32;
  std::int64_t rows = 0, in = 0, out = 0;
  Tensor x, y, w, bias, dy, dx, dw, db;
  float dx_beta = 0;
  bool has_bias = false;

  void run_forward(const Exec& e) const {
    CB_CHECK_CUBLAS(cublasGemmEx(e.blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out), static_cast<int>(rows),
                                 static_cast<int>(in), &kOne, e.ptr(w), cuda_type(w.type), static_cast<int>(in),
                                 e.ptr(x), cuda_type(x.type), static_cast<int>(in), &kZero, e.ptr(y),
                                 cuda_type(y.type), static_cast<int>(out), gemm_compute_type(precision),
                                 CUBLAS_GEMM_DEFAULT));
    if (has_bias) kernels::add_bias(e.ptr(y), y.type, e.ptr(bias), bias.type, rows, out, e.stream);
  }
  void run_backward_data(const Exec& e) const {
    CB_CHECK_CUBLAS(cublasGemmEx(e.blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(in), static_cast<int>(rows),
                                 static_cast<int>(out), &kOne, e.ptr(w), cuda_type(w.type), static_cast<int>(in),
                                 e.ptr(dy), cuda_type(dy.type), static_cast<int>(out), &dx_beta, e.ptr(dx),
                                 cuda_type(dx.type), static_cast<int>(in), gemm_compute_type(precision),
                                 CUBLAS_GEMM_DEFAULT));
  }
  void run_backward_weights(const Exec& e) const {
    CB_CHECK_CUBLAS(cublasGemmEx(e.blas, CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(in), static_cast<int>(out),
                                 static_cast<int>(rows), &kOne, e.ptr(x), cuda_type(x.type), static_cast<int>(in),
                                 e.ptr(dy), cuda_type(dy.type), static_cast<int>(out), &kZero, e.ptr(dw),
                                 cuda_type(dw.type), static_cast<int>(in), gemm_compute_type(precision),
                                 CUBLAS_GEMM_DEFAULT));
    if (has_bias) kernels::bias_gradient(e.ptr(dy), dy.type, e.ptr(db), db.type, rows, out, e.stream);
  }
};

}  // namespace

void forward_fully_connected(Builder& b, int index) {
  const Layer& layer = b.layer(index);
  const int from = b.input_of(index);
  auto* fc = b.make_impl<FullyConnected>(index);
  fc->precision = b.cell.precision;
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
