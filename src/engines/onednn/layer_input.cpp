// The input batch: plain NCHW in the cell's data type, generated once at
// prepare (synthetic::input) and read by every step.
#include "engines/onednn/graph.hpp"

namespace crossbench::onednn {

void forward_input(Builder& ctx, int index) {
  const Tensor batch = ctx.new_tensor(plain_md(ctx.shape_of(index), ctx.data_type), ctx.label(index, "batch"), true);
  ctx.state(index).out = batch;
  Graph& graph = ctx.graph;
  const Network& network = ctx.network;
  const std::int64_t images = ctx.batch;
  const std::uint64_t seed = ctx.config.seed;
  const std::int64_t first_image = graph.first_image;
  ctx.after_allocation([&graph, &network, batch, images, seed, first_image] {
    std::vector<float> values = synthetic::input(network, images, seed, first_image);
    dnnl::memory from(plain_md(batch.desc.dims(), dt::f32), graph.engine, values.data());
    dnnl::memory to(batch.desc, graph.engine, graph.pool.address(batch.buffer, batch.offset));
    dnnl::reorder(from, to).execute(graph.stream, from, to);
    graph.stream.wait();
  });
}

}  // namespace crossbench::onednn
