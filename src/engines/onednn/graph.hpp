// The compiled form of a network for one cell: tensors placed in a MemoryPool,
// and a flat list of ops (oneDNN primitives or host loops) that one step runs
// in order. Built once by build_graph() in prepare(); step() only executes.
#pragma once

#include <any>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_version.h>

#include "crossbench/cell.hpp"
#include "crossbench/gradient_buckets.hpp"
#include "crossbench/engine.hpp"
#include "crossbench/network.hpp"
#include "crossbench/synthetic.hpp"
#include "engines/kit/fusion.hpp"
#include "engines/kit/graph_state.hpp"
#include "engines/onednn/dnnl_util.hpp"
#include "engines/onednn/memory_pool.hpp"

namespace crossbench::onednn {

// A tensor: its oneDNN layout and where its bytes are (a buffer of the pool,
// at an offset for views). Several tensors may share a buffer (in-place ops,
// views, reuse of dead buffers).
struct Tensor {
  md desc;
  int buffer = -1;
  std::size_t offset = 0;
  bool valid() const { return buffer >= 0; }
};

// One thing a step does: a primitive with its arguments, or a host loop
// (dropout, loss, SGD) for what oneDNN has no primitive.
// label, layer (whose work this is: reorders and gradient sums included) and
// stage (set once the graph is built, from the ranges below): crossbench/layer_time.hpp.
struct Op : OpTag {
  dnnl::primitive primitive;
  std::vector<std::pair<int, Tensor>> args;
  std::unordered_map<int, dnnl::memory> bound;  // args as memory objects, made once after allocation
  std::function<void()> host;
};

// A trainable tensor: its value and gradient in the layouts the primitives
// chose, and its canonical layout (synthetic.hpp) for initialisation and checks.
struct Parameter {
  int layer = 0;
  synthetic::Slot slot = synthetic::Slot::weight;
  Tensor value;
  Tensor gradient;
  md canonical;  // f32, oihw / oi / x
};

// What host ops read at run time and what they report back.
struct RunState {
  std::uint64_t dropout_step = 0;
  bool update_running_stats = true;  // batch-norm running statistics (not during check())
  double loss = std::numeric_limits<double>::quiet_NaN();
};

// Data-parallel training: this rank's shard of the global batch, and the
// averaging of its weight gradients. Host ops of the backward pass report each
// layer's gradients ready (buckets start as they fill); the last backward op
// waits for every average, before the update.
struct DataParallelState {
  Communicator* communicator = nullptr;
  std::unique_ptr<GradientBuckets> buckets;       // made once the gradients have addresses
  std::vector<std::size_t> bucket_tensor_of;      // Graph::parameters index → tensor index in `buckets`
  double last_exposed_ms = std::numeric_limits<double>::quiet_NaN();  // the last step's wait [ms]
};

// Options of a session: `fuse` is engine.fuse (--fuse); the others only tests change.
struct GraphOptions {
  bool reuse_memory = true;  // share buffers of tensors with disjoint lifetimes
  bool in_place = true;      // ReLU and residual add write over their input, gradients alias, when that is safe
  bool fuse = true;          // lower the kit's fused groups (kit/fusion.hpp); off: every layer its own primitive,
                             // the unfused reference the fusion tests compare against
};

struct Graph {
  dnnl::engine engine;
  dnnl::stream stream;
  MemoryPool pool;
  std::vector<Op> ops;
  // ops[0, forward_end) forward, [forward_end, loss_end) the loss (and its
  // gradient in training), [loss_end, backward_end) backward, then the update.
  std::size_t forward_end = 0, loss_end = 0, backward_end = 0;
  kit::FusionPlan fusions;  // the kit's fusion pass with this engine's answers; `decisions` prints it
  // conv_bn_add_relu: sum post-ops that accumulate into the residual's own tensor, and into a copy of it
  // (layer_convolution.cpp); `decisions` prints them as sum_post_op=into_residual:N,into_copy:M.
  int sums_into_residual = 0, sums_into_copy = 0;
  std::vector<Parameter> parameters;  // layer order; weight, bias, gamma, beta
  Tensor logits;                      // plain (N, classes), valid after the forward ops
  std::vector<std::int32_t> labels;
  std::unique_ptr<RunState> state = std::make_unique<RunState>();
  // Per layer: its output and (training) the gradient of the loss with respect to it.
  std::vector<Tensor> outputs, gradients;
  bool training = false;
  dt data_type = dt::f32;
  std::int64_t first_image = 0;                        // of the global synthetic batch (data parallel)
  std::unique_ptr<DataParallelState> data_parallel;   // null for a single-device cell
};

// Builds, plans, allocates and initialises the graph of a cell. Throws
// OutOfMemory (before allocating) when the plan does not fit in free memory.
// With `communicator`, a data-parallel graph (see DataParallelState).
std::unique_ptr<Graph> build_graph(const Network& network, const CellSpec& cell, const EngineConfig& config,
                                   const GraphOptions& options, Communicator* communicator = nullptr);

// ---- What the per-layer builders (layer_*.cpp) share --------------------------

// Bookkeeping of one layer's output while building.
struct LayerState : kit::LayerState<Tensor> {  // out, grad and the kit's flags (engines/kit/graph_state.hpp)
  std::any forward_pd;         // the layer's forward primitive descriptor: the hint of its backward
  std::vector<Tensor> saved;   // tensors the backward needs (src as used, workspace, mean, variance, mask)
  std::vector<int> parameters; // indices into Graph::parameters
};

// A place where a backward primitive writes the gradient for one of its inputs:
// straight into that input's gradient when it is the first contribution and the
// layouts agree, else a temporary that end_gradient() adds in.
struct GradientSink {
  int tensor = -1;
  Tensor target;
  bool direct = false;
};

class Builder {
 public:
  Builder(Graph& graph, const Network& network, const CellSpec& cell, const EngineConfig& config,
               const GraphOptions& options);

  Graph& graph;
  const Network& network;
  const CellSpec& cell;
  const EngineConfig& config;
  const GraphOptions& options;
  dnnl::primitive_attr attr;  // scratchpad_mode::user: scratchpads come from the pool
  dt data_type;
  bool training;
  std::int64_t batch;
  std::vector<LayerState> states;
  int current_layer = -1;  // the layer being built: every op pushed now is charged to it (Op::layer)

  const Layer& layer(int index) const { return network.layers()[static_cast<std::size_t>(index)]; }
  LayerState& state(int index) { return states[static_cast<std::size_t>(index)]; }
  LayerState& input_state(int index, int which = 0) { return state(layer(index).inputs[static_cast<std::size_t>(which)]); }
  int input_of(int index, int which = 0) const { return layer(index).inputs[static_cast<std::size_t>(which)]; }
  std::string label(int index, const char* what) const;

  // (N, C, H, W) of a layer's output for this batch.
  dims shape_of(int index) const;

  Tensor new_tensor(const md& desc, const std::string& label, bool persistent = false);
  Tensor view(const Tensor& t, const md& desc) const { return Tensor{desc, t.buffer, t.offset}; }

  // Appends a primitive (adds its scratchpad argument) / a host op to the step.
  void push_primitive(const std::string& label, const dnnl::primitive_desc_base& pd,
                      std::vector<std::pair<int, Tensor>> args);
  void push_host(const std::string& label, const std::vector<Tensor>& touches, std::function<void()> run);
  void push_reorder(const std::string& label, const Tensor& from, const Tensor& to);
  void push_accumulate(const std::string& label, const Tensor& into, const Tensor& add);  // into += add
  // `t` itself when its layout is `desc`, else a reordered copy made by a new op.
  Tensor ensure(const Tensor& t, const md& desc, const std::string& label);
  // A plain (row-major) version of `t`.
  Tensor ensure_plain(const Tensor& t, const std::string& label) { return ensure(t, plain_like(t.desc), label); }

  // Gradient plumbing (see GradientSink). `in_place` offers a buffer to alias
  // as the input's gradient (ReLU writes its input gradient over its output's).
  GradientSink begin_gradient(int tensor, const md& produced, const std::string& label,
                              const Tensor* in_place = nullptr);
  void end_gradient(const GradientSink& sink, const std::string& label);
  // A finished gradient `g` for tensor `tensor`; `may_alias` lets the tensor's
  // gradient be `g`'s buffer itself when it is the first contribution.
  void contribute(int tensor, const Tensor& g, bool may_alias, const std::string& label);
  // The complete gradient of a layer's output (all its consumers have contributed).
  const Tensor& gradient(int index);

  // A trainable tensor of `layer` in layout `desc`, initialised from synthetic
  // data after allocation; its gradient gets `gradient_desc`.
  int add_parameter(int layer, synthetic::Slot slot, const md& desc, const md& canonical);
  void set_parameter_gradient(int parameter, const md& desc);
  // Runs after allocation: initialisation of persistent buffers.
  void after_allocation(std::function<void()> run) { initialisers.push_back(std::move(run)); }

  // The kit's fused group `index` belongs to (graph.fusions), or nullptr; `fused(index, kind)`: in a group of `kind`.
  const kit::FusedGroup* fused(int index) const { return graph.fusions.group_of(index); }
  bool fused(int index, kit::FusedKind kind) const { return graph.fusions.in(index, kind); }
  // `attr` (user scratchpad) plus an eltwise ReLU post-op: what the anchor of a conv_bias_relu,
  // fc_bias_relu or add_relu group is built with, so that it writes relu(y) and the ReLU runs no op.
  dnnl::primitive_attr attr_with_relu() const { return attr_with_post_ops(false, true); }
  // `attr` plus, in this order, a sum post-op (dst = op(...) + dst: conv_bn_add_relu's residual add, the
  // destination holding the residual when the op runs) and an eltwise ReLU post-op.
  dnnl::primitive_attr attr_with_post_ops(bool sum, bool relu) const;
  // Whether layer `writer` may write over `input`'s output though others read it (kit::can_overwrite_once_read).
  bool can_overwrite_once_read(int input, int writer, int reads_the_result) {
    return options.in_place && kit::can_overwrite_once_read(network, state(input), input, writer, reads_the_result, training);
  }

  // Whether a layer may write its output over input `input` (kit::can_overwrite; tests may turn in-place off).
  bool can_overwrite(int input) { return options.in_place && kit::can_overwrite(state(input), input); }

  std::vector<std::function<void()>> initialisers;
  int scratchpad = -1;  // one buffer for every primitive's scratchpad: steps run one primitive at a time
};

// Per-layer builders (one file per layer family). forward_* appends the forward
// ops and sets state(index).out; backward_* appends the ops that turn the
// gradient of the output into gradients of the inputs and parameters.
void forward_input(Builder& ctx, int index);
void forward_convolution(Builder& ctx, int index);
void backward_convolution(Builder& ctx, int index);
void forward_fully_connected(Builder& ctx, int index);
void backward_fully_connected(Builder& ctx, int index);
void forward_pooling(Builder& ctx, int index);
void backward_pooling(Builder& ctx, int index);
void forward_lrn(Builder& ctx, int index);
void backward_lrn(Builder& ctx, int index);
void forward_relu(Builder& ctx, int index);  // also the ReLU of a fused group: no op, its producer applied it
void backward_relu(Builder& ctx, int index);
void forward_batch_norm(Builder& ctx, int index);
void backward_batch_norm(Builder& ctx, int index);
void forward_dropout(Builder& ctx, int index);
void backward_dropout(Builder& ctx, int index);
void forward_concat(Builder& ctx, int index);
void backward_concat(Builder& ctx, int index);
void forward_add(Builder& ctx, int index);
void backward_add(Builder& ctx, int index);
void forward_flatten(Builder& ctx, int index);
void backward_flatten(Builder& ctx, int index);
// The loss op computes the mean cross-entropy and, in training, its gradient.
void build_loss(Builder& ctx, int index);
void build_sgd(Builder& ctx);

// conv_bn_relu's fold (inference): a batch-norm (gamma, beta, running mean and variance, epsilon) after a
// convolution whose weights are OIHW (output channel outermost) and whose bias is `bias` (zeros without
// one) becomes that convolution with weights w * s and bias (bias - mean) * s + beta, per output channel
// s = gamma / sqrt(variance + epsilon). Both vectors are rewritten.
void fold_batch_norm(std::vector<float>& weights, std::vector<float>& bias, const std::vector<float>& gamma,
                     const std::vector<float>& beta, const std::vector<float>& mean, const std::vector<float>& variance,
                     double epsilon);

}  // namespace crossbench::onednn
