// The weight update of `--update sgd`: w -= learning_rate * gradient, one
// parallel host loop per parameter over its physical layout (padding included:
// zero minus zero stays zero). Gradients are fp32; a bf16 weight is updated in
// fp32 and rounded back.
#include "crossbench/error.hpp"
#include "engines/onednn/graph.hpp"

namespace crossbench::onednn {

void build_sgd(Builder& ctx) {
  const float rate = static_cast<float>(ctx.config.learning_rate);
  MemoryPool* pool = &ctx.graph.pool;
  for (const Parameter& p : ctx.graph.parameters) {
    // The gradient in the weight's own layout (fp32): usually already so.
    md layout = p.value.desc;
    layout.data.data_type = dnnl_f32;
    const std::string what = ctx.label(p.layer, "sgd update");
    ctx.current_layer = p.layer;  // --layer-times: a weight's update counts in its layer's backward
    const Tensor gradient = ctx.ensure(p.gradient, layout, what);
    const Tensor value = p.value;
    const dt type = value.desc.data_type();
    const auto count = static_cast<std::int64_t>(value.desc.get_size() / size_of(type));
    ctx.push_host(what, {value, gradient}, [=] {
      void* w = pool->address(value.buffer, value.offset);
      const auto* g = static_cast<const float*>(pool->address(gradient.buffer, gradient.offset));
      if (type == dt::f32) {
        auto* wf = static_cast<float*>(w);
#pragma omp parallel for simd schedule(static)
        for (std::int64_t i = 0; i < count; ++i) wf[i] -= rate * g[i];
      } else {
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < count; ++i) store(w, type, i, load(w, type, i) - rate * g[i]);
      }
    });
  }
}

}  // namespace crossbench::onednn
