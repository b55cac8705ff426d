// Max and average pooling (cudnnPoolingForward/Backward) and local response
// normalisation across channels (cudnnLRNCrossChannelForward/Backward).
//
// Pooling: the output descriptor carries the network's output size, so ceil
// mode (Caffe's GoogLeNet) is cuDNN's "full" pooling with windows that run
// past the input, as Caffe's and MXNet's cuDNN layers use it. Average
// pooling counts padding like PyTorch's AvgPool2d (count_include_pad=True)
// when there is padding; without padding the divisor is the pixels of the
// window inside the input (PyTorch's rule for ceil-mode overflow).
//
// LRN: cuDNN's definition y = x / (k + alpha / n * sum of x^2 over n channels)^beta
// is PyTorch's LocalResponseNorm and Caffe's LRN (alpha divided by the size).
// Both backward passes read the forward's input and output.
//
// Two exceptions to "through cuDNN", both NHWC (the 16-bit layout), decided
// when the cell is built and recorded in the decisions: max pooling runs our
// own kernels (forward keeps each window's argmax, one byte per output;
// backward gathers), because cuDNN's NHWC pooling backward ran 5 to 10 times
// slower than a memory pass on an H200 (cuDNN 9.14: 3.1 ms for VGG's pool1 at
// batch 64); LRN in NHWC or bf16 runs our own kernels (kernels_lrn.hpp: a
// thread per 16-byte vector of channels in packed NHWC, a warp per pixel
// otherwise), because cuDNN's NHWC LRN is slow (1 ms forward, 3.5 ms
// backward for GoogLeNet's norm2) and its LRN refuses bf16 (CUDNN_STATUS_NOT_SUPPORTED).
//
// The kit's conv_bias_relu_pool group (training, our max pooling kernels):
// the pool's input is the relu's output, so the relu's derivative at each
// window's maximum is (maximum > 0). The forward stores the argmax byte
// kPoolNoPosition where it is not, and the backward then writes the
// convolution's output gradient (the relu's input gradient) directly; the
// relu's backward has no op, and its output is not kept for the backward.
#include "crossbench/error.hpp"
#include "engines/cudnn/graph.hpp"
#include "engines/cudnn/kernels_lrn.hpp"
#include "engines/cudnn/kernels_pooling_lrn.hpp"

namespace crossbench::cudnn {
namespace {

class Pooling final : public LayerImpl {
 public:
  std::string name;
  cudnnPoolingMode_t mode = CUDNN_POOLING_MAX;
  int kernel = 1, stride = 1, padding = 0;
  Tensor x, y, dy, dx, argmax;
  float dx_beta = 0;
  bool training = false;
  bool own_kernel = false;  // NHWC max pooling: kernels_pooling_lrn.hpp
  bool relu_mask = false;   // conv_bias_relu_pool: the relu before it folded into the backward
  TensorDesc xd, yd, dyd, dxd;
  PoolDesc pd;

  std::string decisions() const override {
    return own_kernel ? name + ":max_pool=kernel" + (relu_mask ? "+drelu" : "") : std::string();
  }

  void setup(SetupContext&) override {
    if (own_kernel) return;
    pd = make_pool_desc();
    CB_CHECK_CUDNN(cudnnSetPooling2dDescriptor(pd, mode, CUDNN_NOT_PROPAGATE_NAN, kernel, kernel, padding, padding,
                                               stride, stride));
    xd = describe_tensor(x);
    yd = describe_tensor(y);
    if (dy.valid()) dyd = describe_tensor(dy);
    if (dx.valid()) dxd = describe_tensor(dx);
  }
  void run_forward(const Exec& e) {
    if (own_kernel) {
      kernels::max_pool_nhwc_forward(e.ptr(x), e.ptr(y), argmax.valid() ? e.ptr_as<std::uint8_t>(argmax) : nullptr,
                                     x.type, x.dims, y.dims, {kernel, stride, padding}, e.stream, relu_mask);
      return;
    }
    CB_CHECK_CUDNN(cudnnPoolingForward(e.dnn, pd, &kOne, xd, e.ptr(x), &kZero, yd, e.ptr(y)));
  }
  void run_backward(const Exec& e) {
    if (own_kernel) {
      kernels::max_pool_nhwc_backward(e.ptr(dy), e.ptr_as<const std::uint8_t>(argmax), e.ptr(dx), dx.type, dx.dims,
                                      dy.dims, {kernel, stride, padding}, dx_beta, e.stream);
      return;
    }
    CB_CHECK_CUDNN(cudnnPoolingBackward(e.dnn, pd, &kOne, yd, e.ptr(y), dyd, e.ptr(dy), xd, e.ptr(x), &dx_beta, dxd,
                                        e.ptr(dx)));
  }
};

class Lrn final : public LayerImpl {
 public:
  std::string name;
  unsigned size = 5;
  double alpha = 1e-4, beta = 0.75, k = 1.0;
  Tensor x, y, dy, dx;
  float dx_beta = 0;
  bool own_kernel = false;  // NHWC or bf16: kernels_lrn.hpp
  TensorDesc xd, yd, dyd, dxd;
  LrnDesc ld;

  std::string decisions() const override { return own_kernel ? name + ":lrn=kernel" : std::string(); }
  kernels::LrnParameters parameters() const {
    return {static_cast<int>(size), static_cast<float>(alpha), static_cast<float>(beta), static_cast<float>(k)};
  }

  void setup(SetupContext&) override {
    if (own_kernel) return;
    ld = make_lrn_desc();
    CB_CHECK_CUDNN(cudnnSetLRNDescriptor(ld, size, alpha, beta, k));
    xd = describe_tensor(x);
    yd = describe_tensor(y);
    if (dy.valid()) dyd = describe_tensor(dy);
    if (dx.valid()) dxd = describe_tensor(dx);
  }
  void run_forward(const Exec& e) {
    if (own_kernel) {
      if (x.strides != y.strides) throw Error("LRN kernel: x and y must share one layout");
      kernels::lrn_forward(e.ptr(x), e.ptr(y), x.type, x.dims, x.strides, parameters(), e.stream);
      return;
    }
    CB_CHECK_CUDNN(cudnnLRNCrossChannelForward(e.dnn, ld, CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne, xd, e.ptr(x), &kZero,
                                               yd, e.ptr(y)));
  }
  void run_backward(const Exec& e) {
    if (own_kernel) {
      if (x.strides != y.strides || x.strides != dy.strides || x.strides != dx.strides)
        throw Error("LRN kernel: x, y, dy and dx must share one layout");
      kernels::lrn_backward(e.ptr(x), e.ptr(y), e.ptr(dy), e.ptr(dx), x.type, x.dims, x.strides, parameters(), dx_beta,
                            e.stream);
      return;
    }
    CB_CHECK_CUDNN(cudnnLRNCrossChannelBackward(e.dnn, ld, CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne, yd, e.ptr(y), dyd,
                                                e.ptr(dy), xd, e.ptr(x), &dx_beta, dxd, e.ptr(dx)));
  }
};

// Both families keep x and y for backward.
template <typename Impl>
Impl* forward_common(Builder& b, int index, bool backward_reads_values = true) {
  const int from = b.input_of(index);
  auto* impl = b.make_impl<Impl>(index);
  impl->name = b.layer(index).name;
  impl->x = b.state(from).out;
  impl->y = b.new_output(index, b.type);
  LayerState& s = b.state(index);
  s.out = impl->y;
  if (b.training && backward_reads_values) {
    b.state(from).value_needed = true;
    s.value_needed = true;
  }
  return impl;
}

}  // namespace

void forward_pooling(Builder& b, int index) {
  const Layer& layer = b.layer(index);
  const Tensor& in = b.state(b.input_of(index)).out;
  const bool own_kernel = layer.kind == LayerKind::max_pool && in.channels_last && in.is_packed() &&
                          kernels::pool_kernel_supported(static_cast<int>(layer.params.kernel));
  auto* p = forward_common<Pooling>(b, index, !own_kernel);
  p->own_kernel = own_kernel;
  if (own_kernel && b.training) p->argmax = b.new_tensor(p->y.dims, DType::u8, b.label(index, "argmax"));
  if (relu_pool_group(b, index) != nullptr) {
    // can_lower accepted it for our kernels: NHWC, training, the relu in place.
    if (!own_kernel || !b.training) throw Error("conv_bias_relu_pool: the max pool does not run the argmax kernels");
    p->relu_mask = true;
  }
  p->kernel = static_cast<int>(layer.params.kernel);
  p->stride = static_cast<int>(layer.params.stride);
  p->padding = static_cast<int>(layer.params.padding);
  p->training = b.training;
  if (layer.kind == LayerKind::max_pool) p->mode = CUDNN_POOLING_MAX;
  else p->mode = layer.params.padding > 0 ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                          : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  b.push(index, Stage::forward, b.label(index, "forward"), {p->x, p->y, p->argmax},
         [p](const Exec& e) { p->run_forward(e); });
}

void backward_pooling(Builder& b, int index) {
  auto* p = b.impl_of<Pooling>(index);
  // conv_bias_relu_pool: past the relu, to the convolution's output gradient (the relu's input gradient).
  const kit::FusedGroup* group = relu_pool_group(b, index);
  const int from = group != nullptr ? group->anchor() : b.input_of(index);
  if (!b.state(from).needs_grad) return;
  p->dy = b.gradient(index);
  const Builder::Sink sink = b.gradient_sink(from);
  p->dx = sink.target;
  p->dx_beta = sink.beta;
  if (p->own_kernel && !(p->dx.is_packed() && p->dy.is_packed() && p->dx.channels_last))
    throw Error("max pooling kernel: gradients must be packed NHWC");
  std::vector<Tensor> touched{p->dy, p->dx, p->argmax};
  if (!p->own_kernel) touched.insert(touched.end(), {p->x, p->y});
  b.push(index, Stage::backward, b.label(index, "backward"), touched, [p](const Exec& e) { p->run_backward(e); });
}

void forward_lrn(Builder& b, int index) {
  const Layer& layer = b.layer(index);
  auto* l = forward_common<Lrn>(b, index);
  l->own_kernel = b.nhwc || b.type == DType::bf16;
  l->size = static_cast<unsigned>(layer.params.lrn_size);
  l->alpha = layer.params.lrn_alpha;
  l->beta = layer.params.lrn_beta;
  l->k = layer.params.lrn_k;
  b.push(index, Stage::forward, b.label(index, "forward"), {l->x, l->y}, [l](const Exec& e) { l->run_forward(e); });
}

void backward_lrn(Builder& b, int index) {
  auto* l = b.impl_of<Lrn>(index);
  const int from = b.input_of(index);
  if (!b.state(from).needs_grad) return;
  l->dy = b.gradient(index);
  const Builder::Sink sink = b.gradient_sink(from);
  l->dx = sink.target;
  l->dx_beta = sink.beta;
  b.push(index, Stage::backward, b.label(index, "backward"), {l->x, l->y, l->dy, l->dx},
         [l](const Exec& e) { l->run_backward(e); });
}

}  // namespace crossbench::cudnn
