// Flatten to (N, C*H*W) in (C, H, W) order. A plain NCHW input is simply
// viewed as 2D; a blocked one (oneDNN's nChw8c, ...) is reordered to NCHW
// first, as a framework does when it flattens a blocked tensor.
#include "crossbench/error.hpp"
#include "engines/onednn/graph.hpp"

namespace crossbench::onednn {

void forward_flatten(Builder& ctx, int index) {
  const int from = ctx.input_of(index);
  const LayerState& in_state = ctx.state(from);
  LayerState& s = ctx.state(index);
  const md flat({ctx.batch, ctx.layer(index).output.channels}, in_state.out.desc.data_type(), tag::ab);
  if (is_plain(in_state.out.desc)) {
    s.out = ctx.view(in_state.out, flat);
    s.exclusive = in_state.exclusive && in_state.consumers == 1;
    s.value_needed = in_state.value_needed;
    s.saved = {in_state.out};
  } else {
    const Tensor plain = ctx.ensure_plain(in_state.out, ctx.label(index, "input"));
    s.out = ctx.view(plain, flat);
    s.saved = {plain};
  }
}

void backward_flatten(Builder& ctx, int index) {
  const int from = ctx.input_of(index);
  const Tensor& dy = ctx.gradient(index);
  ctx.contribute(from, ctx.view(dy, ctx.state(index).saved[0].desc), true, ctx.label(index, "backward"));
}

}  // namespace crossbench::onednn
