// Convolution (+ bias): oneDNN picks every layout (format_tag::any); the input
// is reordered only when the producer's layout differs from the chosen one.
// Backward: data gradient (when the input needs one) and weight/bias gradients
// in fp32, each primitive hinted by the forward one.
// conv_bias_relu (kit/fusion.hpp): the forward applies the ReLU as an eltwise
// post-op and its output is the ReLU's; the backward is unchanged (the ReLU's
// own backward has already turned the gradient into this output's).
// conv_bn_relu (inference): the batch-norm after it is folded into it, as a
// deployment does: its weights are scaled per output channel once after
// initialisation (layer_batch_norm.cpp, fold_into_convolution), its bias is the
// folded bias, and the group's ReLU, if any, is its post-op.
// conv_bn_add_relu (inference): folded as conv_bn_relu, then a sum post-op adds
// the destination's bytes (the residual) before the ReLU post-op, so the add and
// the ReLU run no op. The destination is the residual's own tensor when nothing
// reads the residual after this convolution but the group's add, and the layout
// the convolution picks is the residual's (the usual case: the bottleneck's
// conv3 or projection in ResNets); else a copy of the residual in the picked
// layout, made by an op just before (the add's bytes moved once, where an
// unfused add reads both inputs and writes its output).
#include <algorithm>

#include "crossbench/error.hpp"
#include "engines/onednn/graph.hpp"

namespace crossbench::onednn {
namespace {

struct Geometry {
  dims src, weights, bias, dst, strides, padding_l, padding_r;
};

// Right padding: oneDNN wants out = (in - k + pl + pr) / s + 1 exactly. With
// the network's floor rounding, pr = pl reproduces it.
Geometry geometry(const Builder& ctx, int index) {
  const Layer& layer = ctx.layer(index);
  const auto& p = layer.params;
  Geometry g;
  g.src = ctx.shape_of(layer.inputs.front());
  g.dst = ctx.shape_of(index);
  g.weights = {p.out_channels, g.src[1], p.kernel, p.kernel};
  g.bias = {p.out_channels};
  g.strides = {p.stride, p.stride};
  g.padding_l = {p.padding, p.padding};
  g.padding_r = {std::max(p.padding, (g.dst[2] - 1) * p.stride + p.kernel - g.src[2] - p.padding),
                 std::max(p.padding, (g.dst[3] - 1) * p.stride + p.kernel - g.src[3] - p.padding)};
  return g;
}

}  // namespace

void forward_convolution(Builder& ctx, int index) {
  const Layer& layer = ctx.layer(index);
  const kit::FusedGroup* group = ctx.fused(index);
  const bool sums = group != nullptr && group->kind == kit::FusedKind::conv_bn_add_relu;
  const bool folded = group != nullptr && (group->kind == kit::FusedKind::conv_bn_relu || sums);
  const bool relu = group != nullptr && (group->kind == kit::FusedKind::conv_bias_relu || (folded && group->relu >= 0));
  const bool bias = layer.params.bias || folded;  // folding gives every convolution a bias
  const Geometry g = geometry(ctx, index);
  const dt type = ctx.data_type;
  const auto prop = ctx.training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  const md src_any(g.src, type, tag::any), weights_any(g.weights, type, tag::any), dst_any(g.dst, type, tag::any);
  const md bias_any(g.bias, dt::f32, tag::any);  // fp32 bias also in bf16: oneDNN adds it in fp32
  const auto desc = bias ? dnnl::convolution_forward::desc(prop, dnnl::algorithm::convolution_direct, src_any,
                                                           weights_any, bias_any, dst_any, g.strides, g.padding_l,
                                                           g.padding_r)
                         : dnnl::convolution_forward::desc(prop, dnnl::algorithm::convolution_direct, src_any,
                                                           weights_any, dst_any, g.strides, g.padding_l, g.padding_r);
  const auto pd = CB_CHECK_DNNL(dnnl::convolution_forward::primitive_desc(
      desc, sums || relu ? ctx.attr_with_post_ops(sums, relu) : ctx.attr, ctx.graph.engine));

  LayerState& s = ctx.state(index);
  const Tensor in = ctx.ensure(ctx.input_state(index).out, pd.src_desc(), ctx.label(index, "input"));
  const int weights = ctx.add_parameter(index, synthetic::Slot::weight, pd.weights_desc(), plain_md(g.weights, dt::f32));
  if (sums) {  // the destination holds the residual when the convolution runs
    const Tensor& residual = ctx.state(group->residual).out;
    if (residual.desc == pd.dst_desc() && ctx.can_overwrite_once_read(group->residual, index, group->add)) {
      s.out = residual;
      ++ctx.graph.sums_into_residual;
    } else {
      s.out = ctx.new_tensor(pd.dst_desc(), ctx.label(index, "output (+ residual)"));
      ctx.push_reorder(ctx.label(index, "residual into the output, the sum post-op's addend"), residual, s.out);
      ++ctx.graph.sums_into_copy;
    }
  } else {
    s.out = ctx.new_tensor(pd.dst_desc(), ctx.label(index, "output"));
  }
  std::vector<std::pair<int, Tensor>> args{{DNNL_ARG_SRC, in},
                                           {DNNL_ARG_WEIGHTS, ctx.graph.parameters[static_cast<std::size_t>(weights)].value},
                                           {DNNL_ARG_DST, s.out}};
  s.saved = {in};
  if (layer.params.bias) {  // the layer's own bias: the bias argument, or (folded) an input of the fold
    const int b = ctx.add_parameter(index, synthetic::Slot::bias, pd.bias_desc(), plain_md(g.bias, dt::f32));
    if (!folded) args.emplace_back(DNNL_ARG_BIAS, ctx.graph.parameters[static_cast<std::size_t>(b)].value);
  }
  if (folded) {  // written by the batch-norm's fold after initialisation: saved[1]
    const Tensor folded_bias = ctx.new_tensor(pd.bias_desc(), ctx.label(index, "folded bias"), true);
    args.emplace_back(DNNL_ARG_BIAS, folded_bias);
    s.saved.push_back(folded_bias);
  }
  const char* what = sums     ? "forward (+ folded batch-norm, residual sum and relu post-ops)"
                     : folded ? (relu ? "forward (+ folded batch-norm, relu post-op)" : "forward (+ folded batch-norm)")
                              : (relu ? "forward (+ relu post-op)" : "forward");
  ctx.push_primitive(ctx.label(index, what), pd, std::move(args));
  s.forward_pd = pd;
}

void backward_convolution(Builder& ctx, int index) {
  const Layer& layer = ctx.layer(index);
  const bool bias = layer.params.bias;
  const Geometry g = geometry(ctx, index);
  const dt type = ctx.data_type;
  LayerState& s = ctx.state(index);
  const auto fwd = std::any_cast<dnnl::convolution_forward::primitive_desc>(s.forward_pd);
  const Tensor& dy = ctx.gradient(index);
  const Parameter weights = ctx.graph.parameters[static_cast<std::size_t>(s.parameters[0])];
  const md src_any(g.src, type, tag::any), weights_any(g.weights, type, tag::any), dst_any(g.dst, type, tag::any);

  // Weight and bias gradients, in fp32 whatever the tensors' precision.
  const md dweights_any(g.weights, dt::f32, tag::any), dbias_any(g.bias, dt::f32, tag::any);
  const auto wdesc =
      bias ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_any, dweights_any,
                                                      dbias_any, dst_any, g.strides, g.padding_l, g.padding_r)
           : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_any, dweights_any,
                                                      dst_any, g.strides, g.padding_l, g.padding_r);
  auto wpd = CB_CHECK_DNNL(dnnl::convolution_backward_weights::primitive_desc(wdesc, ctx.attr, ctx.graph.engine, fwd));
  wpd = same_kernel_or(wpd, [&] {  // the gradient in the weights' layout: SGD needs no reorder
    const md fixed = with_data_type(weights.value.desc, dt::f32);
    const auto d = bias ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_any, fixed,
                                                                  dbias_any, dst_any, g.strides, g.padding_l, g.padding_r)
                        : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_any, fixed,
                                                                  dst_any, g.strides, g.padding_l, g.padding_r);
    return dnnl::convolution_backward_weights::primitive_desc(d, ctx.attr, ctx.graph.engine, fwd);
  });
  const Tensor x = ctx.ensure(s.saved[0], wpd.src_desc(), ctx.label(index, "input for weight gradient"));
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

  // Data gradient, unless the input needs none (the network input).
  const int from = layer.inputs.front();
  if (!ctx.state(from).needs_grad) return;
  const dnnl::convolution_backward_data::desc ddesc(dnnl::algorithm::convolution_direct, src_any, weights_any, dst_any,
                                                    g.strides, g.padding_l, g.padding_r);
  auto dpd = CB_CHECK_DNNL(dnnl::convolution_backward_data::primitive_desc(ddesc, ctx.attr, ctx.graph.engine, fwd));
  dpd = same_kernel_or(dpd, [&] {  // the forward weights as they are: no reorder per step
    const dnnl::convolution_backward_data::desc d(dnnl::algorithm::convolution_direct, src_any, weights.value.desc,
                                                  dst_any, g.strides, g.padding_l, g.padding_r);
    return dnnl::convolution_backward_data::primitive_desc(d, ctx.attr, ctx.graph.engine, fwd);
  });
  const Tensor w = ctx.ensure(weights.value, dpd.weights_desc(), ctx.label(index, "weights for data gradient"));
  const Tensor dyd = dpd.diff_dst_desc() == dyw.desc ? dyw : ctx.ensure(dy, dpd.diff_dst_desc(), ctx.label(index, "output gradient"));
  const GradientSink sink = ctx.begin_gradient(from, dpd.diff_src_desc(), ctx.label(index, "backward data"));
  ctx.push_primitive(ctx.label(index, "backward data"), dpd,
                     {{DNNL_ARG_DIFF_DST, dyd}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_SRC, sink.target}});
  ctx.end_gradient(sink, ctx.label(index, "backward data"));
}

}  // namespace crossbench::onednn
