// Element-wise add (residual connections), oneDNN binary add. Like
// torchvision's `out += identity` it writes over its first input when nothing
// else reads it. Backward: the output gradient is the gradient of both inputs;
// the first input may take it over as its own buffer (no copy), the second
// gets a copy (or an accumulation when it has other consumers).
#include "crossbench/error.hpp"
#include "engines/onednn/graph.hpp"

namespace crossbench::onednn {

void forward_add(Builder& ctx, int index) {
  const int a = ctx.input_of(index, 0), b = ctx.input_of(index, 1);
  const Tensor first = ctx.state(a).out;
  const Tensor second = ctx.ensure(ctx.state(b).out, first.desc, ctx.label(index, "second input"));
  LayerState& s = ctx.state(index);
  s.in_place = a != b && ctx.can_overwrite(a);
  const dnnl::binary::desc desc(dnnl::algorithm::binary_add, first.desc, second.desc, first.desc);
  const auto pd = CB_CHECK_DNNL(dnnl::binary::primitive_desc(desc, ctx.attr, ctx.graph.engine));
  s.out = s.in_place ? first : ctx.new_tensor(pd.dst_desc(), ctx.label(index, "output"));
  s.exclusive = true;
  ctx.push_primitive(ctx.label(index, "forward"), pd,
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
