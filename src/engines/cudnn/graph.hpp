// The compiled form of a network for one cell on the GPU: tensors placed in
// a MemoryPool, and a flat list of ops that one step enqueues, in order, on
// the session's stream. Built once in prepare() in three phases:
//
//   1. build    the per-layer builders (layer_*.cpp) create tensors and ops,
//               with no cuDNN call, so the memory plan (and an early OOM
//               answer) costs nothing on the device;
//   2. setup    each layer's descriptors, algorithm choice (heuristic or
//               measured search) and workspace needs;
//   3. allocate one cudaMalloc for the whole plan, then initialise weights,
//               inputs and labels from the synthetic generator on the device.
//
// step() only enqueues ops (or replays them as one CUDA graph).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "crossbench/cell.hpp"
#include "crossbench/engine.hpp"
#include "crossbench/network.hpp"
#include "crossbench/synthetic.hpp"
#include "engines/cudnn/cudnn_settings.hpp"
#include "engines/cudnn/memory_pool.hpp"
#include "engines/cudnn/handles.hpp"
#include "engines/cudnn/kernels_rows.hpp"
#include "engines/cudnn/tensor.hpp"
#include "engines/kit/fusion.hpp"
#include "engines/kit/graph_state.hpp"

namespace crossbench::cudnn {

// The session's cuBLAS workspace [bytes]: what cuBLAS asks for on Hopper.
// GEMM candidates are timed with exactly this much (layer_convolution.cpp).
constexpr std::int64_t kCublasWorkspace = std::int64_t{32} << 20;

// Where an op belongs in a step: check() runs forward, loss and backward;
// step() runs forward (inference) or everything (training).
using Stage = OpStage;  // crossbench/layer_time.hpp: forward, loss, backward, update, bookkeeping

// What an op sees when it runs.
struct Exec {
  cudnnHandle_t dnn = nullptr;
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;  // cuBLASLt: fully-connected GEMMs with epilogues
  cudaStream_t stream = nullptr;
  const MemoryPool* pool = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  bool check = false;    // check(): leave the model as it is (no running-statistics update)
  bool probing = false;  // prepare()'s validation pass: ops may fall back from a fused variant
  void* ptr(const Tensor& t) const { return pool->address(t.buffer) + t.offset; }
  template <typename T>
  T* ptr_as(const Tensor& t) const { return reinterpret_cast<T*>(ptr(t)); }
};

struct Op : OpTag {  // label, layer, stage (crossbench/layer_time.hpp)
  std::function<void(const Exec&)> run;
};

// A trainable tensor, initialised on the device from synthetic.hpp's generator.
struct Parameter {
  int layer = 0;
  synthetic::Slot slot = synthetic::Slot::weight;
  Tensor value;
  Tensor gradient;                                // valid in training
  std::array<std::int64_t, 4> canonical_dims{};  // synthetic.hpp's layout (OIHW, (out, C, H, W), (C))
  bool channels_last = false;                     // stored in (d0, d2, d3, d1) order
  std::int64_t stored_channels = 0;               // > canonical d1: zero-padded channels (see Builder::input_channels)
  enum class Init : std::uint8_t { he_uniform, zeros, ones } init = Init::zeros;
  float scale = 0;                                // he_uniform: fp32(sqrt(6 / fan_in))
};

class AlgorithmCache;  // algorithm_cache.hpp
class GraphConvolutionCache;  // graph_convolution_cache.hpp
class GraphPlanStore;         // graph_convolution_cache.hpp

// What a layer's setup() sees: the handles, the choices of the run and, for
// the measured algorithm search, scratch memory (see SetupContext::arena).
class SetupContext {
 public:
  SetupContext(cudnnHandle_t dnn, cudaStream_t stream, const CudnnConfig& config, Precision precision,
               std::int64_t arena_limit_bytes)
      : dnn(dnn), stream(stream), config(config), precision(precision), arena_limit_(arena_limit_bytes) {}
  cudnnHandle_t dnn;
  cudaStream_t stream;
  const CudnnConfig& config;
  Precision precision;
  cublasHandle_t blas = nullptr;  // on `stream`: measured GEMM candidates (a 1x1 convolution's weight gradient)
  cublasLtHandle_t lt = nullptr;  // cuBLASLt: the fully-connected layers' plans (heuristic and measured)
  AlgorithmCache* algorithm_cache = nullptr;  // measured choices: replayed, shared across layers and cells, saved
  GraphConvolutionCache* graph_convolutions = nullptr;  // the session's Graph API graphs, one per distinct problem
  GraphPlanStore* graph_plans = nullptr;  // engine.graph_plan_reuse: the process's runtime-compiled plans; null: off

  void need_workspace(std::size_t bytes) { workspace_bytes_ = std::max(workspace_bytes_, bytes); }
  std::size_t workspace_bytes() const { return workspace_bytes_; }

  // Measured search (cudnnFind*Ex) runs on real memory: the arena is one
  // allocation of the largest input, filter and output of any convolution plus
  // a workspace of at most the configured limit, filled with synthetic data
  // (never zeros: they run faster than real data). It is freed before the
  // session's pool is allocated; memory().peak_bytes is the larger of the two.
  struct Arena {
    void* x = nullptr;
    void* w = nullptr;
    void* y = nullptr;
    // The agreement check's (layer_convolution.cpp): a copy of the reference output (as large as the
    // largest of x, w, y) and kernels::differences' three counters.
    void* reference = nullptr;
    unsigned* counters = nullptr;
    void* workspace = nullptr;
    std::size_t workspace_bytes = 0;
  };
  void reserve_arena(std::int64_t x_bytes, std::int64_t w_bytes, std::int64_t y_bytes);
  const Arena& arena();  // allocates on first use
  // Writes the arena's synthetic values again over [at, at + bytes) (a part of the arena): after a
  // check has poisoned it, so that later candidates run on the same kind of data.
  void refill_arena(void* at, std::size_t bytes);
  void release_arena() {
    arena_memory_.reset();
    l2_flush_.reset();
  }
  std::int64_t arena_peak_bytes() const { return arena_peak_; }

  // engine.search_l2 = cold: every timed run of the search starts L2-cold.
  // flush_l2() enqueues a write of the flush buffer (twice the device's L2,
  // cudaDevAttrL2CacheSize; allocated with the arena, before its workspace is
  // sized, and freed with it) on `stream`; callers put it before the event that
  // starts a timed run, never between a run's events. Warm: does nothing.
  bool l2_cold() const { return config.search_l2 == SearchL2::cold; }
  void flush_l2();
  std::size_t l2_flush_bytes() const { return l2_flush_.bytes(); }  // 0 until the arena exists, and under warm

 private:
  std::size_t workspace_bytes_ = 0;
  std::int64_t arena_limit_;
  std::int64_t arena_x_ = 0, arena_w_ = 0, arena_y_ = 0, arena_peak_ = 0;
  DeviceBuffer arena_memory_;
  DeviceBuffer l2_flush_;  // cold: the buffer flush_l2() writes, owned for the search's duration
  Arena arena_;
};

// engine.conv_statistics: a training batch-norm's batch statistics written by the convolution before it
// (layer_convolution.cpp: a Graph API graph that also writes Σy and Σy² per channel, fp32) and read, then
// zeroed, by the batch-norm's fused forward (layer_batch_norm.cpp, kernels_batch_norm.hpp). `written`: the
// convolution's forward writes them (its search chose a statistics plan, and the validation pass ran it);
// else the batch-norm computes its own, as without the setting.
struct ConvolutionStatistics {
  Tensor sum, sum_of_squares;  // C floats each, persistent, zero between steps (the batch-norm zeroes them)
  bool written = false;
  std::string convolution;  // its name, for the batch-norm's decisions
};

// The state of one layer of the network while building (see Builder).
class LayerImpl;
struct LayerState : kit::LayerState<Tensor> {  // out, grad and the kit's flags (engines/kit/graph_state.hpp)
  std::optional<Tensor> placement;  // where the producer must write its output (a concat slice)
  int fusable_relu = -1;       // convolution, fully-connected layer (or a batch-norm folded into a convolution): the in-place relu after it, which it may fuse
  // Inference: a batch-norm right after a convolution (its only reader) is
  // folded into it: the convolution's weights are scaled and its bias is the
  // folded shift, once after initialisation; the batch-norm is no op at all.
  int folded_batch_norm = -1;  // convolution: the batch-norm folded into it
  int folded_into = -1;        // batch-norm: the convolution it is folded into
  Tensor fold_weight, fold_conv_bias, fold_shift;  // convolution: what the fold rewrites
  // Inference conv_bn_add_relu: the convolution (its batch-norm folded) also adds the residual and
  // applies the relu after the add; the add has no op and its output is the convolution's.
  int fused_residual = -1;  // convolution: the layer whose output it adds (the skip connection)
  int residual_into = -1;   // add: the convolution that computes it
  // engine.conv_statistics (training): the fused batch-norm whose statistics this convolution may write
  // (its only reader), and what they share once the convolution is built.
  int statistics_for = -1;
  std::shared_ptr<ConvolutionStatistics> statistics;
  LayerImpl* impl = nullptr;
};

// engine.search_in_step: one op of a layer whose configuration the search found near-tied with others,
// so that the session can time each inside the graphed step (CudnnSession::choose_in_step) and keep the
// step's fastest. Layers whose `key` is equal (identical convolutions sharing one Graph API problem, in
// one direction) are one choice: an option is applied to all of them at once.
struct StepChoice {
  std::string key;                   // the op's problem and direction (its algorithm cache signature)
  std::string what;                  // "conv5:fwd", for decisions
  std::vector<std::string> options;  // configuration names; [0] is the search's choice
  std::vector<float> search_ms;      // each option's median in the search [ms]
  std::function<void(std::size_t)> use;  // the op runs options[i] from its next run on
};

// Per-layer state kept for setup() and backward (descriptors, saved tensors, algorithms).
class LayerImpl {
 public:
  virtual ~LayerImpl() = default;
  // Before any setup(): report what the measured algorithm search needs (SetupContext::reserve_arena).
  virtual void plan_search(SetupContext& /*ctx*/) {}
  // After the memory plan: descriptors, algorithms, workspace needs (ctx.need_workspace).
  virtual void setup(SetupContext& /*ctx*/) {}
  // The decisions worth recording (algorithms), or empty.
  virtual std::string decisions() const { return {}; }
  // Convolution (or fully-connected layer): whether its forward op applies the relu that follows it
  // (read by the relu's op at run time: the choice is final only after setup
  // and prepare()'s validation pass).
  virtual bool relu_fused() const { return false; }
  // engine.search_in_step, after setup(): the layer's near-tied choices (none by default).
  virtual std::vector<StepChoice> step_choices() { return {}; }
};

// Build-time context shared by the per-layer builders.
class Builder {
 public:
  Builder(const Network& network, const CellSpec& cell, const CudnnConfig& config, MemoryPool& pool,
          std::vector<Op>& ops, std::vector<Parameter>& parameters,
          std::vector<std::unique_ptr<LayerImpl>>& impls);

  const Network& network;
  const CellSpec& cell;
  const CudnnConfig& config;
  MemoryPool& pool;
  std::vector<Op>& ops;
  std::vector<Parameter>& parameters;
  std::vector<std::unique_ptr<LayerImpl>>& impls;
  std::vector<LayerState> states;
  kit::FusionPlan fusions;  // the kit's fusion pass with this engine's answers (pre-pass); `decisions` prints it
  bool training;
  DType type;     // tensor data type of the cell's precision
  bool nhwc;      // layout of every activation
  std::int64_t batch;
  // Channels of the stored input batch: NHWC tensor-core convolutions want a
  // multiple of 8, so a 3-channel image is stored with 5 zero channels (and
  // the first convolutions' filters with 5 zero input channels) when only
  // convolutions read it (16-bit NHWC). The arithmetic is unchanged: the
  // padded products are zeros, and so are the padded filters' gradients.
  std::int64_t input_channels = 0;
  std::int64_t first_image = 0;  // data parallel: this rank's first image of the global synthetic batch

  const Layer& layer(int index) const { return network.layers()[static_cast<std::size_t>(index)]; }
  LayerState& state(int index) { return states[static_cast<std::size_t>(index)]; }
  int input_of(int index, int which = 0) const { return layer(index).inputs[static_cast<std::size_t>(which)]; }
  LayerState& input_state(int index, int which = 0) { return state(input_of(index, which)); }
  std::string label(int index, const char* what) const { return layer(index).name + " " + what; }
  std::array<std::int64_t, 4> dims_of(int index) const;  // (N, C, H, W) of a layer's output
  // The (N, C, H, W) whose canonical NCHW order indexes a layer's output: its
  // own dims, except after a flatten (and dropouts after it), where it is the
  // flattened map's. In NHWC the bytes of a flattened map are in (H, W, C)
  // order, so fully-connected weights and dropout masks index through this.
  std::array<std::int64_t, 4> logical_dims(int index) const;

  // A new packed tensor in the session's layout; `persistent` ones live for the whole session.
  Tensor new_tensor(std::array<std::int64_t, 4> dims, DType t, const std::string& what, bool persistent = false);
  // A layer's output: its placement (concat slice) when it has one, else a new tensor.
  Tensor new_output(int index, DType t);
  // Appends an op that touches `tensors` (for the memory plan's lifetimes).
  void push(int index, Stage stage, std::string what, const std::vector<Tensor>& tensors,
            std::function<void(const Exec&)> run);
  template <typename Impl>
  Impl* make_impl(int index) {
    auto impl = std::make_unique<Impl>();
    Impl* raw = impl.get();
    impls.push_back(std::move(impl));
    state(index).impl = raw;
    return raw;
  }
  template <typename Impl>
  Impl* impl_of(int index) {
    return static_cast<Impl*>(state(index).impl);
  }

  // A parameter of `index`: its value tensor (stored in `t`, canonical dims
  // `dims`, channels-last storage when asked) and, in training, its gradient.
  int add_parameter(int index, synthetic::Slot slot, DType t, std::array<std::int64_t, 4> canonical_dims,
                    bool channels_last, Parameter::Init init, float scale = 0, std::int64_t stored_channels = 0);
  const Parameter& parameter(int id) const { return parameters[static_cast<std::size_t>(id)]; }

  // Gradient plumbing, by the kit's contribution rule (kit::take_contribution):
  // the first contribution to a tensor's gradient writes it (beta 0), later
  // ones accumulate into it (beta 1). `alias` lets the first contribution be that tensor itself
  // (in-place backward: relu, dropout, flatten views, concat slices).
  struct Sink {
    Tensor target;
    float beta = 0;
  };
  Sink gradient_sink(int tensor, const Tensor* alias = nullptr);
  // The complete gradient of a layer's output (all consumers have contributed).
  const Tensor& gradient(int index);
  // Adds an existing gradient `g` (same dims) into tensor `tensor`'s gradient:
  // by aliasing when allowed and first, by copy when first, else by cudnnAddTensor.
  void contribute(int index, int tensor, const Tensor& g, bool may_alias, const std::string& what);

  // Whether layer `input`'s output may be overwritten by its consumer (in-place relu / add).
  bool can_overwrite(int input) const { return kit::can_overwrite(states[static_cast<std::size_t>(input)], input); }

  // Tensors the session fills with a constant after allocation (batch-norm running statistics).
  void initialise(const Tensor& t, float value) { constants.emplace_back(t, value); }
  std::vector<std::pair<Tensor, float>> constants;
  // One-off preparation ops, run once after the initialisation, never timed (batch-norm folding).
  std::vector<std::function<void(const Exec&)>> after_initialise;

  // Persistent buffers of the session.
  Tensor input;            // the synthetic batch
  int labels_buffer = -1;  // int32 per image
  int step_buffer = -1;    // uint64: the dropout step of the running step
  Tensor logits;           // (N, classes, 1, 1), fp32 when the data type is 16-bit
  int row_loss_buffer = -1;
  std::size_t forward_end = 0, loss_end = 0, backward_end = 0, update_end = 0;
};

// The bn_relu or bn_add_relu group `layer` belongs to in this plan, or nullptr.
inline const kit::FusedGroup* batch_norm_group(const Builder& b, int layer) {
  const kit::FusedGroup* g = b.fusions.group_of(layer);
  const bool ours = g != nullptr && (g->kind == kit::FusedKind::bn_relu || g->kind == kit::FusedKind::bn_add_relu);
  return ours ? g : nullptr;
}

// The conv_bias_relu_pool group `layer` belongs to in this plan, or nullptr.
inline const kit::FusedGroup* relu_pool_group(const Builder& b, int layer) {
  const kit::FusedGroup* g = b.fusions.group_of(layer);
  return g != nullptr && g->kind == kit::FusedKind::conv_bias_relu_pool ? g : nullptr;
}

// Descriptors of a tensor as cuDNN sees it. Created only after the memory
// plan (setup(), or on first use): a batch too large for the device is
// answered `oom` before cuDNN ever sees its dimensions.
TensorDesc describe_tensor(const Tensor& t);
class LazyTensorDesc {
 public:
  explicit LazyTensorDesc(const Tensor& t) : tensor_(t) {}
  cudnnTensorDescriptor_t get() {
    if (!desc_) desc_ = describe_tensor(tensor_);
    return desc_;
  }

 private:
  Tensor tensor_;
  TensorDesc desc_;
};
// x and y as `rows` rows of contiguous elements in the same order, at their
// own pitches, where both have that form: channels innermost (packed NHWC and
// its channel slices: a row per pixel) or C, H, W packed within each image
// (packed NCHW and its channel slices: a row per image). Else nullopt.
std::optional<kernels::Rows> pitched_rows(const Tensor& x, const Tensor& y);

// y = x + beta * y (beta 0: a copy), for a copy between layouts, a concat
// slice, or a gradient accumulation. Decided when it is built: where x and y
// are pitched rows of one order (pitched_rows: concat slices, packed copies),
// kernels::copy_rows (cudaMemcpy2DAsync for beta 0, a vectorised kernel
// else); otherwise cudnnTransformTensor, and if this cuDNN refuses the data
// type (seen for 16-bit types in some versions), prepare()'s validation pass
// switches it to a plain strided CUDA kernel for good.
class TensorCopy {
 public:
  TensorCopy(const Tensor& x, const Tensor& y, float beta);
  void run(const Exec& e);
  bool uses_kernel() const { return kernel_; }
  bool uses_rows() const { return rows_.has_value(); }

 private:
  Tensor x_, y_;
  LazyTensorDesc xd_, yd_;
  float beta_;
  bool kernel_ = false;
  std::optional<kernels::Rows> rows_;
};

// The relu descriptor shared by every layer that needs one.
cudnnActivationDescriptor_t relu_descriptor();

// The cuDNN scalars alpha/beta: float for every data type this engine uses.
inline const float kOne = 1.0f;
inline const float kZero = 0.0f;

// ---- Per-layer builders (one file per family) --------------------------------
void forward_input(Builder& b, int index);
void forward_convolution(Builder& b, int index);
void backward_convolution(Builder& b, int index);
void forward_pooling(Builder& b, int index);
void backward_pooling(Builder& b, int index);
void forward_lrn(Builder& b, int index);
void backward_lrn(Builder& b, int index);
void forward_relu(Builder& b, int index);
void backward_relu(Builder& b, int index);
void forward_dropout(Builder& b, int index);
void backward_dropout(Builder& b, int index);
void forward_batch_norm(Builder& b, int index);
void backward_batch_norm(Builder& b, int index);
// A training batch-norm fused with its relu (and the add between): the
// kit's bn_relu and bn_add_relu groups, lowered at the group's relu
// (layer_batch_norm.cpp); the group's other layers then have no op.
void forward_batch_norm_relu(Builder& b, const kit::FusedGroup& g);
void backward_batch_norm_relu(Builder& b, const kit::FusedGroup& g);
void forward_concat(Builder& b, int index);
void backward_concat(Builder& b, int index);
void forward_add(Builder& b, int index);
void backward_add(Builder& b, int index);
void forward_flatten(Builder& b, int index);
void backward_flatten(Builder& b, int index);
void forward_fully_connected(Builder& b, int index);
void backward_fully_connected(Builder& b, int index);
void build_loss(Builder& b, int index);
void build_sgd(Builder& b);

// The whole build: phases 1 (ops and tensors) of the header comment.
void build_graph(Builder& b);

}  // namespace crossbench::cudnn
