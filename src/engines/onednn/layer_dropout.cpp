// Dropout has no oneDNN primitive. Training: a fresh keep-mask every step from
// synthetic::dropout_keep (the step number comes from RunState; check() uses
// step 0), applied with inverted scaling 1 / (1 - rate), as frameworks do, by
// a parallel host loop over the plain (NCHW) tensor, so that element i of the
// mask is element i of the tensor. The mask (one byte per element) is kept for
// backward. Inference: the identity (the output is the input).
#include "crossbench/error.hpp"
#include "engines/onednn/graph.hpp"

namespace crossbench::onednn {

void forward_dropout(Builder& ctx, int index) {
  const int from = ctx.input_of(index);
  const LayerState& in_state = ctx.state(from);
  LayerState& s = ctx.state(index);
  if (!ctx.training) {
    s.out = in_state.out;  // a view: eval-mode dropout is the identity
    s.exclusive = in_state.exclusive && in_state.consumers == 1;
    s.value_needed = in_state.value_needed;
    return;
  }
  const Tensor in = ctx.ensure_plain(in_state.out, ctx.label(index, "input"));
  const Tensor out = ctx.new_tensor(in.desc, ctx.label(index, "output"));
  const Tensor mask = ctx.new_tensor(plain_like(in.desc, dt::u8), ctx.label(index, "mask"));
  s.out = out;
  s.saved = {mask};

  const double rate = ctx.layer(index).params.dropout_rate;
  const float scale = static_cast<float>(1.0 / (1.0 - rate));
  const std::int64_t count = elements_of(in.desc);
  const std::uint64_t seed = ctx.config.seed;
  const dt type = in.desc.data_type();
  MemoryPool* pool = &ctx.graph.pool;
  RunState* state = ctx.graph.state.get();
  // Element i of this rank's shard is element first + i of the global batch (data parallel).
  const auto first = static_cast<std::uint64_t>(ctx.graph.first_image * (count / ctx.batch));
  ctx.push_host(ctx.label(index, "forward"), {in, out, mask}, [=] {
    const void* x = pool->address(in.buffer, in.offset);
    void* y = pool->address(out.buffer, out.offset);
    auto* keep = static_cast<std::uint8_t*>(pool->address(mask.buffer, mask.offset));
    const std::uint64_t step = state->dropout_step;
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < count; ++i) {
      const bool kept = synthetic::dropout_keep(seed, index, step, first + static_cast<std::uint64_t>(i), rate);
      keep[i] = kept;
      store(y, type, i, kept ? load(x, type, i) * scale : 0.f);
    }
  });
}

void backward_dropout(Builder& ctx, int index) {
  const int from = ctx.input_of(index);
  if (!ctx.state(from).needs_grad) return;
  LayerState& s = ctx.state(index);
  const Tensor dy = ctx.ensure_plain(ctx.gradient(index), ctx.label(index, "output gradient"));
  const Tensor mask = s.saved[0];
  const GradientSink sink = ctx.begin_gradient(from, dy.desc, ctx.label(index, "backward"));
  const Tensor dx = sink.target;
  const float scale = static_cast<float>(1.0 / (1.0 - ctx.layer(index).params.dropout_rate));
  const std::int64_t count = elements_of(dy.desc);
  const dt type = dy.desc.data_type();
  MemoryPool* pool = &ctx.graph.pool;
  ctx.push_host(ctx.label(index, "backward"), {dy, mask, dx}, [=] {
    const void* g = pool->address(dy.buffer, dy.offset);
    void* d = pool->address(dx.buffer, dx.offset);
    const auto* keep = static_cast<const std::uint8_t*>(pool->address(mask.buffer, mask.offset));
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < count; ++i) store(d, type, i, keep[i] ? load(g, type, i) * scale : 0.f);
  });
  ctx.end_gradient(sink, ctx.label(index, "backward"));
}

}  // namespace crossbench::onednn
