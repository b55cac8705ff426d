// Local response normalisation across channels. oneDNN's definition,
// dst = src / (k + alpha / size * sum over the window of src^2)^beta, is
// PyTorch's LocalResponseNorm and Caffe's LRN (alpha divided by the size).
#include "crossbench/error.hpp"
#include "engines/onednn/graph.hpp"

namespace crossbench::onednn {

void forward_lrn(Builder& ctx, int index) {
  const auto& p = ctx.layer(index).params;
  const Tensor& src = ctx.input_state(index).out;
  const auto prop = ctx.training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  auto make = [&](const md& src_desc) {
    const dnnl::lrn_forward::desc desc(prop, dnnl::algorithm::lrn_across_channels, src_desc, p.lrn_size,
                                       static_cast<float>(p.lrn_alpha), static_cast<float>(p.lrn_beta),
                                       static_cast<float>(p.lrn_k));
    return CB_CHECK_DNNL(dnnl::lrn_forward::primitive_desc(desc, ctx.attr, ctx.graph.engine));
  };
  auto pd = make(src.desc);
  Tensor in = src;
  if (is_slow_kernel(pd.impl_info_str()) && is_plain(src.desc) && src.desc.data.ndims == 4) {
    const md blocked(src.desc.dims(), src.desc.data_type(), blocked_activation_tag());
    const auto faster = make(blocked);
    if (!is_slow_kernel(faster.impl_info_str())) {  // the jit kernels want channel blocks
      pd = faster;
      in = ctx.ensure(src, blocked, ctx.label(index, "input"));
    }
  }
  LayerState& s = ctx.state(index);
  s.out = ctx.new_tensor(pd.dst_desc(), ctx.label(index, "output"));
  std::vector<std::pair<int, Tensor>> args{{DNNL_ARG_SRC, in}, {DNNL_ARG_DST, s.out}};
  s.saved = {in};
  if (pd.workspace_desc().get_size() > 0) {
    const Tensor workspace = ctx.new_tensor(pd.workspace_desc(), ctx.label(index, "workspace"));
    args.emplace_back(DNNL_ARG_WORKSPACE, workspace);
    s.saved.push_back(workspace);
  }
  ctx.push_primitive(ctx.label(index, "forward"), pd, std::move(args));
  s.forward_pd = pd;
}

void backward_lrn(Builder& ctx, int index) {
  const auto& p = ctx.layer(index).params;
  const int from = ctx.input_of(index);
  LayerState& s = ctx.state(index);
  const auto fwd = std::any_cast<dnnl::lrn_forward::primitive_desc>(s.forward_pd);
  const Tensor& src = s.saved[0];
  const dnnl::lrn_backward::desc desc(dnnl::algorithm::lrn_across_channels, src.desc, s.out.desc, p.lrn_size,
                                      static_cast<float>(p.lrn_alpha), static_cast<float>(p.lrn_beta),
                                      static_cast<float>(p.lrn_k));
  const auto pd = CB_CHECK_DNNL(dnnl::lrn_backward::primitive_desc(desc, ctx.attr, ctx.graph.engine, fwd));
  const Tensor dy = ctx.ensure(ctx.gradient(index), pd.diff_dst_desc(), ctx.label(index, "output gradient"));
  const GradientSink sink = ctx.begin_gradient(from, pd.diff_src_desc(), ctx.label(index, "backward"));
  std::vector<std::pair<int, Tensor>> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_DIFF_SRC, sink.target}};
  if (s.saved.size() > 1) args.emplace_back(DNNL_ARG_WORKSPACE, s.saved[1]);
  ctx.push_primitive(ctx.label(index, "backward"), pd, std::move(args));
  ctx.end_gradient(sink, ctx.label(index, "backward"));
}

}  // namespace crossbench::onednn
