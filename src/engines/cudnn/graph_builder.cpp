// build_graph(): the pre-pass that decides in-place ops, fusions and concat
// placements; the walk over the layers forward, then backward; and the
// Builder helpers the per-layer builders share (tensors, ops, parameters,
// gradient plumbing).
#include <algorithm>
#include <climits>

#include "crossbench/error.hpp"
#include "engines/cudnn/graph.hpp"
#include "engines/cudnn/kernels_elementwise.hpp"

namespace crossbench::cudnn {

// ---- SetupContext --------------------------------------------------------------

void SetupContext::reserve_arena(std::int64_t x_bytes, std::int64_t w_bytes, std::int64_t y_bytes) {
  arena_x_ = std::max(arena_x_, x_bytes);
  arena_w_ = std::max(arena_w_, w_bytes);
  arena_y_ = std::max(arena_y_, y_bytes);
}

const SetupContext::Arena& SetupContext::arena() {
  if (arena_memory_.data() != nullptr) return arena_;
  const auto round = [](std::int64_t bytes) { return (bytes + 255) / 256 * 256; };
  const std::int64_t tensors = round(arena_x_) + round(arena_w_) + round(arena_y_);
  std::size_t free_bytes = 0, total_bytes = 0;
  CB_CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  // The search workspace: the configured limit, but never more than what is
  // free beside the tensors (less 256 MiB for cuDNN's own small allocations).
  const std::int64_t spare = static_cast<std::int64_t>(free_bytes) - tensors - (std::int64_t{256} << 20);
  const std::int64_t workspace = std::max<std::int64_t>(0, std::min(arena_limit_, spare));
  arena_memory_ = DeviceBuffer(static_cast<std::size_t>(tensors + workspace), "the algorithm search arena");
  arena_peak_ = tensors + workspace;
  char* base = arena_memory_.data();
  arena_.x = base;
  arena_.w = base + round(arena_x_);
  arena_.y = base + round(arena_x_) + round(arena_w_);
  arena_.workspace = workspace > 0 ? base + tensors : nullptr;
  arena_.workspace_bytes = static_cast<std::size_t>(workspace);
  // Synthetic values, as fp16 everywhere: small, finite and non-zero in every data type's bit patterns.
  kernels::fill_synthetic(base, DType::f16, {1, 1, 1, tensors / 2}, false, 1, 1, 1.0f, stream);
  CB_CHECK_CUDA(cudaStreamSynchronize(stream));
  return arena_;
}

// ---- Descriptors -----------------------------------------------------------------

TensorDesc describe_tensor(const Tensor& t) {
  for (int i = 0; i < 4; ++i)
    if (t.dims[static_cast<std::size_t>(i)] > INT_MAX || t.strides[static_cast<std::size_t>(i)] > INT_MAX)
      throw Error("cuDNN engine: tensor " + shape_text(t) +
                  " exceeds the 32-bit dimensions of cuDNN's tensor descriptors");
  TensorDesc desc = make_tensor_desc();
  CB_CHECK_CUDNN(cudnnSetTensor4dDescriptorEx(
      desc, cudnn_type(t.type), static_cast<int>(t.dims[0]), static_cast<int>(t.dims[1]), static_cast<int>(t.dims[2]),
      static_cast<int>(t.dims[3]), static_cast<int>(t.strides[0]), static_cast<int>(t.strides[1]),
      static_cast<int>(t.strides[2]), static_cast<int>(t.strides[3])));
  return desc;
}

cudnnActivationDescriptor_t relu_descriptor() {
  static const ActivationDesc relu = make_relu_desc();
  return relu;
}

// ---- Builder -------------------------------------------------------------------

Builder::Builder(const Network& network_, const CellSpec& cell_, const CudnnConfig& config_, MemoryPool& pool_,
                 std::vector<Op>& ops_, std::vector<Parameter>& parameters_,
                 std::vector<std::unique_ptr<LayerImpl>>& impls_)
    : network(network_), cell(cell_), config(config_), pool(pool_), ops(ops_), parameters(parameters_), impls(impls_),
      states(network_.layers().size()), training(cell_.phase == Phase::training),
      type(data_type_of(cell_.precision)), batch(cell_.batch) {
  // DESIGN.md: NCHW for strict fp32 (no tensor cores: cuDNN's NCHW fp32 kernels were 1.5-4x faster
  // than its NHWC ones on the H200), NHWC (tensor-core native) for tf32 and 16-bit (tf32 NHWC was
  // 1.09-1.67x faster than NCHW in every seed2017 cell: bench/results/2026-12-01/baseline), unless
  // --layout says otherwise.
  switch (config.layout) {
    case Layout::nchw: nhwc = false; break;
    case Layout::nhwc: nhwc = true; break;
    case Layout::automatic: nhwc = cell_.precision != Precision::fp32; break;
  }
}

std::array<std::int64_t, 4> Builder::dims_of(int index) const {
  const TensorShape& s = layer(index).output;
  return {batch, s.channels, s.height, s.width};
}

std::array<std::int64_t, 4> Builder::logical_dims(int index) const {
  int at = index;
  while (layer(at).kind == LayerKind::dropout) at = layer(at).inputs.front();
  if (layer(at).kind == LayerKind::flatten) return logical_dims(layer(at).inputs.front());
  return dims_of(at);
}

Tensor Builder::new_tensor(std::array<std::int64_t, 4> dims, DType t, const std::string& what, bool persistent) {
  Tensor tensor = Tensor::packed(dims, t, nhwc);
  tensor.buffer = pool.request(tensor.bytes(), persistent, what);
  return tensor;
}

Tensor Builder::new_output(int index, DType t) {
  LayerState& s = state(index);
  if (s.placement) {
    s.exclusive = false;  // its bytes are part of the concat's output
    return *s.placement;
  }
  return new_tensor(dims_of(index), t, label(index, "output"));
}

void Builder::push(int index, Stage stage, std::string what, const std::vector<Tensor>& tensors,
                   std::function<void(const Exec&)> run) {
  const std::size_t op_index = ops.size();
  for (const Tensor& t : tensors)
    if (t.valid()) pool.use(t.buffer, op_index);
  ops.push_back(Op{std::move(what), index, stage, std::move(run)});
}

int Builder::add_parameter(int index, synthetic::Slot slot, DType t, std::array<std::int64_t, 4> canonical_dims,
                           bool channels_last, Parameter::Init init, float scale, std::int64_t stored_channels) {
  static const char* slot_names[] = {"weight", "bias", "gamma", "beta", "mask"};
  const char* slot_name = slot_names[static_cast<int>(slot)];
  Parameter p;
  p.layer = index;
  p.slot = slot;
  p.canonical_dims = canonical_dims;
  p.channels_last = channels_last;
  p.init = init;
  p.scale = scale;
  std::array<std::int64_t, 4> stored = canonical_dims;
  if (channels_last && stored_channels > canonical_dims[1]) {
    p.stored_channels = stored_channels;
    stored[1] = stored_channels;
  }
  p.value = Tensor::packed(stored, t, channels_last);
  p.value.buffer = pool.request(p.value.bytes(), true, label(index, slot_name));
  if (training) {
    p.gradient = Tensor::packed(stored, t, channels_last);
    p.gradient.buffer = pool.request(p.gradient.bytes(), true, label(index, slot_name) + " gradient");
  }
  parameters.push_back(p);
  return static_cast<int>(parameters.size() - 1);
}

Builder::Sink Builder::gradient_sink(int tensor, const Tensor* alias) {
  LayerState& s = state(tensor);
  if (!s.needs_grad) throw Error("cuDNN engine: " + label(tensor, "output") + " needs no gradient");
  Sink sink;
  if (kit::take_contribution(s) == kit::Contribution::first_writes) {
    s.grad = alias != nullptr ? *alias : new_tensor(s.out.dims, type, label(tensor, "output gradient"));
    sink.beta = 0;
  } else {
    sink.beta = 1;
  }
  sink.target = *s.grad;
  return sink;
}

const Tensor& Builder::gradient(int index) {
  LayerState& s = state(index);
  if (!s.grad) throw Error("cuDNN engine: " + label(index, "output") + " receives no gradient from the loss");
  return *s.grad;
}

void Builder::contribute(int index, int tensor, const Tensor& g, bool may_alias, const std::string& what) {
  LayerState& s = state(tensor);
  if (!s.needs_grad) return;
  if (s.contributions == 0 && may_alias && g.type == type) {
    gradient_sink(tensor, &g);
    return;
  }
  const Sink sink = gradient_sink(tensor);
  // A copy for the first contribution, an accumulation after.
  auto copy = std::make_shared<TensorCopy>(g, sink.target, sink.beta);
  push(index, Stage::backward, what, {g, sink.target}, [copy](const Exec& e) { copy->run(e); });
}

void TensorCopy::run(const Exec& e) {
  if (!kernel_) {
    const cudnnStatus_t status =
        cudnnTransformTensor(e.dnn, &kOne, xd_.get(), e.ptr(x_), &beta_, yd_.get(), e.ptr(y_));
    if (status == CUDNN_STATUS_SUCCESS) return;
    const bool refused = status / 1000 == CUDNN_STATUS_NOT_SUPPORTED / 1000 ||
                         status / 1000 == CUDNN_STATUS_BAD_PARAM / 1000;
    if (!(e.probing && refused)) CB_CHECK_CUDNN(status);
    kernel_ = true;
  }
  kernels::strided_add(e.ptr(x_), x_.strides, e.ptr(y_), y_.strides, x_.dims, x_.type, beta_, e.stream);
}

// ---- build_graph ------------------------------------------------------------------
namespace {

// Layers whose backward reads their own output (so a relu may not overwrite it).
bool backward_reads_own_output(LayerKind kind) {
  return kind == LayerKind::max_pool || kind == LayerKind::avg_pool || kind == LayerKind::lrn ||
         kind == LayerKind::relu;
}

// Layers whose output is a view of their input's bytes.
bool is_view(LayerKind kind, bool training) {
  return kind == LayerKind::flatten || (kind == LayerKind::dropout && !training);
}

void forward_layer(Builder& b, int index) {
  switch (b.layer(index).kind) {
    case LayerKind::input: forward_input(b, index); break;
    case LayerKind::convolution: forward_convolution(b, index); break;
    case LayerKind::max_pool:
    case LayerKind::avg_pool: forward_pooling(b, index); break;
    case LayerKind::lrn: forward_lrn(b, index); break;
    case LayerKind::relu: forward_relu(b, index); break;
    case LayerKind::batch_norm: forward_batch_norm(b, index); break;
    case LayerKind::dropout: forward_dropout(b, index); break;
    case LayerKind::concat: forward_concat(b, index); break;
    case LayerKind::add: forward_add(b, index); break;
    case LayerKind::fully_connected: forward_fully_connected(b, index); break;
    case LayerKind::flatten: forward_flatten(b, index); break;
    case LayerKind::softmax_cross_entropy: break;  // build_loss
  }
}

void backward_layer(Builder& b, int index) {
  switch (b.layer(index).kind) {
    case LayerKind::convolution: backward_convolution(b, index); break;
    case LayerKind::max_pool:
    case LayerKind::avg_pool: backward_pooling(b, index); break;
    case LayerKind::lrn: backward_lrn(b, index); break;
    case LayerKind::relu: backward_relu(b, index); break;
    case LayerKind::batch_norm: backward_batch_norm(b, index); break;
    case LayerKind::dropout: backward_dropout(b, index); break;
    case LayerKind::concat: backward_concat(b, index); break;
    case LayerKind::add: backward_add(b, index); break;
    case LayerKind::fully_connected: backward_fully_connected(b, index); break;
    case LayerKind::flatten: backward_flatten(b, index); break;
    case LayerKind::input:
    case LayerKind::softmax_cross_entropy: break;
  }
}

// Runs one layer's builder; failures name the layer (OutOfMemory stays OutOfMemory).
template <typename Build>
void in_layer(Builder& b, int index, const char* what, Build&& build) {
  try {
    build();
  } catch (const OutOfMemory& e) {
    throw OutOfMemory(b.label(index, what) + ": " + e.what());
  } catch (const Error& e) {
    throw Error(b.label(index, what) + ": " + e.what());
  }
}

// Decides, before any tensor exists, which relus run in place (and may fuse
// into the convolution before them) and where concat inputs are written.
void pre_pass(Builder& b) {
  const int count = static_cast<int>(b.network.layers().size());
  kit::mark_consumers_and_gradients(b.network, b.training, b.states);
  // Inference: a batch-norm whose input only it reads, from a convolution, folds into it.
  if (!b.training)
    for (int index = 1; index < count; ++index) {
      if (b.layer(index).kind != LayerKind::batch_norm) continue;
      const int from = b.layer(index).inputs.front();
      if (from == 0 || b.layer(from).kind != LayerKind::convolution || b.state(from).consumers != 1) continue;
      b.state(from).folded_batch_norm = index;
      b.state(index).folded_into = from;
    }
  for (int index = 1; index < count; ++index) {
    const Layer& layer = b.layer(index);
    if (layer.kind != LayerKind::relu) continue;
    const int from = layer.inputs.front();
    const LayerKind from_kind = b.layer(from).kind;
    LayerState& s = b.state(index);
    s.in_place = from != 0 && b.state(from).consumers == 1 && !is_view(from_kind, b.training) &&
                 from_kind != LayerKind::concat && !(b.training && backward_reads_own_output(from_kind));
    if (s.in_place && (from_kind == LayerKind::convolution || from_kind == LayerKind::add))
      b.state(from).fusable_relu = index;
    if (s.in_place && b.state(from).folded_into >= 0) {
      b.state(from).fusable_relu = index;  // the relu after a folded batch-norm fuses into the convolution
      b.state(b.state(from).folded_into).fusable_relu = index;
    }
  }
  // Concat inputs written straight into their channel slice (NCHW: a slice is a
  // plain strided tensor that every cuDNN convolution takes). The producer is the
  // convolution under a chain of in-place relus, read by the concat alone.
  if (b.nhwc) return;
  for (int index = 1; index < count; ++index) {
    const Layer& layer = b.layer(index);
    if (layer.kind != LayerKind::concat) continue;
    std::int64_t first_channel = 0;
    for (int from : layer.inputs) {
      const std::int64_t channels = b.layer(from).output.channels;
      int producer = from;
      bool ok = b.state(from).consumers == 1;
      while (ok && b.layer(producer).kind == LayerKind::relu && b.state(producer).in_place)
        producer = b.layer(producer).inputs.front();
      ok = ok && b.layer(producer).kind == LayerKind::convolution && b.state(producer).consumers == 1 &&
           !b.state(producer).placement;
      if (ok) b.state(producer).placement = Tensor{};  // marked; the slice is made once the concat's tensor exists
      first_channel += channels;
    }
    (void)first_channel;
  }
}

// Creates the concat outputs that producers write into (before any forward op).
void place_concat_outputs(Builder& b) {
  const int count = static_cast<int>(b.network.layers().size());
  for (int index = 1; index < count; ++index) {
    const Layer& layer = b.layer(index);
    if (layer.kind != LayerKind::concat) continue;
    bool any = false;
    for (int from : layer.inputs) {
      int producer = from;
      while (b.layer(producer).kind == LayerKind::relu && b.state(producer).in_place)
        producer = b.layer(producer).inputs.front();
      any = any || b.state(producer).placement.has_value();
    }
    if (!any) continue;
    const Tensor out = b.new_tensor(b.dims_of(index), b.type, b.label(index, "output"));
    b.state(index).placement = out;  // the concat itself uses this tensor as its output
    std::int64_t first_channel = 0;
    for (int from : layer.inputs) {
      const std::int64_t channels = b.layer(from).output.channels;
      int producer = from;
      while (b.layer(producer).kind == LayerKind::relu && b.state(producer).in_place)
        producer = b.layer(producer).inputs.front();
      if (b.state(producer).placement) b.state(producer).placement = out.channel_slice(first_channel, channels);
      first_channel += channels;
    }
  }
}

}  // namespace

void build_graph(Builder& b) {
  const int count = static_cast<int>(b.network.layers().size());
  pre_pass(b);
  // Persistent session buffers.
  b.labels_buffer = b.pool.request(b.batch * 4, true, "labels");
  b.step_buffer = b.pool.request(8, true, "dropout step");
  b.row_loss_buffer = b.pool.request(b.batch * 4, true, "loss per image");
  place_concat_outputs(b);

  const int loss = count - 1;
  for (int index = 0; index < loss; ++index) in_layer(b, index, "forward", [&] { forward_layer(b, index); });
  b.forward_end = b.ops.size();
  in_layer(b, loss, "loss", [&] { build_loss(b, loss); });
  b.loss_end = b.ops.size();
  if (b.training)
    for (int index = loss - 1; index > 0; --index)
      if (b.state(index).needs_grad) in_layer(b, index, "backward", [&] { backward_layer(b, index); });
  b.backward_end = b.ops.size();
  if (b.training && b.config.update == Update::sgd) build_sgd(b);
  b.update_end = b.ops.size();
  if (b.training) {
    const Tensor step{{1, 1, 1, 1}, {1, 1, 1, 1}, DType::f64, false, b.step_buffer, 0};
    b.push(loss, Stage::bookkeeping, "advance the dropout step", {step}, [step](const Exec& e) {
      kernels::increment(e.ptr_as<std::uint64_t>(step), e.stream);
    });
  }
}

// ---- Input, flatten, update -------------------------------------------------------

void forward_input(Builder& b, int index) {
  LayerState& s = b.state(index);
  auto dims = b.dims_of(index);
  b.input_channels = dims[1];
  bool only_convolutions = true;
  for (const Layer& layer : b.network.layers())
    for (int from : layer.inputs)
      if (from == index) only_convolutions = only_convolutions && layer.kind == LayerKind::convolution;
  if (b.nhwc && b.type != DType::f32 && only_convolutions && dims[1] % 8 != 0) dims[1] = (dims[1] + 7) / 8 * 8;
  b.input = b.new_tensor(dims, b.type, "input batch", true);
  s.out = b.input;
  s.exclusive = false;  // reused by every step: never overwritten
}

void forward_flatten(Builder& b, int index) {
  const int from = b.input_of(index);
  const LayerState& in = b.state(from);
  if (!in.out.is_packed()) throw Error("flatten of a non-packed tensor " + shape_text(in.out));
  LayerState& s = b.state(index);
  s.out = in.out.reshaped(b.dims_of(index));
  s.exclusive = in.exclusive && in.consumers == 1;
  s.value_needed = in.value_needed;
}

void backward_flatten(Builder& b, int index) {
  const int from = b.input_of(index);
  const Tensor g = b.gradient(index).reshaped(b.dims_of(from));
  b.contribute(index, from, g, b.gradient(index).is_packed(), b.label(index, "backward"));
}

void build_sgd(Builder& b) {
  const float rate = static_cast<float>(b.config.learning_rate);
  for (const Parameter& p : b.parameters) {
    if (!p.gradient.valid()) continue;
    const Tensor value = p.value, gradient = p.gradient;
    b.push(p.layer, Stage::update, b.label(p.layer, "sgd update"), {value, gradient}, [=](const Exec& e) {
      kernels::sgd(e.ptr(value), e.ptr(gradient), value.type, value.elements(), rate, e.stream);
    });
  }
}

}  // namespace crossbench::cudnn
