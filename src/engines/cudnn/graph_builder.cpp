// build_graph(): the pre-pass that decides in-place ops, fusions and concat
// placements; the walk over the layers forward, then backward; and the
// Builder helpers the per-layer builders share (tensors, ops, parameters,
// gradient plumbing).
#include <algorithm>
#include <climits>
#include <optional>
#include <string>

#include "crossbench/error.hpp"
#include "engines/cudnn/graph.hpp"
#include "engines/cudnn/graph_api_convolution.hpp"
#include "engines/cudnn/kernels_batch_norm.hpp"
#include "engines/cudnn/kernels_elementwise.hpp"
#include "engines/cudnn/kernels_pooling_lrn.hpp"
#include "engines/kit/fusion.hpp"
#include "engines/kit/walk.hpp"

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
  const std::int64_t reference = round(std::max({arena_x_, arena_w_, arena_y_}));
  constexpr std::int64_t kCounters = 256;  // [bytes] kernels::differences' three counters, rounded
  const std::int64_t tensors = round(arena_x_) + round(arena_w_) + round(arena_y_) + reference + kCounters;
  if (l2_cold() && l2_flush_.data() == nullptr) {  // first, so that the workspace is sized beside it
    int device = 0, l2_bytes = 0;
    CB_CHECK_CUDA(cudaGetDevice(&device));
    CB_CHECK_CUDA(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
    if (l2_bytes <= 0) throw Error("engine.search_l2 = cold: the device reports no L2 cache size to flush");
    l2_flush_ = DeviceBuffer(2 * static_cast<std::size_t>(l2_bytes), "the algorithm search's L2 flush buffer");
  }
  std::size_t free_bytes = 0, total_bytes = 0;
  CB_CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  // The search workspace: the configured limit, but never more than what is
  // free beside the tensors (less 256 MiB for cuDNN's own small allocations).
  const std::int64_t spare = static_cast<std::int64_t>(free_bytes) - tensors - (std::int64_t{256} << 20);
  const std::int64_t workspace = std::max<std::int64_t>(0, std::min(arena_limit_, spare));
  arena_memory_ = DeviceBuffer(static_cast<std::size_t>(tensors + workspace), "the algorithm search arena");
  arena_peak_ = tensors + workspace + static_cast<std::int64_t>(l2_flush_.bytes());
  char* base = arena_memory_.data();
  arena_.x = base;
  arena_.w = base + round(arena_x_);
  arena_.y = base + round(arena_x_) + round(arena_w_);
  arena_.reference = base + round(arena_x_) + round(arena_w_) + round(arena_y_);
  arena_.counters = reinterpret_cast<unsigned*>(base + round(arena_x_) + round(arena_w_) + round(arena_y_) + reference);
  arena_.workspace = workspace > 0 ? base + tensors : nullptr;
  arena_.workspace_bytes = static_cast<std::size_t>(workspace);
  // Synthetic values, as fp16 everywhere: small, finite and non-zero in every data type's bit patterns.
  kernels::fill_synthetic(base, DType::f16, {1, 1, 1, tensors / 2}, false, 1, 1, 1.0f, stream);
  CB_CHECK_CUDA(cudaStreamSynchronize(stream));
  return arena_;
}

void SetupContext::flush_l2() {
  if (!l2_cold()) return;
  arena();  // allocates the flush buffer with the arena
  CB_CHECK_CUDA(cudaMemsetAsync(l2_flush_.data(), 0, l2_flush_.bytes(), stream));
}

void SetupContext::refill_arena(void* at, std::size_t bytes) {
  kernels::fill_synthetic(at, DType::f16, {1, 1, 1, static_cast<std::int64_t>(bytes / 2)}, false, 1, 1, 1.0f, stream);
}

// ---- Descriptors -----------------------------------------------------------------

TensorDesc describe_tensor(const Tensor& t) {
  for (int i = 0; i < 4; ++i)
    if (t.dims[static_cast<std::size_t>(i)] > INT_MAX || t.strides[static_cast<std::size_t>(i)] > INT_MAX)
      throw Error("cuDNN engine: tensor " + shape_text(t) +
                  " exceeds the 32-bit dimensions of cuDNN's tensor descriptors");
  // A tensor of 2^31 elements or more is refused by cuDNN (NOT_SUPPORTED): the engine's limit, not a fault.
  // supports() turns such cells away before they are prepared; this names the tensor should one get here.
  double elements = 1, extent = 1;
  for (std::size_t i = 0; i < 4; ++i) {
    elements *= static_cast<double>(t.dims[i]);
    extent += static_cast<double>(t.dims[i] - 1) * static_cast<double>(t.strides[i]);
  }
  if (std::max(elements, extent) > static_cast<double>(INT_MAX))
    throw Unsupported("cuDNN engine: tensor " + shape_text(t) + " spans " +
                      std::to_string(static_cast<long long>(std::max(elements, extent))) +
                      " elements, beyond the 2^31 - 1 that cuDNN's tensor descriptors hold (this engine does not "
                      "split batches)");
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

std::optional<kernels::Rows> pitched_rows(const Tensor& x, const Tensor& y) {
  if (x.dims != y.dims || x.type != y.type) return std::nullopt;
  const auto [n, c, h, w] = x.dims;
  // Row pitches in elements, 0 where the tensor is not of that form.
  const auto pixel_pitch = [&](const Tensor& t) -> std::int64_t {
    const auto& s = t.strides;
    return s[1] == 1 && s[3] >= c && s[2] == w * s[3] && s[0] == h * s[2] ? s[3] : 0;
  };
  const auto image_pitch = [&](const Tensor& t) -> std::int64_t {
    const auto& s = t.strides;
    return s[3] == 1 && s[2] == w && s[1] == h * w && s[0] >= c * h * w ? s[0] : 0;
  };
  std::optional<kernels::Rows> rows;
  if (pixel_pitch(x) > 0 && pixel_pitch(y) > 0) rows = kernels::Rows{n * h * w, c, pixel_pitch(x), pixel_pitch(y)};
  else if (image_pitch(x) > 0 && image_pitch(y) > 0) rows = kernels::Rows{n, c * h * w, image_pitch(x), image_pitch(y)};
  // kernels::add_rows's limits (32-bit offsets within chunks of whole rows).
  constexpr std::int64_t limit = std::int64_t{1} << 28;
  if (rows && (rows->x_pitch > limit || rows->y_pitch > limit || rows->width > limit)) rows.reset();
  return rows;
}

TensorCopy::TensorCopy(const Tensor& x, const Tensor& y, float beta)
    : x_(x), y_(y), xd_(x), yd_(y), beta_(beta), rows_(pitched_rows(x, y)) {
  const bool kernel_types = x.type == DType::f32 || x.type == DType::f16 || x.type == DType::bf16;
  if (beta != 0.0f && !kernel_types) rows_.reset();  // add_rows takes these three
}

void TensorCopy::run(const Exec& e) {
  if (rows_) {
    kernels::copy_rows(e.ptr(x_), e.ptr(y_), x_.type, *rows_, beta_, e.stream);
    return;
  }
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

// What this engine lowers of the kit's fusion groups for this cell
// (kit/fusion.hpp), or why not. Each is lowered by the group's first layer:
// the convolution (cuDNN's fused conv+bias+relu call, or our epilogue kernel
// after it; inference also folds a batch-norm into it), the fully-connected
// layer (cuBLASLt's RELU_BIAS epilogue, or our bias+relu kernel after
// cublasGemmEx where measured faster) and the add (our add+relu kernel); the
// relu's own op then does nothing. Training
// batch-norm groups run our fused kernels (layer_batch_norm.cpp) over packed
// NHWC tensors: the layout of tf32 and 16-bit cells (and of --layout nhwc).
// conv_bias_relu_pool (training, NHWC: a max pool run by our argmax kernels)
// is conv_bias_relu forward plus a pool forward that records the relu's mask
// in its argmax bytes; backward, the pool writes the convolution's output
// gradient and the relu has no op (layer_pooling.cpp).
std::optional<std::string> can_lower(const Builder& b, const kit::FusedGroup& g) {
  if (!b.config.fuse) return "fusion turned off (--fuse false)";
  const bool relu_in_place = g.relu < 0 || b.states[static_cast<std::size_t>(g.relu)].in_place;
  switch (g.kind) {
    case kit::FusedKind::conv_bias_relu:
    case kit::FusedKind::conv_bn_relu:
    case kit::FusedKind::add_relu:
      if (!relu_in_place) return "the relu cannot write over its input";
      return std::nullopt;
    case kit::FusedKind::bn_relu:
    case kit::FusedKind::bn_add_relu: {
      if (!b.nhwc)
        return "NCHW (strict fp32's layout): the fused batch-norm kernels take packed NHWC; cuDNN's batch-norm, "
               "then our relu kernels";
      if (!relu_in_place) return "the relu cannot write over its input";
      const std::int64_t channels = b.layer(g.batch_norm).output.channels;
      if (!kernels::batch_norm_relu_supported(channels, b.type))
        return std::to_string(channels) + " " + name_of(b.type) +
               " channels are not whole 16-byte vectors: cuDNN's batch-norm, then our relu kernels";
      return std::nullopt;
    }
    case kit::FusedKind::fc_bias_relu:
      // cuBLASLt's RELU_BIAS epilogue writes relu(x W^T + b) as the relu's output (layer_fully_connected.cpp).
      if (!b.config.fc_epilogues) return "turned off (CudnnSettings::fc_epilogues)";
      if (!relu_in_place) return "the relu cannot write over its input";
      return std::nullopt;
    case kit::FusedKind::conv_bn_add_relu:
      // One Graph API graph conv → +bias → +residual → relu, chosen by measurement (layer_convolution.cpp);
      // where no plan runs, the convolution's op runs the unfused ops (conv + bias, then our add+relu kernel).
      if (b.cell.precision == Precision::fp32 || !b.nhwc)
        return "strict fp32 or NCHW: the fused graph is for tensor-core NHWC cells (tf32, 16-bit)";
      if (b.config.algorithm != AlgorithmPolicy::exhaustive)
        return "--algo heuristic: the fused graph is chosen by the measured search only";
      if (!b.config.graph_api) return "the Graph API is off (--engine.graph_api false)";
      if (!graph_api_available()) return std::string("no Graph API: ") + graph_api_unavailable_reason();
      if (!relu_in_place) return "the relu cannot write over its input";
      return std::nullopt;
    case kit::FusedKind::conv_bias_relu_pool: {
      if (!b.config.fold_relu_into_pool) return "turned off (CudnnSettings::fold_relu_into_pool)";
      if (!b.training) return "inference: no backward to fold the relu's into";
      if (!b.nhwc)
        return "NCHW (strict fp32's layout): cuDNN's max pooling, whose backward takes no relu mask; conv_bias_relu, "
               "then our relu kernels";
      if (!relu_in_place) return "the relu cannot write over its input";
      const Layer& pool = b.layer(g.pool);
      if (pool.kind != LayerKind::max_pool || !kernels::pool_kernel_supported(static_cast<int>(pool.params.kernel)))
        return "a max pool of " + std::to_string(pool.params.kernel) + "x" + std::to_string(pool.params.kernel) +
               " windows: more positions than the argmax byte names; cuDNN's pooling";
      return std::nullopt;
    }
  }
  return "unknown group";
}

// engine.conv_statistics: the convolution whose output is batch-norm `batch_norm`'s input and that nothing
// else reads, where the setting and the cell allow its statistics graph (training over NHWC, the measured
// search with the Graph API); else -1. Its search then decides whether the statistics come from it.
int statistics_source(Builder& b, int batch_norm) {
  if (!b.config.conv_statistics || !b.training || !b.nhwc || b.config.algorithm != AlgorithmPolicy::exhaustive ||
      !b.config.graph_api || !graph_api_available())
    return -1;
  const int from = b.layer(batch_norm).inputs.front();
  if (from <= 0 || b.layer(from).kind != LayerKind::convolution || b.state(from).consumers != 1) return -1;
  return from;
}

// Decides, before any tensor exists, which relus run in place, which fusion
// groups this engine lowers (the kit's planner), and where concat inputs are written.
void pre_pass(Builder& b) {
  const int count = static_cast<int>(b.network.layers().size());
  kit::mark_consumers_and_gradients(b.network, b.training, b.states);
  for (int index = 1; index < count; ++index) {
    const Layer& layer = b.layer(index);
    if (layer.kind != LayerKind::relu) continue;
    const int from = layer.inputs.front();
    const LayerKind from_kind = b.layer(from).kind;
    b.state(index).in_place = from != 0 && b.state(from).consumers == 1 && !is_view(from_kind, b.training) &&
                              from_kind != LayerKind::concat && !(b.training && backward_reads_own_output(from_kind));
  }
  b.fusions = kit::plan_fusions(b.network, b.training, [&](const kit::FusedGroup& g) { return can_lower(b, g); });
  for (const kit::FusedGroup& g : b.fusions.groups()) {
    switch (g.kind) {
      case kit::FusedKind::conv_bias_relu:
      case kit::FusedKind::fc_bias_relu:
      case kit::FusedKind::conv_bias_relu_pool:  // the pool's part: layer_pooling.cpp (relu_pool_group)
      case kit::FusedKind::add_relu: b.state(g.anchor()).fusable_relu = g.relu; break;
      case kit::FusedKind::conv_bn_relu:
        // Inference: the batch-norm folds into the convolution (its only reader), and the relu after it fuses there.
        b.state(g.anchor()).folded_batch_norm = g.batch_norm;
        b.state(g.batch_norm).folded_into = g.anchor();
        if (g.relu >= 0) b.state(g.anchor()).fusable_relu = b.state(g.batch_norm).fusable_relu = g.relu;
        break;
      case kit::FusedKind::conv_bn_add_relu:
        // Inference: the batch-norm folds into the convolution, which adds the residual and applies the relu;
        // the add has no op (its output is the convolution's) and the relu's op does nothing.
        b.state(g.anchor()).folded_batch_norm = g.batch_norm;
        b.state(g.batch_norm).folded_into = g.anchor();
        b.state(g.anchor()).fused_residual = g.residual;
        b.state(g.add).residual_into = g.anchor();
        b.state(g.add).fusable_relu = g.relu;
        break;
      case kit::FusedKind::bn_relu:
      case kit::FusedKind::bn_add_relu:
        // Lowered at the relu, found through b.fusions (batch_norm_group); engine.conv_statistics: the
        // convolution before it may write its statistics.
        if (const int conv = statistics_source(b, g.batch_norm); conv >= 0) b.state(conv).statistics_for = g.batch_norm;
        break;
      default: throw Error("cuDNN engine: a fusion group it did not accept: " + std::string(kit::to_string(g.kind)));
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

namespace {

// This engine's lowering of each layer kind (layer_*.cpp), walked by the kit (kit/walk.hpp).
class CudnnLowering final : public kit::LayerLowering {
 public:
  explicit CudnnLowering(Builder& b) : b_(b) {}
  void forward_input(int i) override { cudnn::forward_input(b_, i); }
  void forward_convolution(int i) override { cudnn::forward_convolution(b_, i); }
  void forward_pooling(int i) override { cudnn::forward_pooling(b_, i); }
  void forward_lrn(int i) override { cudnn::forward_lrn(b_, i); }
  void forward_relu(int i) override { cudnn::forward_relu(b_, i); }
  void forward_batch_norm(int i) override { cudnn::forward_batch_norm(b_, i); }
  void forward_dropout(int i) override { cudnn::forward_dropout(b_, i); }
  void forward_concat(int i) override { cudnn::forward_concat(b_, i); }
  void forward_add(int i) override { cudnn::forward_add(b_, i); }
  void forward_fully_connected(int i) override { cudnn::forward_fully_connected(b_, i); }
  void forward_flatten(int i) override { cudnn::forward_flatten(b_, i); }
  void loss(int i) override { build_loss(b_, i); }
  void backward_convolution(int i) override { cudnn::backward_convolution(b_, i); }
  void backward_pooling(int i) override { cudnn::backward_pooling(b_, i); }
  void backward_lrn(int i) override { cudnn::backward_lrn(b_, i); }
  void backward_relu(int i) override { cudnn::backward_relu(b_, i); }
  void backward_batch_norm(int i) override { cudnn::backward_batch_norm(b_, i); }
  void backward_dropout(int i) override { cudnn::backward_dropout(b_, i); }
  void backward_concat(int i) override { cudnn::backward_concat(b_, i); }
  void backward_add(int i) override { cudnn::backward_add(b_, i); }
  void backward_fully_connected(int i) override { cudnn::backward_fully_connected(b_, i); }
  void backward_flatten(int i) override { cudnn::backward_flatten(b_, i); }
  void update() override { build_sgd(b_); }
  void end_of_step() override {
    const Tensor step{{1, 1, 1, 1}, {1, 1, 1, 1}, DType::f64, false, b_.step_buffer, 0};
    const int loss = static_cast<int>(b_.network.layers().size()) - 1;
    b_.push(loss, Stage::bookkeeping, "advance the dropout step", {step}, [step](const Exec& e) {
      kernels::increment(e.ptr_as<std::uint64_t>(step), e.stream);
    });
  }
  bool needs_grad(int i) const override { return b_.states[static_cast<std::size_t>(i)].needs_grad; }
  void mark(Mark where) override {
    switch (where) {
      case Mark::forward_end: b_.forward_end = b_.ops.size(); break;
      case Mark::loss_end: b_.loss_end = b_.ops.size(); break;
      case Mark::backward_end: b_.backward_end = b_.ops.size(); break;
      case Mark::update_end: b_.update_end = b_.ops.size(); break;
    }
  }

 private:
  Builder& b_;
};

}  // namespace

void build_graph(Builder& b) {
  pre_pass(b);
  // Persistent session buffers.
  b.labels_buffer = b.pool.request(b.batch * 4, true, "labels");
  b.step_buffer = b.pool.request(8, true, "dropout step");
  b.row_loss_buffer = b.pool.request(b.batch * 4, true, "loss per image");
  place_concat_outputs(b);
  CudnnLowering lowering(b);
  kit::walk_network(b.network, b.training, b.config.update == Update::sgd, lowering);
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
