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
#include "crossbench/error.hpp"
#include "engines/cudnn/graph.hpp"
#include "engines/cudnn/kernels_epilogue.hpp"

namespace crossbench::cudnn {
namespace {

class BatchNorm final : public LayerImpl {
 public:
  cudnnBatchNormMode_t mode = CUDNN_BATCHNORM_SPATIAL;
  double epsilon = 1e-5, momentum = 0.1;
  bool training = false;
  bool folded = false;  // inference: folded into the convolution before it (no op of its own)
  Tensor x, y, gamma, beta, running_mean, running_variance, saved_mean, saved_inverse_std, reserve;
  Tensor dy, dx, dgamma, dbeta;
  float dx_beta = 0;
  bool data_gradient = false;
  MemoryPool* pool = nullptr;
  TensorDesc xd, yd, bnd, dyd, dxd;
  std::size_t forward_workspace = 0, backward_workspace = 0, reserve_bytes = 0;

  void setup(SetupContext& ctx) override {
    if (folded) return;
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

  void run_backward(const Exec& e) {
    CB_CHECK_CUDNN(cudnnBatchNormalizationBackwardEx(
        e.dnn, mode, CUDNN_BATCHNORM_OPS_BN, &kOne, &dx_beta, &kOne, &kZero, xd, e.ptr(x), nullptr, nullptr, dyd,
        e.ptr(dy), nullptr, nullptr, dxd, e.ptr(dx), bnd, e.ptr(gamma), nullptr, e.ptr(dgamma), e.ptr(dbeta),
        epsilon, e.ptr(saved_mean), e.ptr(saved_inverse_std), nullptr, e.workspace, e.workspace_bytes,
        reserve_bytes ? e.ptr(reserve) : nullptr, reserve_bytes));
  }
};

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
  const int from = b.input_of(index);
  bn->dy = b.gradient(index);
  for (const Parameter& p : b.parameters)
    if (p.layer == index) (p.slot == synthetic::Slot::bn_gamma ? bn->dgamma : bn->dbeta) = p.gradient;
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

}  // namespace crossbench::cudnn
