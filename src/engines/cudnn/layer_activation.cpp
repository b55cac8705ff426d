// ReLU (our kernels over packed tensors, cudnnActivationForward/Backward
// over strided ones) and dropout.
//
// ReLU runs in place when nothing else reads its input (decided in the
// builder's pre-pass), like torchvision's ReLU(inplace=True); after a
// convolution it may be fused into the convolution's call, and its op then
// does nothing; after a training batch-norm (and a residual add) it may be
// fused with them (layer_batch_norm.cpp), and it has no op of its own; before
// a max pool (conv_bias_relu_pool, training) its backward is the pool's
// (layer_pooling.cpp) and has no op either. Its backward needs only the
// output: y > 0 exactly where x > 0, so y is passed as cuDNN's x too, and the
// input gradient is written over the output gradient when it is the first
// contribution.
//
// Dropout uses crossbench's deterministic mask (synthetic.hpp's
// dropout_keep, ported to a CUDA kernel with the same hash) rather than
// cudnnDropout, so that cudnn and onednn compute on identical masks; the mask
// is regenerated every step from the step number held in device memory (the
// bookkeeping op advances it), so a captured CUDA graph draws a fresh mask
// each replay, as real frameworks do. check() uses step 0.
#include <initializer_list>
#include <string>

#include "crossbench/error.hpp"
#include "engines/cudnn/graph.hpp"
#include "engines/cudnn/kernels_elementwise.hpp"
#include "engines/cudnn/kernels_epilogue.hpp"

namespace crossbench::cudnn {
namespace {

// Our kernels (kernels_epilogue.hpp) where every tensor is packed in one
// layout, the usual case; cudnnActivation* for strided ones (a relu reading
// a concat slice), named in the decisions.
bool same_packed_layout(std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = *tensors.begin();
  for (const Tensor* t : tensors)
    if (t->valid() && (!t->is_packed() || t->strides != first->strides || t->type != first->type)) return false;
  return true;
}

class Relu final : public LayerImpl {
 public:
  std::string name;
  Tensor x, y, dy, dx;
  float dx_beta = 0;
  LayerImpl* producer = nullptr;  // the convolution (or add) that may apply this relu itself
  bool kernel_forward = false, kernel_backward = false;
  TensorDesc xd, yd, dyd, dxd;

  void setup(SetupContext&) override {
    kernel_forward = same_packed_layout({&x, &y});
    kernel_backward = dy.valid() && same_packed_layout({&y, &dy, &dx});
    xd = describe_tensor(x);
    yd = describe_tensor(y);
    if (dy.valid()) dyd = describe_tensor(dy);
    if (dx.valid()) dxd = describe_tensor(dx);
  }
  std::string decisions() const override {
    const bool backward = dy.valid();
    if (kernel_forward && (!backward || kernel_backward)) return {};  // the session's relu=kernels says it
    return name + ":relu=cudnnActivation(strided)";
  }
  void run_forward(const Exec& e) {
    if (producer != nullptr && producer->relu_fused()) return;
    if (kernel_forward) {
      kernels::relu(e.ptr(x), e.ptr(y), x.type, x.elements(), e.stream);
      return;
    }
    CB_CHECK_CUDNN(cudnnActivationForward(e.dnn, relu_descriptor(), &kOne, xd, e.ptr(x), &kZero, yd, e.ptr(y)));
  }
  void run_backward(const Exec& e) {
    if (kernel_backward) {
      kernels::relu_backward(e.ptr(y), e.ptr(dy), e.ptr(dx), y.type, y.elements(), dx_beta, e.stream);
      return;
    }
    CB_CHECK_CUDNN(cudnnActivationBackward(e.dnn, relu_descriptor(), &kOne, yd, e.ptr(y), dyd, e.ptr(dy), yd,
                                           e.ptr(y), &dx_beta, dxd, e.ptr(dx)));
  }
};

class Dropout final : public LayerImpl {
 public:
  Tensor x, y, mask, step, dy, dx;
  std::array<std::int64_t, 4> logical{};  // canonical NCHW dims that index the mask (Builder::logical_dims)
  double rate = 0.5;
  float dx_beta = 0;
  std::uint64_t seed = 0, mask_tensor = 0;
  std::uint64_t first_index = 0;  // canonical index of this rank's first mask element in the global batch
};

}  // namespace

void forward_relu(Builder& b, int index) {
  const int from = b.input_of(index);
  LayerState& in = b.state(from);
  LayerState& s = b.state(index);
  if (const kit::FusedGroup* g = batch_norm_group(b, index)) {
    // In place (can_lower): the group's one op writes this relu's output into the batch-norm's.
    s.out = in.out;
    s.exclusive = in.exclusive;
    s.value_needed = true;  // the next layers' backward reads it (and bn_add_relu's backward, as the mask)
    forward_batch_norm_relu(b, *g);
    return;
  }
  auto* r = b.make_impl<Relu>(index);
  r->name = b.layer(index).name;
  r->x = in.out;
  if (s.in_place) {
    r->y = in.out;
    s.exclusive = in.exclusive;
    if (in.fusable_relu == index) r->producer = in.impl;
  } else {
    r->y = b.new_output(index, b.type);
  }
  s.out = r->y;
  // The backward reads y, unless the max pool's backward does the relu's (conv_bias_relu_pool).
  s.value_needed = b.training && relu_pool_group(b, index) == nullptr;
  b.push(index, Stage::forward, b.label(index, "forward"), {r->x, r->y}, [r](const Exec& e) { r->run_forward(e); });
}

void backward_relu(Builder& b, int index) {
  if (const kit::FusedGroup* g = batch_norm_group(b, index)) {
    backward_batch_norm_relu(b, *g);  // the relu's output gradient is final here
    return;
  }
  if (relu_pool_group(b, index) != nullptr) return;  // the max pool's backward wrote the relu's input gradient
  const int from = b.input_of(index);
  if (!b.state(from).needs_grad) return;
  auto* r = b.impl_of<Relu>(index);
  r->dy = b.gradient(index);
  const Builder::Sink sink = b.gradient_sink(from, &r->dy);
  r->dx = sink.target;
  r->dx_beta = sink.beta;
  b.push(index, Stage::backward, b.label(index, "backward"), {r->y, r->dy, r->dx},
         [r](const Exec& e) { r->run_backward(e); });
}

void forward_dropout(Builder& b, int index) {
  const int from = b.input_of(index);
  LayerState& in = b.state(from);
  LayerState& s = b.state(index);
  if (!b.training) {
    s.out = in.out;  // a view: eval-mode dropout is the identity
    s.exclusive = in.exclusive && in.consumers == 1;
    s.value_needed = in.value_needed;
    return;
  }
  if (!in.out.is_packed()) throw Error("dropout of a non-packed tensor " + shape_text(in.out));
  auto* d = b.make_impl<Dropout>(index);
  d->x = in.out;
  d->y = b.new_output(index, b.type);
  d->mask = b.new_tensor(d->x.dims, DType::u8, b.label(index, "mask"));
  d->step = Tensor{{1, 1, 1, 1}, {1, 1, 1, 1}, DType::f64, false, b.step_buffer, 0};
  d->rate = b.layer(index).params.dropout_rate;
  d->seed = b.config.seed;
  d->logical = b.logical_dims(from);
  d->mask_tensor = synthetic::tensor_id(index, synthetic::Slot::dropout_mask);
  // Element i of this rank's shard is element first_index + i of the global batch (data parallel).
  d->first_index = static_cast<std::uint64_t>(b.first_image * d->logical[1] * d->logical[2] * d->logical[3]);
  s.out = d->y;
  b.push(index, Stage::forward, b.label(index, "forward"), {d->x, d->y, d->mask, d->step}, [d](const Exec& e) {
    kernels::dropout_forward(e.ptr(d->x), e.ptr(d->y), e.ptr_as<std::uint8_t>(d->mask), d->x.type, d->logical,
                             d->x.channels_last, d->seed, d->mask_tensor, e.ptr_as<const std::uint64_t>(d->step),
                             d->rate, e.stream, d->first_index);
  });
}

void backward_dropout(Builder& b, int index) {
  const int from = b.input_of(index);
  if (!b.state(from).needs_grad) return;
  auto* d = b.impl_of<Dropout>(index);
  d->dy = b.gradient(index);
  if (!d->dy.is_packed()) throw Error("dropout gradient is not packed: " + shape_text(d->dy));
  const Builder::Sink sink = b.gradient_sink(from, &d->dy);
  d->dx = sink.target;
  d->dx_beta = sink.beta;
  b.push(index, Stage::backward, b.label(index, "backward"), {d->dy, d->dx, d->mask}, [d](const Exec& e) {
    kernels::dropout_backward(e.ptr(d->dy), e.ptr(d->dx), e.ptr_as<const std::uint8_t>(d->mask), d->dy.type,
                              d->dy.elements(), d->rate, d->dx_beta, e.stream);
  });
}

}  // namespace crossbench::cudnn
