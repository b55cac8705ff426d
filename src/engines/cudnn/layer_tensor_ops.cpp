// Element-wise add (residual connections) and channel concatenation
// (inception modules): cuDNN tensor ops, or no op at all where the data
// can stay where it is.
//
// Add: like torchvision's `out += identity`, a += b in place
// (cudnnAddTensor) when nothing else reads a, else y = a + b
// (cudnnOpTensor). Backward: both inputs receive the output gradient. The
// first input takes it over as its own buffer; so does the second (a
// residual block's input, whose gradient its first convolution later adds
// to) when the first input is a batch-norm output whose backward only reads
// that gradient and runs before any other contribution to the second's:
// then no copy is made at all. Otherwise the second gets a copy.
//
// An add followed by an in-place relu applies it in the same pass
// (kernels::add_relu), as a ResNet block ends, where its three tensors share
// one packed layout; the relu's own op is then empty. In a training
// bn_add_relu group it has no op at all (layer_batch_norm.cpp), nor in an
// inference conv_bn_add_relu group (the convolution adds the residual:
// layer_convolution.cpp).
//
// Concat: in NCHW the producers of the branches wrote straight into their
// channel slice of the output (the builder's placement), and the backward
// hands each branch its slice of the output gradient as a strided view; in
// NHWC (where a channel slice is not a layout cuDNN's tensor-core kernels
// take) each branch is copied in and out, as PyTorch's cat does: a slice of
// packed NHWC is a row of C_in channels per pixel, C apart, so the copy is
// one cudaMemcpy2DAsync and a gradient accumulation one vectorised row kernel
// (TensorCopy through kernels::copy_rows, kernels_rows.hpp; cudnnTransformTensor
// and its strided fallback took ~3x the bandwidth floor).
#include "crossbench/error.hpp"
#include "engines/cudnn/graph.hpp"
#include "engines/cudnn/kernels_elementwise.hpp"
#include "engines/cudnn/kernels_epilogue.hpp"

namespace crossbench::cudnn {
namespace {

class Add final : public LayerImpl {
 public:
  Tensor a, b, y;
  bool in_place = false;
  bool kernel = false;     // this cuDNN refused the data type: plain strided kernels instead
  bool fuse_relu = false;  // the in-place relu after it runs here (kernels::add_relu): one pass, not two
  TensorDesc ad, bd, yd;
  OpTensorDesc op;
  void setup(SetupContext&) override {
    ad = describe_tensor(a);
    bd = describe_tensor(b);
    yd = describe_tensor(y);
    op = make_add_desc();
  }
  bool relu_fused() const override { return fuse_relu; }
  void run(const Exec& e) {
    if (fuse_relu) {
      kernels::add_relu(e.ptr(a), e.ptr(b), e.ptr(y), y.type, y.elements(), e.stream);
      return;
    }
    if (!kernel) {
      const cudnnStatus_t status =
          in_place ? cudnnAddTensor(e.dnn, &kOne, bd, e.ptr(b), &kOne, ad, e.ptr(a))
                   : cudnnOpTensor(e.dnn, op, &kOne, ad, e.ptr(a), &kOne, bd, e.ptr(b), &kZero, yd, e.ptr(y));
      if (status == CUDNN_STATUS_SUCCESS) return;
      const bool refused = status / 1000 == CUDNN_STATUS_NOT_SUPPORTED / 1000 ||
                           status / 1000 == CUDNN_STATUS_BAD_PARAM / 1000;
      if (!(e.probing && refused)) CB_CHECK_CUDNN(status);
      kernel = true;
    }
    if (!in_place) kernels::strided_add(e.ptr(a), a.strides, e.ptr(y), y.strides, y.dims, y.type, 0.0f, e.stream);
    kernels::strided_add(e.ptr(b), b.strides, e.ptr(y), y.strides, y.dims, y.type, 1.0f, e.stream);
  }
  std::string decisions() const override {
    if (fuse_relu) return name + ":add+relu=kernel";
    return kernel ? name + ":add=kernel" : std::string();
  }
  std::string name;
};

// Whether both inputs of an add may alias its output gradient (see the header comment).
bool second_may_alias(Builder& b, int index) {
  const int first = b.input_of(index, 0), second = b.input_of(index, 1);
  if (first == second || b.layer(first).kind != LayerKind::batch_norm || b.state(first).consumers != 1) return false;
  if (b.state(second).contributions != 0) return false;
  // `second`'s own backward must not write over the gradient before `first`'s backward read it.
  const LayerKind second_kind = b.layer(second).kind;
  const bool second_only_reads = second_kind == LayerKind::batch_norm || second_kind == LayerKind::convolution ||
                                 second_kind == LayerKind::fully_connected;
  if (second > first && !second_only_reads) return false;
  const int count = static_cast<int>(b.network.layers().size());
  for (int consumer = 0; consumer < count; ++consumer) {
    if (consumer == index) continue;
    for (int from : b.layer(consumer).inputs)
      if (from == second && consumer > first) return false;  // would add into the gradient before `first` read it
  }
  return true;
}

}  // namespace

void forward_add(Builder& b, int index) {
  if (const kit::FusedGroup* g = batch_norm_group(b, index)) {
    // bn_add_relu: the group's op (at its relu) writes relu(bn + residual) over the batch-norm's output.
    LayerState& s = b.state(index);
    const LayerState& bn = b.state(g->batch_norm);
    s.out = bn.out;
    s.exclusive = bn.exclusive;
    s.value_needed = true;  // the group's backward reads the relu's output here (its mask)
    return;
  }
  if (const int conv = b.state(index).residual_into; conv >= 0) {
    // conv_bn_add_relu (inference): the convolution's op adds the residual (and applies the relu after it).
    LayerState& s = b.state(index);
    const LayerState& c = b.state(conv);
    s.out = c.out;
    s.exclusive = c.exclusive;
    s.impl = c.impl;  // the relu's op asks it whether it applied the relu (always)
    return;
  }
  const int first = b.input_of(index, 0), second = b.input_of(index, 1);
  auto* add = b.make_impl<Add>(index);
  add->name = b.layer(index).name;
  add->a = b.state(first).out;
  add->b = b.state(second).out;
  LayerState& s = b.state(index);
  add->in_place = first != second && b.can_overwrite(first);
  s.in_place = add->in_place;
  add->y = add->in_place ? add->a : b.new_output(index, b.type);
  // One pass for add and relu where all three tensors share one packed layout.
  const auto same_packed = [&](const Tensor& t) {
    return t.is_packed() && t.strides == add->y.strides && t.type == add->y.type;
  };
  add->fuse_relu = s.fusable_relu >= 0 && same_packed(add->a) && same_packed(add->b) && same_packed(add->y);
  s.out = add->y;
  s.exclusive = true;
  b.push(index, Stage::forward, b.label(index, "forward"), {add->a, add->b, add->y},
         [add](const Exec& e) { add->run(e); });
}

void backward_add(Builder& b, int index) {
  if (batch_norm_group(b, index) != nullptr) return;  // bn_add_relu: its backward ran at its relu
  const int first = b.input_of(index, 0), second = b.input_of(index, 1);
  const Tensor dy = b.gradient(index);
  b.contribute(index, second, dy, second_may_alias(b, index), b.label(index, "backward (second input)"));
  b.contribute(index, first, dy, true, b.label(index, "backward (first input)"));
}

void forward_concat(Builder& b, int index) {
  const Layer& layer = b.layer(index);
  LayerState& s = b.state(index);
  s.out = s.placement ? *s.placement : b.new_tensor(b.dims_of(index), b.type, b.label(index, "output"));
  s.placement.reset();
  s.exclusive = true;
  std::int64_t first_channel = 0;
  for (int from : layer.inputs) {
    const Tensor in = b.state(from).out;
    const Tensor slice = s.out.channel_slice(first_channel, in.c());
    first_channel += in.c();
    if (in.buffer == slice.buffer && in.offset == slice.offset) continue;  // written in place by its producer
    auto copy = std::make_shared<TensorCopy>(in, slice, 0.0f);
    b.push(index, Stage::forward, b.label(index, "forward copy"), {in, slice}, [copy](const Exec& e) { copy->run(e); });
  }
}

void backward_concat(Builder& b, int index) {
  const Layer& layer = b.layer(index);
  const Tensor dy = b.gradient(index);
  std::int64_t first_channel = 0;
  for (int from : layer.inputs) {
    const std::int64_t channels = b.layer(from).output.channels;
    const Tensor slice = dy.channel_slice(first_channel, channels);
    first_channel += channels;
    const bool alias = !b.nhwc && b.state(from).consumers == 1;
    b.contribute(index, from, slice, alias, b.label(index, "backward slice"));
  }
}

}  // namespace crossbench::cudnn
