// Max and average pooling. Ceil mode (Caffe GoogLeNet) becomes extra right
// padding. Average pooling matches PyTorch's AvgPool2d default
// (count_include_pad=True): with padding, oneDNN's pooling_avg_include_padding;
// without padding the divisor is the number of input pixels in the window
// (PyTorch never counts ceil-mode overflow), pooling_avg_exclude_padding. Only
// padding > 0 together with ceil-mode overflow would differ from PyTorch (no
// network here has it). Max pooling keeps oneDNN's workspace (argmax) for backward.
#include <algorithm>

#include "crossbench/error.hpp"
#include "engines/onednn/graph.hpp"

namespace crossbench::onednn {
namespace {

struct Geometry {
  dims strides, kernel, padding_l, padding_r, dst;
  dnnl::algorithm algorithm;
};

Geometry geometry(const Builder& ctx, int index) {
  const Layer& layer = ctx.layer(index);
  const auto& p = layer.params;
  const dims src = ctx.shape_of(layer.inputs.front());
  Geometry g;
  g.dst = ctx.shape_of(index);
  g.strides = {p.stride, p.stride};
  g.kernel = {p.kernel, p.kernel};
  g.padding_l = {p.padding, p.padding};
  // Floor mode: pr = pl gives the network's size; ceil mode needs more on the right.
  g.padding_r = {std::max(p.padding, (g.dst[2] - 1) * p.stride + p.kernel - src[2] - p.padding),
                 std::max(p.padding, (g.dst[3] - 1) * p.stride + p.kernel - src[3] - p.padding)};
  if (layer.kind == LayerKind::max_pool)
    g.algorithm = dnnl::algorithm::pooling_max;
  else
    g.algorithm = p.padding > 0 ? dnnl::algorithm::pooling_avg_include_padding
                                : dnnl::algorithm::pooling_avg_exclude_padding;
  return g;
}

}  // namespace

void forward_pooling(Builder& ctx, int index) {
  const Geometry g = geometry(ctx, index);
  const Tensor& src = ctx.input_state(index).out;
  const auto prop = ctx.training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  auto make = [&](const md& src_desc) {
    const dnnl::pooling_forward::desc desc(prop, g.algorithm, src_desc, md(g.dst, ctx.data_type, tag::any), g.strides,
                                           g.kernel, g.padding_l, g.padding_r);
    return CB_CHECK_DNNL(dnnl::pooling_forward::primitive_desc(desc, ctx.attr, ctx.graph.engine));
  };
  auto pd = make(src.desc);
  Tensor in = src;
  // A plain NCHW input (after a gemm convolution such as AlexNet's conv1) has
  // only a slow pooling kernel: reordering it to the blocked layout is cheaper.
  if (is_slow_kernel(pd.impl_info_str()) && is_plain(src.desc) && src.desc.data.ndims == 4) {
    const md blocked(src.desc.dims(), src.desc.data_type(), blocked_activation_tag());
    const auto faster = make(blocked);
    if (!is_slow_kernel(faster.impl_info_str())) {
      pd = faster;
      in = ctx.ensure(src, blocked, ctx.label(index, "input"));
    }
  }
  LayerState& s = ctx.state(index);
  s.out = ctx.new_tensor(pd.dst_desc(), ctx.label(index, "output"));
  std::vector<std::pair<int, Tensor>> args{{DNNL_ARG_SRC, in}, {DNNL_ARG_DST, s.out}};
  s.saved = {in};  // its layout is the input gradient's
  if (pd.workspace_desc().get_size() > 0) {
    const Tensor workspace = ctx.new_tensor(pd.workspace_desc(), ctx.label(index, "workspace"));
    args.emplace_back(DNNL_ARG_WORKSPACE, workspace);
    s.saved.push_back(workspace);
  }
  ctx.push_primitive(ctx.label(index, "forward"), pd, std::move(args));
  s.forward_pd = pd;
}

void backward_pooling(Builder& ctx, int index) {
  const Geometry g = geometry(ctx, index);
  const int from = ctx.input_of(index);
  LayerState& s = ctx.state(index);
  const auto fwd = std::any_cast<dnnl::pooling_forward::primitive_desc>(s.forward_pd);
  const dnnl::pooling_backward::desc desc(g.algorithm, s.saved[0].desc, s.out.desc, g.strides, g.kernel, g.padding_l,
                                          g.padding_r);
  const auto pd = CB_CHECK_DNNL(dnnl::pooling_backward::primitive_desc(desc, ctx.attr, ctx.graph.engine, fwd));
  const Tensor dy = ctx.ensure(ctx.gradient(index), pd.diff_dst_desc(), ctx.label(index, "output gradient"));
  const GradientSink sink = ctx.begin_gradient(from, pd.diff_src_desc(), ctx.label(index, "backward"));
  std::vector<std::pair<int, Tensor>> args{{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_DIFF_SRC, sink.target}};
  if (s.saved.size() > 1) args.emplace_back(DNNL_ARG_WORKSPACE, s.saved[1]);
  ctx.push_primitive(ctx.label(index, "backward"), pd, std::move(args));
  ctx.end_gradient(sink, ctx.label(index, "backward"));
}

}  // namespace crossbench::onednn
