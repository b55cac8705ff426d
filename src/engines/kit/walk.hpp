// The one walk over a network that both native engines build their step
// with: every layer's forward in network order, the loss, every layer's
// backward in reverse order where a gradient flows (needs-grad), the update,
// and the end of the step; the layer-kind dispatch is written here once. An
// engine provides only its lowering of each layer kind (LayerLowering) and
// marks where each stage's ops end. Errors are named with the layer and the
// stage ("res2a_branch2a forward: ..."); OutOfMemory stays OutOfMemory so the
// cell's answer is `oom`.
#pragma once

#include <new>
#include <string>

#include "crossbench/error.hpp"
#include "crossbench/network.hpp"

namespace crossbench::kit {

// One engine's lowering of every layer kind. Layers with nothing to do in a
// stage keep the default (no op).
class LayerLowering {
 public:
  virtual ~LayerLowering() = default;
  virtual void forward_input(int /*layer*/) {}
  virtual void forward_convolution(int layer) = 0;
  virtual void forward_pooling(int layer) = 0;  // max and average
  virtual void forward_lrn(int layer) = 0;
  virtual void forward_relu(int layer) = 0;
  virtual void forward_batch_norm(int layer) = 0;
  virtual void forward_dropout(int layer) = 0;
  virtual void forward_concat(int layer) = 0;
  virtual void forward_add(int layer) = 0;
  virtual void forward_fully_connected(int layer) = 0;
  virtual void forward_flatten(int layer) = 0;
  virtual void loss(int layer) = 0;  // the softmax-cross-entropy (and, training, its gradient)
  virtual void backward_convolution(int layer) = 0;
  virtual void backward_pooling(int layer) = 0;
  virtual void backward_lrn(int layer) = 0;
  virtual void backward_relu(int layer) = 0;
  virtual void backward_batch_norm(int layer) = 0;
  virtual void backward_dropout(int layer) = 0;
  virtual void backward_concat(int layer) = 0;
  virtual void backward_add(int layer) = 0;
  virtual void backward_fully_connected(int layer) = 0;
  virtual void backward_flatten(int layer) = 0;
  // After a layer's backward: its parameters' gradients are final (data parallel: ready to average).
  virtual void gradients_final(int /*layer*/) {}
  // After the last backward op: the end of the backward pass (data parallel: wait for the averages).
  virtual void backward_done() {}
  virtual void update() = 0;        // --update sgd
  virtual void end_of_step() {}     // bookkeeping after everything else (the dropout step counter)
  virtual bool needs_grad(int layer) const = 0;
  // Where each stage's ops end (indices into the engine's op list).
  enum class Mark { forward_end, loss_end, backward_end, update_end };
  virtual void mark(Mark /*where*/) {}
  // Before each layer's lowering in any stage (an engine that tags its ops with the current layer).
  virtual void entering(int /*layer*/) {}
  // An engine whose library throws its own exception type turns it into a crossbench error here.
  virtual void rethrow_as_error(const std::string& /*context*/) { throw; }
};

namespace detail {

inline void forward_layer(LayerLowering& lower, LayerKind kind, int index) {
  switch (kind) {
    case LayerKind::input: lower.forward_input(index); break;
    case LayerKind::convolution: lower.forward_convolution(index); break;
    case LayerKind::max_pool:
    case LayerKind::avg_pool: lower.forward_pooling(index); break;
    case LayerKind::lrn: lower.forward_lrn(index); break;
    case LayerKind::relu: lower.forward_relu(index); break;
    case LayerKind::batch_norm: lower.forward_batch_norm(index); break;
    case LayerKind::dropout: lower.forward_dropout(index); break;
    case LayerKind::concat: lower.forward_concat(index); break;
    case LayerKind::add: lower.forward_add(index); break;
    case LayerKind::fully_connected: lower.forward_fully_connected(index); break;
    case LayerKind::flatten: lower.forward_flatten(index); break;
    case LayerKind::softmax_cross_entropy: lower.loss(index); break;
  }
}

inline void backward_layer(LayerLowering& lower, LayerKind kind, int index) {
  switch (kind) {
    case LayerKind::convolution: lower.backward_convolution(index); break;
    case LayerKind::max_pool:
    case LayerKind::avg_pool: lower.backward_pooling(index); break;
    case LayerKind::lrn: lower.backward_lrn(index); break;
    case LayerKind::relu: lower.backward_relu(index); break;
    case LayerKind::batch_norm: lower.backward_batch_norm(index); break;
    case LayerKind::dropout: lower.backward_dropout(index); break;
    case LayerKind::concat: lower.backward_concat(index); break;
    case LayerKind::add: lower.backward_add(index); break;
    case LayerKind::fully_connected: lower.backward_fully_connected(index); break;
    case LayerKind::flatten: lower.backward_flatten(index); break;
    case LayerKind::input:
    case LayerKind::softmax_cross_entropy: break;
  }
}

// Runs one layer's lowering; failures name the layer and stage (OutOfMemory stays OutOfMemory).
template <typename Build>
void in_layer(LayerLowering& lower, int index, const Layer& layer, const char* stage, Build&& build) {
  const std::string context = layer.name + " " + stage;
  lower.entering(index);
  try {
    try {
      build();
    } catch (const Error&) {
      throw;
    } catch (const std::bad_alloc&) {
      throw OutOfMemory("host allocation failed");
    } catch (...) {
      lower.rethrow_as_error(context);
    }
  } catch (const OutOfMemory& e) {
    throw OutOfMemory(context + ": " + e.what());
  } catch (const Error& e) {
    throw Error(context + ": " + e.what());
  }
}

}  // namespace detail

// The walk. `training`: backward over needs-grad layers; `update`: --update sgd.
inline void walk_network(const Network& network, bool training, bool update, LayerLowering& lower) {
  const int count = static_cast<int>(network.layers().size());
  const int loss = count - 1;
  auto layer = [&](int index) -> const Layer& { return network.layers()[static_cast<std::size_t>(index)]; };
  for (int index = 0; index < loss; ++index)
    detail::in_layer(lower, index, layer(index), "forward", [&] { detail::forward_layer(lower, layer(index).kind, index); });
  lower.mark(LayerLowering::Mark::forward_end);
  detail::in_layer(lower, loss, layer(loss), "loss", [&] { lower.loss(loss); });
  lower.mark(LayerLowering::Mark::loss_end);
  if (training) {
    for (int index = loss - 1; index > 0; --index) {
      if (!lower.needs_grad(index)) continue;
      detail::in_layer(lower, index, layer(index), "backward", [&] {
        detail::backward_layer(lower, layer(index).kind, index);
        lower.gradients_final(index);
      });
    }
    lower.backward_done();
  }
  lower.mark(LayerLowering::Mark::backward_end);
  if (training && update) lower.update();
  lower.mark(LayerLowering::Mark::update_end);
  if (training) lower.end_of_step();
}

}  // namespace crossbench::kit
