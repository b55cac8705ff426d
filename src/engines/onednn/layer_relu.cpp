// ReLU (oneDNN eltwise). Like torchvision's ReLU(inplace=True) it overwrites
// its input when nothing else reads it (Builder::can_overwrite); its
// backward then derives the mask from its output (eltwise_relu_use_dst_for_bwd,
// dst > 0 exactly where src > 0) and writes the input gradient over the output
// gradient.
//
// The ReLU of a fused group (kit/fusion.hpp) runs no forward op: its producer
// wrote relu(y) (a post-op, or batch-norm's fuse_norm_relu), so its output is
// the producer's tensor, as if it had run in place. Its backward is then the
// in-place one (use_dst_for_bwd on that tensor), except in bn_relu, whose
// batch-norm backward applies the ReLU's mask from its workspace.
#include "crossbench/error.hpp"
#include "engines/onednn/graph.hpp"

namespace crossbench::onednn {
namespace {

dnnl::algorithm algorithm_of(const LayerState& s) {
  return s.in_place ? dnnl::algorithm::eltwise_relu_use_dst_for_bwd : dnnl::algorithm::eltwise_relu;
}

dnnl::eltwise_forward::primitive_desc forward_pd(Builder& ctx, const LayerState& s, const md& src) {
  const auto prop = ctx.training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  const dnnl::eltwise_forward::desc desc(prop, algorithm_of(s), src, 0.f, 0.f);
  return CB_CHECK_DNNL(dnnl::eltwise_forward::primitive_desc(desc, ctx.attr, ctx.graph.engine));
}

}  // namespace

void forward_relu(Builder& ctx, int index) {
  const int from = ctx.input_of(index);
  const Tensor src = ctx.state(from).out;
  LayerState& s = ctx.state(index);
  s.exclusive = true;
  if (ctx.fused(index) != nullptr) {
    s.in_place = true;
    s.out = src;
    // Its backward reads this output, unless batch-norm's workspace holds the mask.
    s.value_needed = ctx.training && !ctx.fused(index, kit::FusedKind::bn_relu);
    return;
  }
  s.in_place = ctx.can_overwrite(from);
  const auto pd = forward_pd(ctx, s, src.desc);
  s.out = s.in_place ? ctx.view(src, pd.dst_desc()) : ctx.new_tensor(pd.dst_desc(), ctx.label(index, "output"));
  s.value_needed = s.in_place && ctx.training;  // the backward reads the output
  ctx.push_primitive(ctx.label(index, "forward"), pd, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, s.out}});
  s.forward_pd = pd;
  s.saved = {src};
}

void backward_relu(Builder& ctx, int index) {
  const int from = ctx.input_of(index);
  if (!ctx.state(from).needs_grad) return;
  if (ctx.fused(index, kit::FusedKind::bn_relu)) return;  // backward_batch_norm takes this ReLU's output gradient
  LayerState& s = ctx.state(index);
  // A fused ReLU built no forward primitive: the hint is made here, for its output as the source.
  const auto fwd = s.forward_pd.has_value() ? std::any_cast<dnnl::eltwise_forward::primitive_desc>(s.forward_pd)
                                            : forward_pd(ctx, s, s.out.desc);
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
