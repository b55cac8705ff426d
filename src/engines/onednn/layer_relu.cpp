// ReLU (oneDNN eltwise). Like torchvision's ReLU(inplace=True) it overwrites
// its input when nothing else reads it (Builder::can_overwrite); its
// backward then derives the mask from its output (eltwise_relu_use_dst_for_bwd,
// dst > 0 exactly where src > 0) and writes the input gradient over the output
// gradient.
#include "crossbench/error.hpp"
#include "engines/onednn/graph.hpp"

namespace crossbench::onednn {
namespace {

dnnl::algorithm algorithm_of(const LayerState& s) {
  return s.in_place ? dnnl::algorithm::eltwise_relu_use_dst_for_bwd : dnnl::algorithm::eltwise_relu;
}

}  // namespace

void forward_relu(Builder& ctx, int index) {
  const int from = ctx.input_of(index);
  const Tensor src = ctx.state(from).out;
  LayerState& s = ctx.state(index);
  s.in_place = ctx.can_overwrite(from);
  const auto prop = ctx.training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  const dnnl::eltwise_forward::desc desc(prop, algorithm_of(s), src.desc, 0.f, 0.f);
  const auto pd = CB_CHECK_DNNL(dnnl::eltwise_forward::primitive_desc(desc, ctx.attr, ctx.graph.engine));
  s.out = s.in_place ? ctx.view(src, pd.dst_desc()) : ctx.new_tensor(pd.dst_desc(), ctx.label(index, "output"));
  s.exclusive = true;
  s.value_needed = s.in_place && ctx.training;  // the backward reads the output
  ctx.push_primitive(ctx.label(index, "forward"), pd, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, s.out}});
  s.forward_pd = pd;
  s.saved = {src};
}

void backward_relu(Builder& ctx, int index) {
  const int from = ctx.input_of(index);
  if (!ctx.state(from).needs_grad) return;
  LayerState& s = ctx.state(index);
  const auto fwd = std::any_cast<dnnl::eltwise_forward::primitive_desc>(s.forward_pd);
  const Tensor& data = s.in_place ? s.out : s.saved[0];
  const dnnl::eltwise_backward::desc desc(algorithm_of(s), s.out.desc, data.desc, 0.f, 0.f);
  const auto pd = CB_CHECK_DNNL(dnnl::eltwise_backward::primitive_desc(desc, ctx.attr, ctx.graph.engine, fwd));
  const Tensor dy = ctx.ensure(ctx.gradient(index), pd.diff_dst_desc(), ctx.label(index, "output gradient"));
  const GradientSink sink =
      ctx.begin_gradient(from, pd.diff_src_desc(), ctx.label(index, "backward"), s.in_place ? &dy : nullptr);
  ctx.push_primitive(ctx.label(index, "backward"), pd,
                     {{DNNL_ARG_DIFF_DST, dy},
                      {s.in_place ? DNNL_ARG_DST : DNNL_ARG_SRC, data},
                      {DNNL_ARG_DIFF_SRC, sink.target}});
  ctx.end_gradient(sink, ctx.label(index, "backward"));
}

}  // namespace crossbench::onednn
