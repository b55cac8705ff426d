// Softmax cross-entropy: a host loop over the (N, classes) logits in plain
// layout (a few thousand values; no primitive pays off). Computes the mean
// negative log-likelihood in double, and in training writes the gradient
// (softmax - onehot) / N straight into the logits' gradient.
#include <algorithm>
#include <cmath>

#include "crossbench/error.hpp"
#include "engines/onednn/graph.hpp"

namespace crossbench::onednn {

void build_loss(Builder& ctx, int index) {
  const int from = ctx.input_of(index);
  const Tensor plain = ctx.ensure_plain(ctx.state(from).out, ctx.label(index, "logits"));
  const std::int64_t images = ctx.batch, classes = elements_of(plain.desc) / ctx.batch;
  const Tensor logits = ctx.view(plain, md({images, classes}, plain.desc.data_type(), tag::ab));
  ctx.graph.logits = logits;
  ctx.graph.forward_end = ctx.graph.ops.size();

  const bool gradient = ctx.training && ctx.state(from).needs_grad;
  GradientSink sink;
  if (gradient) sink = ctx.begin_gradient(from, plain.desc, ctx.label(index, "gradient"));
  const Tensor dlogits = gradient ? sink.target : Tensor{};
  const dt type = plain.desc.data_type();
  const std::int32_t* labels = ctx.graph.labels.data();
  MemoryPool* pool = &ctx.graph.pool;
  RunState* state = ctx.graph.state.get();
  std::vector<Tensor> touches{logits};
  if (gradient) touches.push_back(dlogits);
  ctx.push_host(ctx.label(index, "forward"), touches, [=] {
    const void* x = pool->address(logits.buffer, logits.offset);
    void* dx = gradient ? pool->address(dlogits.buffer, dlogits.offset) : nullptr;
    double total = 0;
#pragma omp parallel for reduction(+ : total) schedule(static)
    for (std::int64_t n = 0; n < images; ++n) {
      const std::int64_t row = n * classes;
      double largest = -INFINITY;
      for (std::int64_t k = 0; k < classes; ++k) largest = std::max(largest, static_cast<double>(load(x, type, row + k)));
      double sum = 0;
      for (std::int64_t k = 0; k < classes; ++k) sum += std::exp(static_cast<double>(load(x, type, row + k)) - largest);
      const std::int64_t label = labels[n];
      total += largest + std::log(sum) - static_cast<double>(load(x, type, row + label));
      if (dx != nullptr)
        for (std::int64_t k = 0; k < classes; ++k) {
          const double p = std::exp(static_cast<double>(load(x, type, row + k)) - largest) / sum;
          store(dx, type, row + k, static_cast<float>((p - (k == label ? 1.0 : 0.0)) / static_cast<double>(images)));
        }
    }
    state->loss = total / static_cast<double>(images);
  });
  if (gradient) ctx.end_gradient(sink, ctx.label(index, "gradient"));
  ctx.graph.loss_end = ctx.graph.ops.size();
}

}  // namespace crossbench::onednn
