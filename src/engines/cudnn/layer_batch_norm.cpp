// Batch normalisation through cuDNN's *Ex batch-norm API, called as PyTorch
// calls it: spatial mode (per channel), statistics, scale, shift and
// gradients of scale and shift in fp32 for every data type; training uses
// the batch statistics and updates the running ones with PyTorch's momentum
// convention (running = (1 - m) running + m batch, unbiased variance: cuDNN's
// exponentialAverageFactor is m); check() passes factor 0 and leaves them
// as they are. NHWC training uses CUDNN_BATCHNORM_SPATIAL_PERSISTENT (PyTorch's
// choice for channels_last), else CUDNN_BATCHNORM_SPATIAL. Inference
// normalises with the running statistics of a fresh model (mean 0, variance 1);
// after a convolution that only it reads, it is folded into that convolution
// (layer_convolution.cpp) and has no op of its own.
//
// Training batch-norm in a bn_relu or bn_add_relu group of the kit's fusion
// plan (packed NHWC; graph_builder.cpp's can_lower) runs our fused kernels
// instead (kernels_batch_norm.hpp; with engine.conv_statistics its batch
// statistics may come from the convolution before it, whose search decides),
// with the same semantics: the group is
// one op forward, emitted at its relu (where every input exists: a ResNet's
// projection shortcut is built after the block's last batch-norm), and one
// op backward, emitted at the relu's backward (where its output gradient is
// final), that writes the input's and the residual's gradients and the
// gradients of gamma and beta. The batch-norm, add and relu layers then have
// no op of their own; the group's ops carry the batch-norm's name.
#include "crossbench/error.hpp"
#include "engines/cudnn/graph.hpp"
#include "engines/cudnn/kernels_batch_norm.hpp"
#include "engines/cudnn/kernels_epilogue.hpp"

namespace crossbench::cudnn {
namespace {

class BatchNorm final : public LayerImpl {
 public:
  cudnnBatchNormMode_t mode = CUDNN_BATCHNORM_SPATIAL;
  double epsilon = 1e-5, momentum = 0.1;
  bool training = false;
  bool folded = false;  // inference: folded into the convolution before it (no op of its own)
  // Training, in a bn_relu or bn_add_relu group: our fused kernels, no cuDNN call (see the header comment).
  bool fused = false;
  Tensor residual, dresidual;  // bn_add_relu: the add's other input and its gradient (invalid: none needed)
  float dresidual_beta = 0;
  bool mask_from_y = false;  // the backward reads the relu's mask from y (bn_add_relu) or recomputes it from x
  kernels::BatchNormGrid grid;
  Tensor x, y, gamma, beta, running_mean, running_variance, saved_mean, saved_inverse_std, reserve;
  // The fused forward's ticket counters (kernels_batch_norm.hpp): zeroed once at initialisation,
  // persistent, and left 0 by every launch (so graph replays need no memset).
  Tensor tickets;
  std::int64_t tickets_per_pass = 0;
  // engine.conv_statistics: the batch statistics as the convolution before it writes them (null: none asked
  // for); used where `written` (its search chose a statistics plan), else our statistics pass.
  std::shared_ptr<ConvolutionStatistics> statistics;
  Tensor dy, dx, dgamma, dbeta;
  float dx_beta = 0;
  bool data_gradient = false;
  MemoryPool* pool = nullptr;
  TensorDesc xd, yd, bnd, dyd, dxd;
  std::size_t forward_workspace = 0, backward_workspace = 0, reserve_bytes = 0;

  void setup(SetupContext& ctx) override {
    if (folded) return;
    if (fused) {
      int device = 0, multiprocessors = 0;
      CB_CHECK_CUDA(cudaGetDevice(&device));
      CB_CHECK_CUDA(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
      grid = kernels::batch_norm_grid(x.n() * x.h() * x.w(), x.c(), x.type, multiprocessors);
      if (grid.tiles > tickets_per_pass)
        throw Error("fused batch-norm: " + std::to_string(grid.tiles) + " channel tiles, " +
                    std::to_string(tickets_per_pass) + " tickets");
      ctx.need_workspace(grid.workspace_bytes());
      return;
    }
    xd = describe_tensor(x);
    yd = describe_tensor(y);
    bnd = make_tensor_desc();
    CB_CHECK_CUDNN(cudnnDeriveBNTensorDescriptor(bnd, xd, mode));
    if (!training) return;
    dyd = describe_tensor(dy);
    dxd = describe_tensor(dx.valid() ? dx : x);
    CB_CHECK_CUDNN(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
        ctx.dnn, mode, CUDNN_BATCHNORM_OPS_BN, xd, nullptr, yd, bnd, nullptr, &forward_workspace));
    CB_CHECK_CUDNN(cudnnGetBatchNormalizationBackwardExWorkspaceSize(ctx.dnn, mode, CUDNN_BATCHNORM_OPS_BN, xd, yd,
                                                                     dyd, nullptr, dxd, bnd, nullptr,
                                                                     &backward_workspace));
    CB_CHECK_CUDNN(cudnnGetBatchNormalizationTrainingExReserveSpaceSize(ctx.dnn, mode, CUDNN_BATCHNORM_OPS_BN,
                                                                        nullptr, xd, &reserve_bytes));
    ctx.need_workspace(std::max(forward_workspace, backward_workspace));
    pool->grow(reserve.buffer, static_cast<std::int64_t>(reserve_bytes));  // known only now
  }

  void run_forward(const Exec& e) {
    if (!training) {
      CB_CHECK_CUDNN(cudnnBatchNormalizationForwardInference(
          e.dnn, mode, &kOne, &kZero, xd, e.ptr(x), yd, e.ptr(y), bnd, e.ptr(gamma), e.ptr(beta),
          e.ptr(running_mean), e.ptr(running_variance), epsilon));
      return;
    }
    const double factor = e.check ? 0.0 : momentum;
    CB_CHECK_CUDNN(cudnnBatchNormalizationForwardTrainingEx(
        e.dnn, mode, CUDNN_BATCHNORM_OPS_BN, &kOne, &kZero, xd, e.ptr(x), nullptr, nullptr, yd, e.ptr(y), bnd,
        e.ptr(gamma), e.ptr(beta), factor, e.ptr(running_mean), e.ptr(running_variance), epsilon, e.ptr(saved_mean),
        e.ptr(saved_inverse_std), nullptr, e.workspace, e.workspace_bytes, reserve_bytes ? e.ptr(reserve) : nullptr,
        reserve_bytes));
  }

  [[nodiscard]] void* fused_workspace(const Exec& e) const {
    if (e.workspace_bytes < grid.workspace_bytes())
      throw Error("fused batch-norm: the session's workspace (" + std::to_string(e.workspace_bytes) +
                  " bytes) is smaller than the " + std::to_string(grid.workspace_bytes()) + " bytes it asked for");
    return e.workspace;
  }

  void run_fused_forward(const Exec& e) {
    kernels::BatchNormReluForward a;
    a.x = e.ptr(x);
    a.residual = residual.valid() ? e.ptr(residual) : nullptr;
    a.y = e.ptr(y);
    a.type = x.type;
    a.gamma = e.ptr_as<float>(gamma);
    a.beta = e.ptr_as<float>(beta);
    a.running_mean = e.ptr_as<float>(running_mean);
    a.running_variance = e.ptr_as<float>(running_variance);
    a.saved_mean = e.ptr_as<float>(saved_mean);
    a.saved_inverse_std = e.ptr_as<float>(saved_inverse_std);
    a.factor = e.check ? 0.0f : static_cast<float>(momentum);
    a.epsilon = static_cast<float>(epsilon);
    a.tickets = static_cast<unsigned int*>(e.ptr(tickets));
    if (statistics && statistics->written) {
      a.sum = e.ptr_as<float>(statistics->sum);
      a.sum_of_squares = e.ptr_as<float>(statistics->sum_of_squares);
    }
    kernels::batch_norm_relu_forward(a, grid, fused_workspace(e), e.stream);
  }

  void run_fused_backward(const Exec& e) {
    kernels::BatchNormReluBackward a;
    a.x = e.ptr(x);
    a.y = mask_from_y ? e.ptr(y) : nullptr;
    a.dy = e.ptr(dy);
    a.type = x.type;
    a.gamma = e.ptr_as<float>(gamma);
    a.beta = e.ptr_as<float>(beta);
    a.saved_mean = e.ptr_as<float>(saved_mean);
    a.saved_inverse_std = e.ptr_as<float>(saved_inverse_std);
    a.dgamma = e.ptr_as<float>(dgamma);
    a.dbeta = e.ptr_as<float>(dbeta);
    a.dresidual = dresidual.valid() ? e.ptr(dresidual) : nullptr;
    a.dresidual_beta = dresidual_beta;
    a.dx = dx.valid() ? e.ptr(dx) : nullptr;
    a.dx_beta = dx_beta;
    kernels::batch_norm_relu_backward(a, grid, fused_workspace(e), e.stream);
  }

  void run_backward(const Exec& e) {
    CB_CHECK_CUDNN(cudnnBatchNormalizationBackwardEx(
        e.dnn, mode, CUDNN_BATCHNORM_OPS_BN, &kOne, &dx_beta, &kOne, &kZero, xd, e.ptr(x), nullptr, nullptr, dyd,
        e.ptr(dy), nullptr, nullptr, dxd, e.ptr(dx), bnd, e.ptr(gamma), nullptr, e.ptr(dgamma), e.ptr(dbeta),
        epsilon, e.ptr(saved_mean), e.ptr(saved_inverse_std), nullptr, e.workspace, e.workspace_bytes,
        reserve_bytes ? e.ptr(reserve) : nullptr, reserve_bytes));
  }
};

// The gradients of gamma and beta of batch-norm `index`.
void find_parameter_gradients(Builder& b, int index, BatchNorm& bn) {
  for (const Parameter& p : b.parameters)
    if (p.layer == index) (p.slot == synthetic::Slot::bn_gamma ? bn.dgamma : bn.dbeta) = p.gradient;
}

// Whether `t` has the batch-norm input's packed layout and type (what the fused kernels index by).
bool same_layout(const Tensor& t, const Tensor& x) {
  return t.is_packed() && t.strides == x.strides && t.type == x.type && t.dims == x.dims;
}

}  // namespace

void forward_batch_norm(Builder& b, int index) {
  const Layer& layer = b.layer(index);
  const int from = b.input_of(index);
  auto* bn = b.make_impl<BatchNorm>(index);
  bn->training = b.training;
  bn->pool = &b.pool;
  bn->epsilon = layer.params.bn_epsilon;
  bn->momentum = layer.params.bn_momentum;
  bn->mode = b.training && b.nhwc ? CUDNN_BATCHNORM_SPATIAL_PERSISTENT : CUDNN_BATCHNORM_SPATIAL;
  bn->x = b.state(from).out;
  const std::int64_t channels = layer.output.channels;
  const std::array<std::int64_t, 4> per_channel{1, channels, 1, 1};
  bn->gamma = b.parameter(b.add_parameter(index, synthetic::Slot::bn_gamma, DType::f32, per_channel, false,
                                          Parameter::Init::ones)).value;
  bn->beta = b.parameter(b.add_parameter(index, synthetic::Slot::bn_beta, DType::f32, per_channel, false,
                                         Parameter::Init::zeros)).value;
  bn->running_mean = b.new_tensor(per_channel, DType::f32, b.label(index, "running mean"), true);
  bn->running_variance = b.new_tensor(per_channel, DType::f32, b.label(index, "running variance"), true);
  b.initialise(bn->running_mean, 0.0f);
  b.initialise(bn->running_variance, 1.0f);
  if (const int conv = b.state(index).folded_into; conv >= 0) {
    // Inference, folded into the convolution before it (graph.hpp): no op of
    // its own; its output is the convolution's, and a relu after it fuses there.
    bn->folded = true;
    LayerState& s = b.state(index);
    const LayerState& c = b.state(conv);
    s.out = c.out;
    s.exclusive = c.exclusive;
    s.impl = c.impl;
    const kernels::BatchNormStatistics statistics{nullptr, nullptr, nullptr, nullptr, bn->epsilon};
    const std::int64_t out_channels = c.fold_weight.dims[0];
    const std::int64_t per_output = c.fold_weight.elements() / out_channels;
    b.after_initialise.push_back([bn, statistics, out_channels, per_output, weight = c.fold_weight,
                                  conv_bias = c.fold_conv_bias, shift = c.fold_shift](const Exec& e) {
      kernels::BatchNormStatistics bs = statistics;
      bs.gamma = e.ptr_as<float>(bn->gamma);
      bs.beta = e.ptr_as<float>(bn->beta);
      bs.mean = e.ptr_as<float>(bn->running_mean);
      bs.variance = e.ptr_as<float>(bn->running_variance);
      kernels::fold_batch_norm(e.ptr(weight), weight.type, out_channels, per_output,
                               conv_bias.valid() ? e.ptr(conv_bias) : nullptr, e.ptr(shift), bs, e.stream);
    });
    return;
  }
  if (batch_norm_group(b, index) != nullptr) {
    // Fused with its relu (and add): the group's op is emitted at the relu
    // (forward_batch_norm_relu) and writes the relu's output into y.
    bn->fused = true;
    bn->saved_mean = b.new_tensor(per_channel, DType::f32, b.label(index, "batch mean"));
    bn->saved_inverse_std = b.new_tensor(per_channel, DType::f32, b.label(index, "batch inverse std"));
    // 32-bit counters in an fp32 tensor, for the forward; the session's shared workspace cannot hold
    // them (other ops overwrite it between ours). Zeroed once after the initialisation, not a b.initialise
    // constant: they are no step state (every launch leaves them 0), and check() need not save them.
    bn->tickets_per_pass = kernels::batch_norm_tickets(channels, bn->x.type);
    bn->tickets = b.new_tensor({1, bn->tickets_per_pass, 1, 1}, DType::f32, b.label(index, "tickets"), true);
    b.after_initialise.push_back([bn](const Exec& e) {
      CB_CHECK_CUDA(cudaMemsetAsync(e.ptr(bn->tickets), 0, static_cast<std::size_t>(bn->tickets.bytes()), e.stream));
    });
    b.state(from).value_needed = true;  // the backward reads x
    if (const LayerState& producer = b.state(from); producer.statistics && producer.statistics_for == index)
      bn->statistics = producer.statistics;  // engine.conv_statistics: graph_builder.cpp's statistics_source
    LayerState& s = b.state(index);
    s.out = bn->y = b.new_output(index, b.type);
    s.value_needed = true;  // bn_add_relu's backward reads y (the relu's mask)
    if (!bn->x.channels_last || !bn->x.is_packed() || !bn->y.is_packed())
      throw Error("cuDNN engine: a fused batch-norm needs packed NHWC tensors, not " + shape_text(bn->x));
    return;
  }
  std::vector<Tensor> touched{bn->x, bn->gamma, bn->beta, bn->running_mean, bn->running_variance};
  if (b.training) {
    bn->saved_mean = b.new_tensor(per_channel, DType::f32, b.label(index, "batch mean"));
    bn->saved_inverse_std = b.new_tensor(per_channel, DType::f32, b.label(index, "batch inverse std"));
    bn->reserve = b.new_tensor({1, 1, 1, 1}, DType::u8, b.label(index, "reserve space"));
    touched.insert(touched.end(), {bn->saved_mean, bn->saved_inverse_std, bn->reserve});
    b.state(from).value_needed = true;  // the backward reads x
  }
  b.state(index).out = bn->y = b.new_output(index, b.type);
  touched.push_back(bn->y);
  b.push(index, Stage::forward, b.label(index, "forward"), touched, [bn](const Exec& e) { bn->run_forward(e); });
}

void backward_batch_norm(Builder& b, int index) {
  auto* bn = b.impl_of<BatchNorm>(index);
  if (bn->fused) return;  // the group's backward ran at its relu (backward_batch_norm_relu)
  const int from = b.input_of(index);
  bn->dy = b.gradient(index);
  find_parameter_gradients(b, index, *bn);
  // cuDNN always computes the data gradient; without a consumer it goes to a scratch tensor.
  if (b.state(from).needs_grad) {
    const Builder::Sink sink = b.gradient_sink(from);
    bn->dx = sink.target;
    bn->dx_beta = sink.beta;
  } else {
    bn->dx = b.new_tensor(bn->x.dims, b.type, b.label(index, "unused input gradient"));
  }
  b.push(index, Stage::backward, b.label(index, "backward"),
         {bn->x, bn->dy, bn->dx, bn->gamma, bn->dgamma, bn->dbeta, bn->saved_mean, bn->saved_inverse_std, bn->reserve},
         [bn](const Exec& e) { bn->run_backward(e); });
}


void forward_batch_norm_relu(Builder& b, const kit::FusedGroup& g) {
  auto* bn = b.impl_of<BatchNorm>(g.batch_norm);
  std::vector<Tensor> touched{bn->x,           bn->y,          bn->gamma,
                              bn->beta,        bn->running_mean, bn->running_variance,
                              bn->saved_mean,  bn->saved_inverse_std, bn->tickets};
  if (bn->statistics) touched.insert(touched.end(), {bn->statistics->sum, bn->statistics->sum_of_squares});
  if (g.residual >= 0) {
    bn->residual = b.state(g.residual).out;
    if (!same_layout(bn->residual, bn->x))
      throw Error("cuDNN engine: the residual " + shape_text(bn->residual) + " of a fused batch-norm + add + relu " +
                  "is not laid out as its batch-norm's input " + shape_text(bn->x));
    touched.push_back(bn->residual);
  }
  const char* what = g.residual >= 0 ? "fused forward: batch-norm + add + relu" : "fused forward: batch-norm + relu";
  b.push(g.batch_norm, Stage::forward, b.label(g.batch_norm, what), touched,
         [bn](const Exec& e) { bn->run_fused_forward(e); });
}

void backward_batch_norm_relu(Builder& b, const kit::FusedGroup& g) {
  auto* bn = b.impl_of<BatchNorm>(g.batch_norm);
  bn->dy = b.gradient(g.relu);
  if (!same_layout(bn->dy, bn->x))
    throw Error("cuDNN engine: the output gradient " + shape_text(bn->dy) + " of a fused batch-norm + relu " +
                "is not laid out as its input " + shape_text(bn->x));
  find_parameter_gradients(b, g.batch_norm, *bn);
  bn->mask_from_y = g.residual >= 0;  // bn_relu recomputes the mask from x: one tensor less to read, twice
  std::vector<Tensor> touched{bn->x,     bn->dy,         bn->gamma,      bn->beta,
                              bn->dgamma, bn->dbeta,     bn->saved_mean, bn->saved_inverse_std};
  if (bn->mask_from_y) touched.push_back(bn->y);
  // The sinks in the unfused order: the add's contribution to the residual, then the batch-norm's to its input.
  // A first contribution to the residual's gradient is written over dy (each element read, then written,
  // by one thread; nothing reads this relu's output gradient after the group), as the unfused add aliases it.
  if (g.residual >= 0 && b.state(g.residual).needs_grad) {
    const Builder::Sink sink = b.gradient_sink(g.residual, &bn->dy);
    bn->dresidual = sink.target;
    bn->dresidual_beta = sink.beta;
    touched.push_back(bn->dresidual);
  }
  if (const int from = b.input_of(g.batch_norm); b.state(from).needs_grad) {
    const Builder::Sink sink = b.gradient_sink(from);
    bn->dx = sink.target;
    bn->dx_beta = sink.beta;
    touched.push_back(bn->dx);
  }
  const char* what = g.residual >= 0 ? "fused backward: batch-norm + add + relu" : "fused backward: batch-norm + relu";
  b.push(g.batch_norm, Stage::backward, b.label(g.batch_norm, what), touched,
         [bn](const Exec& e) { bn->run_fused_backward(e); });
}

}  // namespace crossbench::cudnn
