// Element-wise add (residual connections), oneDNN binary add. Like
// torchvision's `out += identity` it writes over its first input when nothing
// else reads it. Backward: the output gradient is the gradient of both inputs;
// the first input may take it over as its own buffer (no copy), the second
// gets a copy (or an accumulation when it has other consumers).
// add_relu (kit/fusion.hpp): the add applies the ReLU as an eltwise post-op;
// the ReLU's backward has already turned the gradient into this output's.
// conv_bn_add_relu (inference): no op; the convolution's sum post-op adds
// (layer_convolution.cpp).
#include "crossbench/error.hpp"
#include "engines/onednn/graph.hpp"

namespace crossbench::onednn {

void forward_add(Builder& ctx, int index) {
  const int a = ctx.input_of(index, 0), b = ctx.input_of(index, 1);
  if (const kit::FusedGroup* group = ctx.fused(index); group != nullptr && group->kind == kit::FusedKind::conv_bn_add_relu) {
    LayerState& s = ctx.state(index);  // the convolution's sum post-op added the residual: no op
    s.out = ctx.state(group->batch_norm).out;
    s.in_place = true;
    s.exclusive = true;
    return;
  }
  const Tensor first = ctx.state(a).out;
  const Tensor second = ctx.ensure(ctx.state(b).out, first.desc, ctx.label(index, "second input"));
  LayerState& s = ctx.state(index);
  const bool relu = ctx.fused(index, kit::FusedKind::add_relu);
  // oneDNN 2.6.3's binary (jit:uni) with an eltwise post-op computes wrong values in place (dst = src0)
  // when the blocked layout pads the channels (5 channels in nChw16c: tests/engines/onednn_layers_test.cpp,
  // OnednnFusion.AddRelu); out of place, and in place without padding, it is right.
  s.in_place = a != b && ctx.can_overwrite(a) && (!relu || !has_padding(first.desc));
  const dnnl::binary::desc desc(dnnl::algorithm::binary_add, first.desc, second.desc, first.desc);
  const auto pd = CB_CHECK_DNNL(dnnl::binary::primitive_desc(desc, relu ? ctx.attr_with_relu() : ctx.attr, ctx.graph.engine));
  s.out = s.in_place ? first : ctx.new_tensor(pd.dst_desc(), ctx.label(index, "output"));
  s.exclusive = true;
  ctx.push_primitive(ctx.label(index, relu ? "forward (+ relu post-op)" : "forward"), pd,
                     {{DNNL_ARG_SRC_0, first}, {DNNL_ARG_SRC_1, second}, {DNNL_ARG_DST, s.out}});
}

void backward_add(Builder& ctx, int index) {
  const int a = ctx.input_of(index, 0), b = ctx.input_of(index, 1);
  const Tensor dy = ctx.gradient(index);
  // Only one input may alias dy: the other's producer could otherwise write
  // over it (an in-place ReLU backward) while the first still needs it.
  ctx.contribute(a, dy, true, ctx.label(index, "backward (first input)"));
  ctx.contribute(b, dy, false, ctx.label(index, "backward (second input)"));
}

}  // namespace crossbench::onednn
