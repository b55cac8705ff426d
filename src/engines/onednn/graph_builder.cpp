// build_graph(): the driver that walks the network forward (and backward in
// training), and the Builder helpers the per-layer builders share.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <sstream>

#include "crossbench/error.hpp"
#include "engines/onednn/graph.hpp"
#include "engines/kit/fusion.hpp"
#include "engines/kit/walk.hpp"

namespace crossbench::onednn {

// ---- Builder -------------------------------------------------------------

Builder::Builder(Graph& graph_, const Network& network_, const CellSpec& cell_, const EngineConfig& config_,
                           const GraphOptions& options_)
    : graph(graph_), network(network_), cell(cell_), config(config_), options(options_),
      data_type(data_type_of(cell_.precision)), training(cell_.phase == Phase::training), batch(cell_.batch),
      states(network_.layers().size()) {
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
}

dnnl::primitive_attr Builder::attr_with_post_ops(bool sum, bool relu) const {
  // A fresh attribute: primitive_attr copies share one handle, and `attr` itself must stay without post-ops.
  dnnl::primitive_attr fused;
  CB_CHECK_DNNL(fused.set_scratchpad_mode(dnnl::scratchpad_mode::user));
  dnnl::post_ops ops;
  if (sum) CB_CHECK_DNNL(ops.append_sum(1.f));
  if (relu) CB_CHECK_DNNL(ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f));
  CB_CHECK_DNNL(fused.set_post_ops(ops));
  return fused;
}

std::string Builder::label(int index, const char* what) const {
  return "layer '" + layer(index).name + "' (" + std::string(to_string(layer(index).kind)) + ") " + what;
}

dims Builder::shape_of(int index) const {
  const TensorShape& s = layer(index).output;
  return {batch, s.channels, s.height, s.width};
}

Tensor Builder::new_tensor(const md& desc, const std::string& what, bool persistent) {
  return Tensor{desc, graph.pool.request(desc.get_size(), persistent, what), 0};
}

void Builder::push_primitive(const std::string& what, const dnnl::primitive_desc_base& pd,
                                  std::vector<std::pair<int, Tensor>> args) {
  Op op;
  op.label = what;
  op.layer = current_layer;
  op.primitive = CB_CHECK_DNNL(dnnl::primitive(pd.get()));
  const md scratch = pd.scratchpad_desc();
  if (scratch.get_size() > 0) {
    if (scratchpad < 0) scratchpad = graph.pool.request(0, true, "scratchpad");
    graph.pool.grow(scratchpad, scratch.get_size());
    args.emplace_back(DNNL_ARG_SCRATCHPAD, Tensor{scratch, scratchpad, 0});
  }
  const std::size_t index = graph.ops.size();
  for (const auto& [arg, tensor] : args) graph.pool.use(tensor.buffer, index);
  op.args = std::move(args);
  graph.ops.push_back(std::move(op));
}

void Builder::push_host(const std::string& what, const std::vector<Tensor>& touches, std::function<void()> run) {
  Op op;
  op.label = what;
  op.layer = current_layer;
  op.host = std::move(run);
  const std::size_t index = graph.ops.size();
  for (const Tensor& t : touches) graph.pool.use(t.buffer, index);
  graph.ops.push_back(std::move(op));
}

void Builder::push_reorder(const std::string& what, const Tensor& from, const Tensor& to) {
  if (from.desc == to.desc && from.desc.data.offset0 == 0) {
    // Same layout: a plain parallel copy (oneDNN's generic reorder is slower at it).
    const std::size_t bytes = to.desc.get_size();
    MemoryPool* pool = &graph.pool;
    push_host(what + " (copy)", {from, to}, [pool, from, to, bytes] {
      const auto* source = static_cast<const std::byte*>(pool->address(from.buffer, from.offset));
      auto* target = static_cast<std::byte*>(pool->address(to.buffer, to.offset));
      constexpr std::size_t chunk = 256 * 1024;
      const auto chunks = static_cast<std::int64_t>((bytes + chunk - 1) / chunk);
#pragma omp parallel for schedule(static)
      for (std::int64_t c = 0; c < chunks; ++c) {
        const std::size_t begin = static_cast<std::size_t>(c) * chunk;
        std::memcpy(target + begin, source + begin, std::min(chunk, bytes - begin));
      }
    });
    return;
  }
  const auto pd = CB_CHECK_DNNL(dnnl::reorder::primitive_desc(graph.engine, from.desc, graph.engine, to.desc, attr));
  push_primitive(what + " (reorder)", pd, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
}

void Builder::push_accumulate(const std::string& what, const Tensor& into, const Tensor& add) {
  const Tensor addend = ensure(add, into.desc, what);
  const dnnl::binary::desc desc(dnnl::algorithm::binary_add, into.desc, addend.desc, into.desc);
  const auto pd = CB_CHECK_DNNL(dnnl::binary::primitive_desc(desc, attr, graph.engine));
  push_primitive(what + " (accumulate)", pd, {{DNNL_ARG_SRC_0, into}, {DNNL_ARG_SRC_1, addend}, {DNNL_ARG_DST, into}});
}

Tensor Builder::ensure(const Tensor& t, const md& desc, const std::string& what) {
  if (t.desc == desc) return t;
  Tensor copy = new_tensor(desc, what + " (reordered copy)");
  push_reorder(what, t, copy);
  return copy;
}

GradientSink Builder::begin_gradient(int tensor, const md& produced, const std::string& what,
                                          const Tensor* in_place) {
  LayerState& s = state(tensor);
  if (s.contributions == 0 && produced == s.out.desc) {  // the first contribution, written in place
    kit::take_contribution(s);
    s.grad = in_place && options.in_place ? view(*in_place, s.out.desc)
                                          : new_tensor(s.out.desc, label(tensor, "output gradient"));
    return {tensor, *s.grad, true};
  }
  return {tensor, new_tensor(produced, what + " partial gradient"), false};
}

void Builder::end_gradient(const GradientSink& sink, const std::string& what) {
  if (!sink.direct) contribute(sink.tensor, sink.target, true, what);
}

void Builder::contribute(int tensor, const Tensor& g, bool may_alias, const std::string& what) {
  LayerState& s = state(tensor);
  if (!s.needs_grad) return;
  if (kit::take_contribution(s) == kit::Contribution::first_writes) {
    if (may_alias && options.in_place && g.desc == s.out.desc) {
      s.grad = g;
    } else {
      s.grad = new_tensor(s.out.desc, label(tensor, "output gradient"));
      push_reorder(what, g, *s.grad);
    }
  } else {
    push_accumulate(what, *s.grad, g);
  }
}

const Tensor& Builder::gradient(int index) {
  LayerState& s = state(index);
  if (!s.grad)
    throw Error("oneDNN engine: " + label(index, "output") + " receives no gradient: it does not reach the loss");
  return *s.grad;
}

int Builder::add_parameter(int index, synthetic::Slot slot, const md& desc, const md& canonical) {
  Parameter p;
  p.layer = index;
  p.slot = slot;
  p.canonical = canonical;
  static const char* slot_names[] = {"weight", "bias", "gamma", "beta", "mask"};
  p.value = new_tensor(desc, label(index, slot_names[static_cast<int>(slot)]), true);
  graph.parameters.push_back(p);
  const int id = static_cast<int>(graph.parameters.size() - 1);
  state(index).parameters.push_back(id);
  after_allocation([this, id] {
    const Parameter& q = graph.parameters[static_cast<std::size_t>(id)];
    std::vector<float> values = synthetic::parameter(network, q.layer, q.slot, config.seed);
    dnnl::memory from(q.canonical, graph.engine, values.data());
    dnnl::memory to(q.value.desc, graph.engine, graph.pool.address(q.value.buffer, q.value.offset));
    dnnl::reorder(from, to).execute(graph.stream, from, to);
    graph.stream.wait();
  });
  return id;
}

void Builder::set_parameter_gradient(int parameter, const md& desc) {
  Parameter& p = graph.parameters[static_cast<std::size_t>(parameter)];
  p.gradient = new_tensor(desc, label(p.layer, "parameter gradient"), true);
}

// ---- build_graph --------------------------------------------------------------
namespace {

// Data parallel: after a layer's backward ops, its parameters' gradients are final.
void push_gradients_ready(Builder& ctx, int index) {
  DataParallelState* data_parallel = ctx.graph.data_parallel.get();
  std::vector<std::size_t> parameters(ctx.state(index).parameters.begin(), ctx.state(index).parameters.end());
  std::vector<Tensor> gradients;
  for (const std::size_t p : parameters) gradients.push_back(ctx.graph.parameters[p].gradient);
  ctx.push_host(ctx.label(index, "gradients ready"), gradients, [data_parallel, parameters] {
    for (const std::size_t p : parameters) data_parallel->buckets->ready(data_parallel->bucket_tensor_of[p], nullptr);
  });
}

// Data parallel: the end of the backward pass waits for every average; the
// wait is the step's exposed communication.
void push_wait_for_averages(Builder& ctx) {
  DataParallelState* data_parallel = ctx.graph.data_parallel.get();
  std::vector<Tensor> gradients;  // live until here, whatever the pool would otherwise reuse
  for (const Parameter& p : ctx.graph.parameters) gradients.push_back(p.gradient);
  ctx.push_host("wait for the gradient averages", gradients, [data_parallel] {
    const auto start = std::chrono::steady_clock::now();
    data_parallel->buckets->finish(nullptr);
    data_parallel->last_exposed_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  });
}

// The buckets over the gradients' memory, in backward order (last layer first).
void make_gradient_buckets(Graph& graph, const EngineConfig& config) {
  DataParallelState& data_parallel = *graph.data_parallel;
  std::vector<GradientTensor> tensors;
  data_parallel.bucket_tensor_of.assign(graph.parameters.size(), 0);
  for (std::size_t p = graph.parameters.size(); p-- > 0;) {
    const Tensor& gradient = graph.parameters[p].gradient;
    if (gradient.desc.data_type() != dt::f32)
      throw Unsupported("oneDNN data parallel averages fp32 gradients; this cell's are not fp32");
    data_parallel.bucket_tensor_of[p] = tensors.size();
    tensors.push_back({graph.pool.address(gradient.buffer, gradient.offset), gradient.desc.get_size() / sizeof(float),
                       ElementType::f32});
  }
  data_parallel.buckets = std::make_unique<GradientBuckets>(*data_parallel.communicator, std::move(tensors),
                                                            static_cast<std::size_t>(config.bucket_bytes));
}

// What this engine lowers of the kit's fusion groups (kit/fusion.hpp), or why not.
// The forward of each lowered group is one primitive: the anchor with an eltwise
// ReLU post-op (conv_bias_relu, fc_bias_relu, add_relu; conv_bn_relu, inference
// only, with the batch-norm folded into the convolution's weights and bias), or
// batch-norm with fuse_norm_relu (bn_relu, whose backward is fused too: the
// workspace holds the ReLU's mask). oneDNN 2.x has no backward post-ops, so the
// other groups' dReLU stays an eltwise backward that reads the fused output
// (use_dst_for_bwd), and conv_bias_relu_pool is refused (the kit then
// proposes conv_bias_relu). conv_bn_add_relu (inference) is the folded
// convolution with a sum post-op then the ReLU post-op: its destination holds
// the residual when it runs (layer_convolution.cpp).
std::optional<std::string> can_lower(const kit::FusedGroup& g, const GraphOptions& options, bool training) {
  if (!options.fuse) return "fusion turned off (--fuse false)";
  switch (g.kind) {
    case kit::FusedKind::conv_bias_relu:
    case kit::FusedKind::fc_bias_relu:
    case kit::FusedKind::add_relu:
    case kit::FusedKind::bn_relu: return std::nullopt;
    case kit::FusedKind::conv_bn_relu:  // the kit proposes it in inference only
      if (training) return "training: batch statistics change every step, so they cannot be folded into weights";
      return std::nullopt;
    case kit::FusedKind::bn_add_relu:
      return "oneDNN " + std::to_string(DNNL_VERSION_MAJOR) + "." + std::to_string(DNNL_VERSION_MINOR) + "." +
             std::to_string(DNNL_VERSION_PATCH) +
             " has no batch-norm with a fused residual add (normalization_flags::fuse_norm_add_relu is oneDNN 3's)";
    case kit::FusedKind::conv_bn_add_relu:  // the kit proposes it in inference only
      // The folded convolution with a sum post-op (accumulating into the residual's bytes, or a copy of
      // them where the residual is still to be read or its layout differs) and the ReLU post-op.
      if (training) return "training: batch statistics change every step, so they cannot be folded into weights";
      return std::nullopt;
    case kit::FusedKind::conv_bias_relu_pool:  // the kit proposes it in training only
      return "oneDNN's pooling backward takes no post-op (no dReLU folded into it): conv_bias_relu, then its pooling";
  }
  return "unknown group";
}

// This engine's lowering of each layer kind (layer_*.cpp), walked by the kit (kit/walk.hpp).
class OnednnLowering final : public kit::LayerLowering {
 public:
  explicit OnednnLowering(Builder& ctx) : ctx_(ctx), data_parallel_(ctx.graph.data_parallel.get()) {}
  void entering(int i) override { ctx_.current_layer = i; }
  void forward_input(int i) override { onednn::forward_input(ctx_, i); }
  void forward_convolution(int i) override { onednn::forward_convolution(ctx_, i); }
  void forward_pooling(int i) override { onednn::forward_pooling(ctx_, i); }
  void forward_lrn(int i) override { onednn::forward_lrn(ctx_, i); }
  void forward_relu(int i) override { onednn::forward_relu(ctx_, i); }
  void forward_batch_norm(int i) override { onednn::forward_batch_norm(ctx_, i); }
  void forward_dropout(int i) override { onednn::forward_dropout(ctx_, i); }
  void forward_concat(int i) override { onednn::forward_concat(ctx_, i); }
  void forward_add(int i) override { onednn::forward_add(ctx_, i); }
  void forward_fully_connected(int i) override { onednn::forward_fully_connected(ctx_, i); }
  void forward_flatten(int i) override { onednn::forward_flatten(ctx_, i); }
  void loss(int i) override { build_loss(ctx_, i); }  // sets forward_end and loss_end
  void backward_convolution(int i) override { onednn::backward_convolution(ctx_, i); }
  void backward_pooling(int i) override { onednn::backward_pooling(ctx_, i); }
  void backward_lrn(int i) override { onednn::backward_lrn(ctx_, i); }
  void backward_relu(int i) override { onednn::backward_relu(ctx_, i); }
  void backward_batch_norm(int i) override { onednn::backward_batch_norm(ctx_, i); }
  void backward_dropout(int i) override { onednn::backward_dropout(ctx_, i); }
  void backward_concat(int i) override { onednn::backward_concat(ctx_, i); }
  void backward_add(int i) override { onednn::backward_add(ctx_, i); }
  void backward_fully_connected(int i) override { onednn::backward_fully_connected(ctx_, i); }
  void backward_flatten(int i) override { onednn::backward_flatten(ctx_, i); }
  void gradients_final(int i) override {
    if (data_parallel_ && !ctx_.state(i).parameters.empty()) push_gradients_ready(ctx_, i);
  }
  void backward_done() override {
    if (data_parallel_) push_wait_for_averages(ctx_);
  }
  void update() override { build_sgd(ctx_); }
  bool needs_grad(int i) const override { return ctx_.state(i).needs_grad; }
  void mark(Mark where) override {
    if (where == Mark::backward_end) ctx_.graph.backward_end = ctx_.graph.ops.size();
  }
  void rethrow_as_error(const std::string& context) override {
    try {
      throw;
    } catch (const dnnl::error& e) {
      throw_library_error("oneDNN", context, __FILE__, __LINE__, e.what(), e.status == dnnl_out_of_memory);
    }
  }

 private:
  Builder& ctx_;
  DataParallelState* data_parallel_;
};

std::string cell_text(const Network& network, const CellSpec& cell) {
  return "oneDNN " + network.name() + " " + std::string(to_string(cell.phase)) + " " +
         std::string(to_string(cell.precision)) + " batch " + std::to_string(cell.batch);
}

// A lower bound of what the cell needs, checked before building anything, so
// an absurd batch is refused at once (and never reaches oneDNN with dims that
// could overflow its kernels' index arithmetic).
void check_lower_bound(const Network& network, const CellSpec& cell, std::size_t available) {
  const double element = static_cast<double>(size_of(data_type_of(cell.precision)));
  const bool training = cell.phase == Phase::training;
  double largest_activation = 0;
  for (const Layer& layer : network.layers())
    largest_activation = std::max(largest_activation, static_cast<double>(layer.output.elements()));
  const double needed = static_cast<double>(network.parameters()) * element * (training ? 2 : 1) +
                        static_cast<double>(cell.batch) * largest_activation * element * (training ? 2 : 1);
  if (needed > static_cast<double>(available)) {
    std::ostringstream text;
    text << cell_text(network, cell) << " needs at least " << format_bytes(needed) << " (" << static_cast<double>(needed)
         << " bytes: weights" << (training ? ", their gradients" : "")
         << " and the largest activation), but only " << format_bytes(static_cast<double>(available))
         << " is available (MemAvailable / cgroup limit); nothing was allocated";
    throw OutOfMemory(text.str());
  }
}

}  // namespace

std::unique_ptr<Graph> build_graph(const Network& network, const CellSpec& cell, const EngineConfig& config,
                                   const GraphOptions& options, Communicator* communicator) {
  if (cell.batch <= 0) throw Error("oneDNN engine: batch must be positive, got " + std::to_string(cell.batch));
  check_lower_bound(network, cell, available_memory_bytes());

  auto graph = std::make_unique<Graph>();
  graph->engine = CB_CHECK_DNNL(dnnl::engine(dnnl::engine::kind::cpu, 0));
  graph->stream = CB_CHECK_DNNL(dnnl::stream(graph->engine));
  graph->training = cell.phase == Phase::training;
  graph->data_type = data_type_of(cell.precision);
  if (communicator != nullptr) {
    if (!graph->training) throw Error("oneDNN engine: data parallel applies to training cells only");
    graph->data_parallel = std::make_unique<DataParallelState>();
    graph->data_parallel->communicator = communicator;
    graph->first_image = static_cast<std::int64_t>(communicator->rank()) * cell.batch;
  }
  graph->labels = synthetic::labels(network, cell.batch, config.seed, graph->first_image);
  const int count = static_cast<int>(network.layers().size());
  graph->outputs.resize(static_cast<std::size_t>(count));
  graph->gradients.resize(static_cast<std::size_t>(count));

  Builder ctx(*graph, network, cell, config, options);
  kit::mark_consumers_and_gradients(network, ctx.training, ctx.states);
  graph->fusions = kit::plan_fusions(network, ctx.training,
                                     [&options, &ctx](const kit::FusedGroup& g) { return can_lower(g, options, ctx.training); });
  OnednnLowering lowering(ctx);
  kit::walk_network(network, ctx.training, config.update == Update::sgd, lowering);
  // A fused group writes only its last layer's output: the others' values never exist (tests skip them).
  for (int index = 0; index < count - 1; ++index) {
    const kit::FusedGroup* group = graph->fusions.group_of(index);
    if (group == nullptr || group->layers.back() == index)
      graph->outputs[static_cast<std::size_t>(index)] = ctx.state(index).out;
  }
  for (std::size_t i = 0; i < graph->ops.size(); ++i) {
    Op& op = graph->ops[i];
    // --layer-times charges every op to a layer: none may be left out. The
    // loss (and its gradient) is the loss layer's forward; the backward and
    // the update (--update sgd) their layers' backward.
    if (op.layer < 0 || op.layer >= count)
      throw Error("oneDNN engine: op '" + op.label + "' belongs to no layer (a builder bug)");
    op.stage = i < graph->forward_end    ? OpStage::forward
               : i < graph->loss_end     ? OpStage::loss
               : i < graph->backward_end ? OpStage::backward
                                         : OpStage::update;
  }
  for (int index = 0; index < count; ++index)
    if (ctx.state(index).grad) graph->gradients[static_cast<std::size_t>(index)] = *ctx.state(index).grad;

  // Plan, check against free memory, allocate, bind, initialise.
  graph->pool.plan(options.reuse_memory);
  std::size_t transient = 0;  // the largest canonical fp32 parameter, generated during initialisation
  for (const Parameter& p : graph->parameters) transient = std::max(transient, p.canonical.get_size());
  std::size_t available = available_memory_bytes();
  available = available > transient ? available - transient : 0;
  graph->pool.allocate(available, cell_text(network, cell));
  try {
    for (Op& op : graph->ops)
      for (const auto& [arg, tensor] : op.args)
        op.bound.emplace(arg, dnnl::memory(tensor.desc, graph->engine, graph->pool.address(tensor.buffer, tensor.offset)));
    for (auto& initialise : ctx.initialisers) initialise();
    if (graph->data_parallel) make_gradient_buckets(*graph, config);
  } catch (const dnnl::error& e) {
    throw_library_error("oneDNN", "binding and initialising tensors", __FILE__, __LINE__, e.what(),
                        e.status == dnnl_out_of_memory);
  } catch (const std::bad_alloc&) {
    throw OutOfMemory(cell_text(network, cell) + ": host allocation failed while initialising the weights");
  }
  return graph;
}

}  // namespace crossbench::onednn
