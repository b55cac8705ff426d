// Fully-connected layers: oneDNN inner product. The input is taken as
// flattened (C, H, W): a 4D input keeps its layout (the weights get the
// matching 4D layout), a 2D input (after flatten or another fc) is (N, K).
// The output is 2D (N, features). fc_bias_relu (kit/fusion.hpp): the forward
// applies the ReLU as an eltwise post-op, as the convolution does.
#include <cstring>

#include "crossbench/error.hpp"
#include "engines/onednn/graph.hpp"

namespace crossbench::onednn {
namespace {

struct Shapes {
  dims src, weights, bias, dst;
};

Shapes shapes(const Builder& ctx, int index, const md& src) {
  const auto& p = ctx.layer(index).params;
  Shapes s;
  s.src = src.dims();
  s.weights = s.src;
  s.weights[0] = p.out_channels;
  s.bias = {p.out_channels};
  s.dst = {ctx.batch, p.out_channels};
  return s;
}

}  // namespace

void forward_fully_connected(Builder& ctx, int index) {
  const Layer& layer = ctx.layer(index);
  const bool bias = layer.params.bias;
  const Tensor& src = ctx.input_state(index).out;
  const Shapes sh = shapes(ctx, index, src.desc);
  const dt type = ctx.data_type;
  const auto prop = ctx.training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  const md weights_any(sh.weights, type, tag::any), dst_any(sh.dst, type, tag::any), bias_any(sh.bias, dt::f32, tag::any);
  const bool relu = ctx.fused(index, kit::FusedKind::fc_bias_relu);
  const dnnl::primitive_attr attr = relu ? ctx.attr_with_relu() : ctx.attr;
  auto make = [&](const md& src_desc) {
    const auto desc = bias ? dnnl::inner_product_forward::desc(prop, src_desc, weights_any, bias_any, dst_any)
                           : dnnl::inner_product_forward::desc(prop, src_desc, weights_any, dst_any);
    return CB_CHECK_DNNL(dnnl::inner_product_forward::primitive_desc(desc, attr, ctx.graph.engine));
  };
  // Take the producer's layout as it is when oneDNN has a fast kernel for it;
  // else let oneDNN choose and reorder.
  auto pd = make(src.desc);
  if (is_slow_kernel(pd.impl_info_str())) pd = make(md(sh.src, type, tag::any));

  LayerState& s = ctx.state(index);
  const Tensor in = ctx.ensure(src, pd.src_desc(), ctx.label(index, "input"));
  const int weights = ctx.add_parameter(index, synthetic::Slot::weight, pd.weights_desc(), plain_md(sh.weights, dt::f32));
  s.out = ctx.new_tensor(pd.dst_desc(), ctx.label(index, "output"));
  std::vector<std::pair<int, Tensor>> args{{DNNL_ARG_SRC, in},
                                           {DNNL_ARG_WEIGHTS, ctx.graph.parameters[static_cast<std::size_t>(weights)].value},
                                           {DNNL_ARG_DST, s.out}};
  if (bias) {
    const int b = ctx.add_parameter(index, synthetic::Slot::bias, pd.bias_desc(), plain_md(sh.bias, dt::f32));
    args.emplace_back(DNNL_ARG_BIAS, ctx.graph.parameters[static_cast<std::size_t>(b)].value);
  }
  ctx.push_primitive(ctx.label(index, relu ? "forward (+ relu post-op)" : "forward"), pd, std::move(args));
  s.forward_pd = pd;
  s.saved = {in};
}

void backward_fully_connected(Builder& ctx, int index) {
  const Layer& layer = ctx.layer(index);
  const bool bias = layer.params.bias;
  LayerState& s = ctx.state(index);
  const Tensor& in = s.saved[0];
  const Shapes sh = shapes(ctx, index, in.desc);
  const dt type = ctx.data_type;
  const auto fwd = std::any_cast<dnnl::inner_product_forward::primitive_desc>(s.forward_pd);
  const Tensor& dy = ctx.gradient(index);
  const Parameter weights = ctx.graph.parameters[static_cast<std::size_t>(s.parameters[0])];
  const md src_any(sh.src, type, tag::any), weights_any(sh.weights, type, tag::any), dst_any(sh.dst, type, tag::any);

  const md dweights_any(sh.weights, dt::f32, tag::any), dbias_any(sh.bias, dt::f32, tag::any);
  const auto wdesc = bias ? dnnl::inner_product_backward_weights::desc(src_any, dweights_any, dbias_any, dst_any)
                          : dnnl::inner_product_backward_weights::desc(src_any, dweights_any, dst_any);
  auto wpd = CB_CHECK_DNNL(dnnl::inner_product_backward_weights::primitive_desc(wdesc, ctx.attr, ctx.graph.engine, fwd));
  wpd = same_kernel_or(wpd, [&] {  // the gradient in the weights' layout: SGD needs no reorder
    const md fixed = with_data_type(weights.value.desc, dt::f32);
    const auto d = bias ? dnnl::inner_product_backward_weights::desc(src_any, fixed, dbias_any, dst_any)
                        : dnnl::inner_product_backward_weights::desc(src_any, fixed, dst_any);
    return dnnl::inner_product_backward_weights::primitive_desc(d, ctx.attr, ctx.graph.engine, fwd);
  });
  const Tensor x = ctx.ensure(in, wpd.src_desc(), ctx.label(index, "input for weight gradient"));
  const Tensor dyw = ctx.ensure(dy, wpd.diff_dst_desc(), ctx.label(index, "output gradient for weight gradient"));
  ctx.set_parameter_gradient(s.parameters[0], wpd.diff_weights_desc());
  std::vector<std::pair<int, Tensor>> wargs{
      {DNNL_ARG_SRC, x},
      {DNNL_ARG_DIFF_DST, dyw},
      {DNNL_ARG_DIFF_WEIGHTS, ctx.graph.parameters[static_cast<std::size_t>(s.parameters[0])].gradient}};
  if (bias) {
    ctx.set_parameter_gradient(s.parameters[1], wpd.diff_bias_desc());
    wargs.emplace_back(DNNL_ARG_DIFF_BIAS, ctx.graph.parameters[static_cast<std::size_t>(s.parameters[1])].gradient);
  }
  ctx.push_primitive(ctx.label(index, "backward weights"), wpd, std::move(wargs));

  const int from = layer.inputs.front();
  if (!ctx.state(from).needs_grad) return;
  const dnnl::inner_product_backward_data::desc ddesc(src_any, weights_any, dst_any);
  auto dpd = CB_CHECK_DNNL(dnnl::inner_product_backward_data::primitive_desc(ddesc, ctx.attr, ctx.graph.engine, fwd));
  dpd = same_kernel_or(dpd, [&] {  // the forward weights as they are (gemm takes either transpose)
    const dnnl::inner_product_backward_data::desc d(src_any, weights.value.desc, dst_any);
    return dnnl::inner_product_backward_data::primitive_desc(d, ctx.attr, ctx.graph.engine, fwd);
  });
  const Tensor w = ctx.ensure(weights.value, dpd.weights_desc(), ctx.label(index, "weights for data gradient"));
  const Tensor dyd = dpd.diff_dst_desc() == dyw.desc ? dyw : ctx.ensure(dy, dpd.diff_dst_desc(), ctx.label(index, "output gradient"));
  // The data gradient has the input's rank; the producer's tensor may differ
  // in layout only (begin_gradient reorders then).
  const GradientSink sink = ctx.begin_gradient(from, dpd.diff_src_desc(), ctx.label(index, "backward data"));
  ctx.push_primitive(ctx.label(index, "backward data"), dpd,
                     {{DNNL_ARG_DIFF_DST, dyd}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_SRC, sink.target}});
  ctx.end_gradient(sink, ctx.label(index, "backward data"));
}

}  // namespace crossbench::onednn
