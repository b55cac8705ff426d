// Batch normalisation with scale (gamma) and shift (beta), statistics in fp32.
// Training: batch statistics (forward_training), backward with scale and
// shift gradients, and PyTorch's running-statistics update (momentum, unbiased
// variance) as a small host loop. Inference: use_global_stats with the running
// statistics of a fresh model (mean 0, variance 1).
// bn_relu (kit/fusion.hpp, training): normalization_flags::fuse_norm_relu. The
// forward writes relu(y), the ReLU's output, and a workspace (the ReLU's mask);
// the backward takes the ReLU's output gradient and applies the mask itself, so
// the ReLU runs no op in either direction and y's gradient never exists.
// conv_bn_relu and conv_bn_add_relu (inference): no op either;
// fold_into_convolution rewrites the convolution's weights and bias once after
// initialisation.
#include <cmath>
#include <vector>

#include "crossbench/error.hpp"
#include "engines/onednn/graph.hpp"

namespace crossbench::onednn {
namespace {

const auto kScaleShift = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;

void fill(Builder& ctx, const Tensor& t, float value) {
  MemoryPool* pool = &ctx.graph.pool;
  ctx.after_allocation([pool, t, value] {
    auto* data = static_cast<float*>(pool->address(t.buffer, t.offset));
    for (std::int64_t i = 0; i < elements_of(t.desc); ++i) data[i] = value;
  });
}

}  // namespace

void fold_batch_norm(std::vector<float>& weights, std::vector<float>& bias, const std::vector<float>& gamma,
                     const std::vector<float>& beta, const std::vector<float>& mean, const std::vector<float>& variance,
                     double epsilon) {
  const std::size_t channels = bias.size();
  if (channels == 0 || weights.size() % channels != 0 || gamma.size() != channels || beta.size() != channels ||
      mean.size() != channels || variance.size() != channels)
    throw Error("fold_batch_norm: per-channel vectors do not match the weights");
  const std::size_t per_output = weights.size() / channels;
  for (std::size_t o = 0; o < channels; ++o) {
    const double scale = gamma[o] / std::sqrt(static_cast<double>(variance[o]) + epsilon);
    for (std::size_t k = 0; k < per_output; ++k)
      weights[o * per_output + k] = static_cast<float>(weights[o * per_output + k] * scale);
    bias[o] = static_cast<float>((static_cast<double>(bias[o]) - mean[o]) * scale + beta[o]);
  }
}

namespace {

// `t` (any layout) as fp32 in the layout `canonical`, and back (oneDNN reorders, synchronous).
std::vector<float> read(Graph& graph, const Tensor& t, const md& canonical) {
  std::vector<float> values(static_cast<std::size_t>(elements_of(canonical)));
  dnnl::memory from(t.desc, graph.engine, graph.pool.address(t.buffer, t.offset));
  dnnl::memory to(canonical, graph.engine, values.data());
  CB_CHECK_DNNL(dnnl::reorder(from, to).execute(graph.stream, from, to));
  CB_CHECK_DNNL(graph.stream.wait());
  return values;
}

void write(Graph& graph, std::vector<float>& values, const md& canonical, const Tensor& t) {
  dnnl::memory from(canonical, graph.engine, values.data());
  dnnl::memory to(t.desc, graph.engine, graph.pool.address(t.buffer, t.offset));
  CB_CHECK_DNNL(dnnl::reorder(from, to).execute(graph.stream, from, to));
  CB_CHECK_DNNL(graph.stream.wait());
}

// conv_bn_relu in inference: y = gamma (conv(x) + b - mean) / sqrt(variance + eps) + beta is the
// convolution with weights w * s and bias (b - mean) s + beta, s = gamma / sqrt(variance + eps) per
// output channel. The batch-norm's parameters and running statistics are made as unfused (the same
// synthetic values); after they are initialised, the fold rewrites the convolution's weights in place
// (the model is never updated in inference) and writes its folded bias (forward_convolution's saved[1]).
// In bf16 the folded weights are rounded once, where the unfused graph rounds the convolution's output.
void fold_into_convolution(Builder& ctx, int index, const kit::FusedGroup& group) {
  const Layer& layer = ctx.layer(index);
  const std::int64_t channels = layer.output.channels;
  const md per_channel({channels}, dt::f32, tag::a);
  const int gamma = ctx.add_parameter(index, synthetic::Slot::bn_gamma, per_channel, per_channel);
  const int beta = ctx.add_parameter(index, synthetic::Slot::bn_beta, per_channel, per_channel);
  const Tensor mean = ctx.new_tensor(per_channel, ctx.label(index, "running mean"), true);
  const Tensor variance = ctx.new_tensor(per_channel, ctx.label(index, "running variance"), true);
  fill(ctx, mean, 0.f);
  fill(ctx, variance, 1.f);
  const int conv = group.anchor();
  const LayerState& c = ctx.state(conv);
  ctx.state(index).out = c.out;
  const int weights = c.parameters[0];
  const int conv_bias = c.parameters.size() > 1 ? c.parameters[1] : -1;
  const Tensor folded_bias = c.saved.at(1);
  const double epsilon = layer.params.bn_epsilon;
  Graph* graph = &ctx.graph;
  ctx.after_allocation([=] {  // registered after every initialiser it reads
    auto parameter = [&](int id) -> const Parameter& { return graph->parameters[static_cast<std::size_t>(id)]; };
    const std::vector<float> g = read(*graph, parameter(gamma).value, per_channel);
    const std::vector<float> b = read(*graph, parameter(beta).value, per_channel);
    const std::vector<float> m = read(*graph, mean, per_channel), v = read(*graph, variance, per_channel);
    std::vector<float> bias = conv_bias >= 0 ? read(*graph, parameter(conv_bias).value, per_channel)
                                             : std::vector<float>(static_cast<std::size_t>(channels), 0.f);
    const Parameter& w = parameter(weights);
    std::vector<float> values = read(*graph, w.value, w.canonical);  // oihw: output channel outermost
    fold_batch_norm(values, bias, g, b, m, v, epsilon);
    write(*graph, values, w.canonical, w.value);
    write(*graph, bias, per_channel, folded_bias);
  });
}

}  // namespace

void forward_batch_norm(Builder& ctx, int index) {
  const Layer& layer = ctx.layer(index);
  if (const kit::FusedGroup* group = ctx.fused(index);
      group != nullptr && (group->kind == kit::FusedKind::conv_bn_relu || group->kind == kit::FusedKind::conv_bn_add_relu)) {
    fold_into_convolution(ctx, index, *group);
    return;
  }
  const Tensor& src = ctx.input_state(index).out;
  const std::int64_t channels = layer.output.channels;
  const bool relu = ctx.fused(index, kit::FusedKind::bn_relu);
  auto flags = ctx.training ? kScaleShift : kScaleShift | dnnl::normalization_flags::use_global_stats;
  if (relu) flags = flags | dnnl::normalization_flags::fuse_norm_relu;
  const auto prop = ctx.training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  const dnnl::batch_normalization_forward::desc desc(prop, src.desc, static_cast<float>(layer.params.bn_epsilon), flags);
  const auto pd = CB_CHECK_DNNL(dnnl::batch_normalization_forward::primitive_desc(desc, ctx.attr, ctx.graph.engine));

  LayerState& s = ctx.state(index);
  const md per_channel({channels}, dt::f32, tag::a);
  const int gamma = ctx.add_parameter(index, synthetic::Slot::bn_gamma, per_channel, per_channel);
  const int beta = ctx.add_parameter(index, synthetic::Slot::bn_beta, per_channel, per_channel);
  s.out = ctx.new_tensor(pd.dst_desc(), ctx.label(index, "output"));
  Tensor mean, variance;
  if (ctx.training) {
    mean = ctx.new_tensor(pd.mean_desc(), ctx.label(index, "batch mean"));
    variance = ctx.new_tensor(pd.variance_desc(), ctx.label(index, "batch variance"));
  } else {
    mean = ctx.new_tensor(pd.mean_desc(), ctx.label(index, "running mean"), true);
    variance = ctx.new_tensor(pd.variance_desc(), ctx.label(index, "running variance"), true);
    fill(ctx, mean, 0.f);
    fill(ctx, variance, 1.f);
  }
  std::vector<std::pair<int, Tensor>> args{{DNNL_ARG_SRC, src},
                                           {DNNL_ARG_DST, s.out},
                                           {DNNL_ARG_SCALE, ctx.graph.parameters[static_cast<std::size_t>(gamma)].value},
                                           {DNNL_ARG_SHIFT, ctx.graph.parameters[static_cast<std::size_t>(beta)].value},
                                           {DNNL_ARG_MEAN, mean},
                                           {DNNL_ARG_VARIANCE, variance}};
  s.saved = {src, mean, variance};
  if (relu && ctx.training) {  // the ReLU's mask, for the backward
    const Tensor workspace = ctx.new_tensor(pd.workspace_desc(), ctx.label(index, "relu workspace"));
    args.emplace_back(DNNL_ARG_WORKSPACE, workspace);
    s.saved.push_back(workspace);
  }
  ctx.push_primitive(ctx.label(index, relu ? "forward (+ fused relu)" : "forward"), pd, std::move(args));
  s.forward_pd = pd;

  if (ctx.training) {
    // running = (1 - momentum) * running + momentum * batch statistic (unbiased variance), as PyTorch.
    const Tensor running_mean = ctx.new_tensor(per_channel, ctx.label(index, "running mean"), true);
    const Tensor running_variance = ctx.new_tensor(per_channel, ctx.label(index, "running variance"), true);
    fill(ctx, running_mean, 0.f);
    fill(ctx, running_variance, 1.f);
    const dims shape = ctx.shape_of(index);
    const double count = static_cast<double>(shape[0] * shape[2] * shape[3]);
    const float momentum = static_cast<float>(layer.params.bn_momentum);
    const float unbias = count > 1 ? static_cast<float>(count / (count - 1)) : 1.f;
    MemoryPool* pool = &ctx.graph.pool;
    RunState* state = ctx.graph.state.get();
    ctx.push_host(ctx.label(index, "running statistics"), {mean, variance, running_mean, running_variance},
                  [=] {
                    if (!state->update_running_stats) return;
                    const auto* m = static_cast<const float*>(pool->address(mean.buffer, mean.offset));
                    const auto* v = static_cast<const float*>(pool->address(variance.buffer, variance.offset));
                    auto* rm = static_cast<float*>(pool->address(running_mean.buffer, running_mean.offset));
                    auto* rv = static_cast<float*>(pool->address(running_variance.buffer, running_variance.offset));
                    for (std::int64_t c = 0; c < channels; ++c) {
                      rm[c] = (1 - momentum) * rm[c] + momentum * m[c];
                      rv[c] = (1 - momentum) * rv[c] + momentum * v[c] * unbias;
                    }
                  });
  }
}

void backward_batch_norm(Builder& ctx, int index) {
  const Layer& layer = ctx.layer(index);
  const int from = ctx.input_of(index);
  LayerState& s = ctx.state(index);
  const auto fwd = std::any_cast<dnnl::batch_normalization_forward::primitive_desc>(s.forward_pd);
  const Tensor &src = s.saved[0], &mean = s.saved[1], &variance = s.saved[2];
  // bn_relu: the gradient of relu(y), which the workspace's mask turns into y's inside the primitive.
  const kit::FusedGroup* group = ctx.fused(index);
  const bool relu = group != nullptr && group->kind == kit::FusedKind::bn_relu;
  const auto flags = relu ? kScaleShift | dnnl::normalization_flags::fuse_norm_relu : kScaleShift;
  const dnnl::batch_normalization_backward::desc desc(dnnl::prop_kind::backward, s.out.desc, src.desc,
                                                      static_cast<float>(layer.params.bn_epsilon), flags);
  const auto pd =
      CB_CHECK_DNNL(dnnl::batch_normalization_backward::primitive_desc(desc, ctx.attr, ctx.graph.engine, fwd));
  const Tensor dy = ctx.ensure(ctx.gradient(relu ? group->relu : index), pd.diff_dst_desc(),
                               ctx.label(index, relu ? "relu output gradient" : "output gradient"));
  const md per_channel({layer.output.channels}, dt::f32, tag::a);
  ctx.set_parameter_gradient(s.parameters[0], per_channel);
  ctx.set_parameter_gradient(s.parameters[1], per_channel);
  // oneDNN always computes the data gradient; without a consumer it goes to a scratch tensor.
  const bool wanted = ctx.state(from).needs_grad;
  const GradientSink sink = wanted ? ctx.begin_gradient(from, pd.diff_src_desc(), ctx.label(index, "backward"))
                                   : GradientSink{from, ctx.new_tensor(pd.diff_src_desc(), ctx.label(index, "unused input gradient")), true};
  const auto& params = ctx.graph.parameters;
  std::vector<std::pair<int, Tensor>> args{{DNNL_ARG_SRC, src},
                                           {DNNL_ARG_MEAN, mean},
                                           {DNNL_ARG_VARIANCE, variance},
                                           {DNNL_ARG_DIFF_DST, dy},
                                           {DNNL_ARG_SCALE, params[static_cast<std::size_t>(s.parameters[0])].value},
                                           {DNNL_ARG_SHIFT, params[static_cast<std::size_t>(s.parameters[1])].value},
                                           {DNNL_ARG_DIFF_SRC, sink.target},
                                           {DNNL_ARG_DIFF_SCALE, params[static_cast<std::size_t>(s.parameters[0])].gradient},
                                           {DNNL_ARG_DIFF_SHIFT, params[static_cast<std::size_t>(s.parameters[1])].gradient}};
  if (relu) args.emplace_back(DNNL_ARG_WORKSPACE, s.saved[3]);
  ctx.push_primitive(ctx.label(index, relu ? "backward (+ fused relu)" : "backward"), pd, std::move(args));
  if (wanted) ctx.end_gradient(sink, ctx.label(index, "backward"));
}

}  // namespace crossbench::onednn
