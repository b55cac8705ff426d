// Channel concatenation (inception modules). Forward: oneDNN concat, which
// picks the output layout. Backward: each input's gradient is a channel slice
// of the output gradient, read through a sub-memory view (no split primitive
// exists); when the layout's channel blocks do not align with a slice, the
// gradient is first reordered to plain NCHW, where every slice is a view.
#include "crossbench/error.hpp"
#include "engines/onednn/graph.hpp"

namespace crossbench::onednn {

void forward_concat(Builder& ctx, int index) {
  const Layer& layer = ctx.layer(index);
  std::vector<md> descs;
  std::vector<std::pair<int, Tensor>> args;
  for (std::size_t i = 0; i < layer.inputs.size(); ++i) {
    const Tensor& in = ctx.state(layer.inputs[i]).out;
    descs.push_back(in.desc);
    args.emplace_back(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), in);
  }
  const auto pd = CB_CHECK_DNNL(dnnl::concat::primitive_desc(1, descs, ctx.graph.engine, ctx.attr));
  LayerState& s = ctx.state(index);
  s.out = ctx.new_tensor(pd.dst_desc(), ctx.label(index, "output"));
  args.emplace_back(DNNL_ARG_DST, s.out);
  ctx.push_primitive(ctx.label(index, "forward"), pd, std::move(args));
}

void backward_concat(Builder& ctx, int index) {
  const Layer& layer = ctx.layer(index);
  const Tensor dy = ctx.gradient(index);
  std::optional<Tensor> plain;  // made once, only if a slice of dy's layout is not a valid view
  std::int64_t offset = 0;
  for (int from : layer.inputs) {
    const dims slice = ctx.shape_of(from);
    const dims offsets{0, offset, 0, 0};
    offset += slice[1];
    if (!ctx.state(from).needs_grad) continue;
    const std::string what = ctx.label(index, "backward slice");
    std::optional<Tensor> view;
    try {
      view = ctx.view(dy, dy.desc.submemory_desc(slice, offsets));
      // A view is only useful if oneDNN can reorder out of it.
      (void)dnnl::reorder::primitive_desc(ctx.graph.engine, view->desc, ctx.graph.engine, ctx.state(from).out.desc, ctx.attr);
    } catch (const dnnl::error&) {
      view.reset();
    }
    if (!view) {
      if (!plain) plain = ctx.ensure_plain(dy, ctx.label(index, "output gradient"));
      view = ctx.view(*plain, plain->desc.submemory_desc(slice, offsets));
    }
    ctx.contribute(from, *view, false, what);
  }
}

}  // namespace crossbench::onednn
