// Preparing and running a session: the three build phases of graph.hpp, a
// validation pass, optional CUDA graph capture; step() enqueues (or
// replays); check() runs a deterministic forward (+ backward) and reads the
// results back.
#include "engines/cudnn/cudnn_session.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "core/nvtx.hpp"
#include "crossbench/error.hpp"
#include "crossbench/telemetry.hpp"
#include "engines/cudnn/fault_injection.hpp"
#include "engines/cudnn/tensor_compare.hpp"
#include "engines/cudnn/kernels_elementwise.hpp"
#include "core/cuda/cudnn_compat.hpp"

namespace crossbench::cudnn {
namespace {

// [ms] between two SM clock samples while a cell's measured search runs (its decisions' search_sm_clock).
constexpr int kSearchClockIntervalMs = 10;  // the Runner's default: measured not to move a step (call 50)

std::string cell_text(const Network& network, const CellSpec& cell) {
  return "cuDNN " + network.name() + " " + std::string(to_string(cell.phase)) + " " +
         std::string(to_string(cell.precision)) + " batch " + std::to_string(cell.batch);
}

std::string policy_text(const CudnnConfig& config) {
  return config.algorithm == AlgorithmPolicy::exhaustive ? "exhaustive" : "heuristic";
}

// "1.23s": a wall time of the set-up in the decisions [s].
std::string seconds_text(double seconds) {
  std::ostringstream text;
  text.setf(std::ios::fixed);
  text.precision(2);
  text << seconds << "s";
  return text.str();
}

}  // namespace

CudnnSession::CudnnSession(const Network& network, const CellSpec& cell, const CudnnConfig& config,
                           const Device& device, Communicator* communicator, AlgorithmCache* algorithm_cache,
                           GraphPlanStore* graph_plans)
    : cell_(cell), config_(config), training_(cell.phase == Phase::training), communicator_(communicator) {
  if (cell.batch <= 0) throw Error("cuDNN engine: batch must be positive, got " + std::to_string(cell.batch));
  if (communicator_ != nullptr) {
    if (!training_) throw Error("cuDNN engine: data parallel applies to training cells only");
    first_image_ = static_cast<std::int64_t>(communicator_->rank()) * cell.batch;
    config_.cuda_graphs = false;  // the all-reduces are issued from the host as buckets fill
  }
  for (const Layer& layer : network.layers()) {
    layer_names_.push_back(layer.name);
    layer_kinds_.emplace_back(to_string(layer.kind));
  }
  CB_CHECK_CUDA(cudaSetDevice(std::max(device.index, 0)));  // the GPU the rank is bound to
  stream_ = make_stream();
  dnn_ = make_cudnn_handle();
  CB_CHECK_CUDNN(cudnnSetStream(dnn_, stream_));
  blas_ = make_cublas_handle();
  CB_CHECK_CUBLAS(cublasSetStream(blas_, stream_));
  // No TF32 unless a GEMM asks for it with CUBLAS_COMPUTE_32F_FAST_TF32 (fp32 is strict).
  CB_CHECK_CUBLAS(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH));
  lt_ = make_cublaslt_handle();  // not tied to a stream: each cublasLtMatmul names the session's

  // Phase 1: tensors and ops.
  Builder b(network, cell, config_, pool_, ops_, parameters_, impls_);
  b.first_image = first_image_;
  build_graph(b);
  forward_end_ = b.forward_end;
  loss_end_ = b.loss_end;
  backward_end_ = b.backward_end;
  if (communicator_ != nullptr) add_gradient_averaging();
  logits_ = b.logits;
  for (const auto& constant : b.constants) step_state_.push_back(constant.first);
  if (config_.update == Update::sgd)
    for (const Parameter& p : parameters_) step_state_.push_back(p.value);
  row_loss_buffer_ = b.row_loss_buffer;
  step_buffer_ = b.step_buffer;
  workspace_buffer_ = pool_.request(0, true, "workspace");
  cublas_workspace_buffer_ = pool_.request(kCublasWorkspace, true, "cuBLAS workspace");
  norms_buffer_ = pool_.request(static_cast<std::int64_t>(parameters_.size() + 1) * 8, true, "gradient norms");

  // The plan without workspaces is a lower bound: a cell that cannot fit is
  // refused before cuDNN sees its dimensions (and before any allocation).
  const std::int64_t lower_bound = pool_.plan();
  std::size_t free_bytes = 0, total_bytes = 0;
  CB_CHECK_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (lower_bound > static_cast<std::int64_t>(free_bytes))
    throw OutOfMemory(cell_text(network, cell) + " needs at least " + format_bytes(static_cast<double>(lower_bound)) +
                      " of device memory (tensors, weights, gradients; " +
                      format_bytes(static_cast<double>(pool_.unshared_bytes())) + " without reuse) but " +
                      format_bytes(static_cast<double>(free_bytes)) + " of " +
                      format_bytes(static_cast<double>(total_bytes)) + " is free; nothing was allocated");

  // Phase 2: descriptors, algorithms, workspaces.
  if (algorithm_cache == nullptr) {
    own_algorithm_cache_ = std::make_unique<AlgorithmCache>(std::filesystem::path(), MeasurementContext{});
    algorithm_cache = own_algorithm_cache_.get();
  }
  const AlgorithmCache::Counts counts_before = algorithm_cache->counts();
  // The device's SM clock while the candidates are timed (issue 24's reproducibility: one legacy
  // algorithm measured 0.079 ms in one cold process's search and 0.111 ms in another's, call 38, as if
  // the clocks were still ramping up after the host's own work between two layers' searches).
  TelemetrySampler search_clocks(device, std::chrono::milliseconds(kSearchClockIntervalMs));
  if (config.algorithm == AlgorithmPolicy::exhaustive) search_clocks.begin();
  const auto search_began = std::chrono::steady_clock::now();
  {
    // config_, not config: data parallel runs its steps (and so times its candidates) without graphs.
    SetupContext ctx(dnn_, stream_, config_, cell.precision, config_.workspace_limit_bytes);
    ctx.blas = blas_;
    ctx.lt = lt_;
    ctx.algorithm_cache = algorithm_cache;
    ctx.graph_convolutions = &graph_convolutions_;
    ctx.graph_plans = graph_plans;  // engine.graph_plan_reuse (null: off)
    for (auto& impl : impls_) impl->plan_search(ctx);
    for (auto& impl : impls_) impl->setup(ctx);
    arena_peak_bytes_ = ctx.arena_peak_bytes();
    workspace_bytes_ = ctx.workspace_bytes();
  }  // the search arena is freed here
  // Phase 2 is where the measured choices are made (and replayed from the
  // cache): its wall time is the cell's search_s; with the heuristic policy it
  // is only the descriptors' setup.
  record_.search_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - search_began).count();
  const Telemetry search_telemetry = search_clocks.end();  // all unknown where it never began
  const AlgorithmCache::Counts counts_after = algorithm_cache->counts();
  pool_.grow(workspace_buffer_, static_cast<std::int64_t>(workspace_bytes_));

  // Phase 3: one allocation, then the synthetic data.
  pool_.plan();
  // engine.pool_spacer_mb: device memory held, untouched, so that the pool lands elsewhere (DESIGN.md).
  if (const std::int64_t spacer = session_pool_spacer_bytes(config); spacer > 0)
    pool_spacer_ = DeviceBuffer(static_cast<std::size_t>(spacer), "the pool spacer (engine.pool_spacer_mb)");
  pool_.allocate(cell_text(network, cell));
  CB_CHECK_CUBLAS(cublasSetWorkspace(blas_, pool_.address(cublas_workspace_buffer_), kCublasWorkspace));
  initialise(network, b);
  if (!b.after_initialise.empty()) {
    const Exec e = make_exec(false, false);
    for (const auto& prepare_op : b.after_initialise) prepare_op(e);
    CB_CHECK_CUDA(cudaStreamSynchronize(stream_));
  }
  if (communicator_ != nullptr) make_gradient_buckets();

  // Validation pass: every op once, as check() runs them (no state change),
  // letting fused variants fall back where this cuDNN refuses them; it also
  // loads every kernel before timing (and before a graph capture).
  run(0, training_ ? backward_end_ : loss_end_, true, true);
  CB_CHECK_CUDA(cudaStreamSynchronize(stream_));

  timer_ = std::make_unique<EventTimer>(stream_);
  timer_->watch(communicator_);
  if (communicator_ != nullptr) timer_->time_exposed_communication(backward_done_, averages_done_);
  if (config.cuda_graphs) capture_graph();
  std::string in_step;  // engine.search_in_step: near-tied plans timed inside the captured step
  if (config_.search_in_step && graph_exec_ && config_.algorithm == AlgorithmPolicy::exhaustive) {
    const std::string cell_key = network.name() + " " + std::string(to_string(cell.precision)) + " b" +
                                 std::to_string(cell.batch) + " " + std::string(to_string(cell.phase)) +
                                 " layout=" + (b.nhwc ? "nhwc" : "nchw") + " fuse=" + (config_.fuse ? "on" : "off") +
                                 search_timing_context(true, config_.search_l2, config_.search_warmup_ms);
    in_step = choose_in_step(*algorithm_cache, cell_key);
  }

  std::ostringstream text;
  text << recipe_of(cell.precision) << " layout=" << (b.nhwc ? "nhwc" : "nchw") << " graphs=" << (graph_exec_ ? "on" : "off")
       << " algo=" << policy_text(config) << " workspace_limit=" << format_bytes(static_cast<double>(config.workspace_limit_bytes))
       << " workspace=" << format_bytes(static_cast<double>(workspace_bytes_))
       << " fc=cublas/" << (cell.precision == Precision::tf32 ? "32F_FAST_TF32" : "32F")
       << " relu=kernels"
       << " " << b.fusions.decisions(network)
       << " pool=" << format_bytes(static_cast<double>(pool_.planned_bytes()));
  if (buckets_) text << " data_parallel=" << first_image_ << ".." << first_image_ + cell.batch - 1 << " of the global batch, "
                     << buckets_->description() << " (CUDA graphs off: all-reduces start from the host)";
  if (arena_peak_bytes_ > 0) text << " search_arena=" << format_bytes(static_cast<double>(arena_peak_bytes_));
  // Whether the measured choices were replayed (hits: the --algo-cache file,
  // or the same op measured earlier in this process) or measured now (misses).
  if (config.algorithm == AlgorithmPolicy::exhaustive)
    text << " algo_cache=" << (algorithm_cache->file_backed() ? algorithm_cache->path().string() : "memory")
         << "(hits=" << counts_after.hits - counts_before.hits
         << ",misses=" << counts_after.misses - counts_before.misses << ") search_tie=" << config.search_tie;
  // Only where something was measured: a replay times nothing.
  if (counts_after.misses > counts_before.misses && std::isfinite(search_telemetry.mean_sm_clock_mhz))
    text << " search_sm_clock=" << std::lround(search_telemetry.min_sm_clock_mhz) << ".."
         << std::lround(search_telemetry.mean_sm_clock_mhz) << "MHz(min..mean of " << search_telemetry.samples
         << " samples" << (search_telemetry.throttled == 1 ? ", throttled" : "") << ")";
  // How many Graph API graphs the layers' searches created, and how many requests an identical layer's
  // graph (or refusal) answered.
  // What they cost in this process: the graphs' creation and their plans' builds [s], the runtime-compiled
  // (NVRTC) builds apart, with the CUDA JIT cache they found (which carries about half their cost from one
  // process to the next: jit_cache_decision).
  if (graph_convolutions_.graphs() > 0) {
    const GraphConvolutionCache::SetupCost cost = graph_convolutions_.setup_cost();
    text << " graph_api_graphs=" << graph_convolutions_.graphs() << "(shared " << graph_convolutions_.shared() << ")"
         << " graph_api_setup=create:" << seconds_text(cost.create_seconds) << ",build:" << cost.plans_built << "/"
         << seconds_text(cost.build_seconds) << ",runtime_compiled:" << cost.runtime_plans_built << "/"
         << seconds_text(cost.runtime_build_seconds) << ",restored:" << cost.plans_restored << "/"
         << seconds_text(cost.restore_seconds) << ",kept:" << cost.plans_kept;
    if (config.graph_from_cache)  // graphs created with their cached configuration alone, and that creation [s]
      text << ",configured:" << cost.plans_configured << "/" << seconds_text(cost.configure_seconds);
    // engine.graph_plan_reuse beside a file-backed algorithm cache: the plans FILE.plans held when the
    // process's engine read it (restored instead of compiled where a session chooses them).
    if (graph_plans != nullptr && graph_plans->file_backed()) text << ",plan_file_loaded:" << graph_plans->loaded();
    if (cost.runtime_plans_built > 0) text << "," << jit_cache_decision();
  }
  if (const std::string l2 = search_l2_decision(config); !l2.empty()) text << " " << l2;  // every timed search run L2-cold
  text << pool_spacer_decision(config);
  if (const std::string warmup = search_warmup_decision(config); !warmup.empty()) text << " " << warmup;
  if (!in_step.empty()) text << " " << in_step;
  if (b.input.dims[1] != b.input_channels)
    text << " input_channels=" << b.input_channels << "->" << b.input.dims[1] << "(zero-padded)";
  for (const auto& impl : impls_) {
    const std::string d = impl->decisions();
    if (!d.empty()) text << "; " << d;
  }
  record_.decisions = text.str() + fault_injection::decision();  // names a test-only fault (CROSSBENCH_GPU_FAULT)
}

CudnnSession::~CudnnSession() {
  // Nothing may still run on memory about to be freed; errors here are
  // reported by the next checked call, never thrown from a destructor.
  if (stream_) (void)cudaStreamSynchronize(stream_);
  (void)cudaGetLastError();
}

void CudnnSession::initialise(const Network& network, const Builder& b) {
  cudaStream_t s = stream_;
  for (const Parameter& p : parameters_) {
    void* value = pool_.address(p.value.buffer) + p.value.offset;
    switch (p.init) {
      case Parameter::Init::he_uniform:
        kernels::fill_synthetic(value, p.value.type, p.canonical_dims, p.channels_last, config_.seed,
                                synthetic::tensor_id(p.layer, p.slot), p.scale, s, p.stored_channels);
        break;
      case Parameter::Init::zeros: CB_CHECK_CUDA(cudaMemsetAsync(value, 0, static_cast<std::size_t>(p.value.bytes()), s)); break;
      case Parameter::Init::ones: kernels::fill_constant(value, p.value.type, p.value.elements(), 1.0f, s); break;
    }
    if (p.gradient.valid())
      CB_CHECK_CUDA(cudaMemsetAsync(pool_.address(p.gradient.buffer), 0, static_cast<std::size_t>(p.gradient.bytes()), s));
  }
  for (const auto& [tensor, value] : b.constants)
    kernels::fill_constant(pool_.address(tensor.buffer) + tensor.offset, tensor.type, tensor.elements(), value, s);
  auto canonical_input = b.input.dims;
  canonical_input[1] = b.input_channels;
  kernels::fill_synthetic(pool_.address(b.input.buffer) + b.input.offset, b.input.type, canonical_input,
                          b.input.channels_last, config_.seed, synthetic::input_tensor_id, 1.0f, s, b.input.dims[1],
                          static_cast<std::uint64_t>(first_image_ * canonical_input[1] * canonical_input[2] *
                                                     canonical_input[3]));
  const std::vector<std::int32_t> labels = synthetic::labels(network, cell_.batch, config_.seed, first_image_);
  CB_CHECK_CUDA(cudaMemcpyAsync(pool_.address(b.labels_buffer), labels.data(), labels.size() * sizeof(std::int32_t),
                                cudaMemcpyHostToDevice, s));
  set_dropout_step(0);
  CB_CHECK_CUDA(cudaStreamSynchronize(s));  // `labels` is a host vector about to go away
}

// Data parallel: after the last backward op of each layer with parameters, an
// op reports their gradients ready (a full bucket starts its all-reduce on the
// communicator's stream); the backward pass ends waiting for every average,
// between two events whose distance is the exposed communication. Inserted
// after building: the ops touch only the persistent gradient buffers, so the
// pool's lifetime plan of the other buffers keeps its order.
void CudnnSession::add_gradient_averaging() {
  std::vector<std::size_t> last_backward_op(layer_names_.size(), 0);
  std::vector<bool> has_backward(layer_names_.size(), false);
  for (std::size_t i = loss_end_; i < backward_end_; ++i) {
    const auto layer = static_cast<std::size_t>(ops_[i].layer);
    last_backward_op[layer] = i;
    has_backward[layer] = true;
  }
  std::vector<std::vector<std::size_t>> parameters_of(layer_names_.size());
  for (std::size_t p = 0; p < parameters_.size(); ++p)
    if (parameters_[p].gradient.valid()) parameters_of[static_cast<std::size_t>(parameters_[p].layer)].push_back(p);

  backward_done_ = make_event();
  averages_done_ = make_event();
  // Ops built field by field: aggregate temporaries with a std::function member drew GCC 12's
  // -Wmaybe-uninitialized (a false positive on the label's string) here.
  const auto backward_op = [](std::string label, int layer, std::function<void(const Exec&)> run) {
    Op op;
    op.label = std::move(label);
    op.layer = layer;
    op.stage = Stage::backward;
    op.run = std::move(run);
    return op;
  };
  const auto wait_for_the_averages = [this](const Exec& e) {
    if (e.probing) return;  // the validation pass of prepare() never communicates
    CB_CHECK_CUDA(cudaEventRecord(backward_done_, e.stream));
    buckets_->finish(e.stream);
    CB_CHECK_CUDA(cudaEventRecord(averages_done_, e.stream));
  };
  std::vector<Op> ops;
  ops.reserve(ops_.size() + layer_names_.size() + 1);
  for (std::size_t i = 0; i < ops_.size(); ++i) {
    if (i == backward_end_)
      ops.push_back(backward_op("wait for the gradient averages", ops_[i - 1].layer, wait_for_the_averages));
    const int layer = ops_[i].layer;
    ops.push_back(std::move(ops_[i]));
    const auto l = static_cast<std::size_t>(layer);
    if (i >= loss_end_ && i < backward_end_ && has_backward[l] && last_backward_op[l] == i && !parameters_of[l].empty()) {
      std::vector<std::size_t> parameters = parameters_of[l];
      ops.push_back(backward_op(layer_names_[l] + " gradients ready", layer, [this, parameters](const Exec& e) {
        if (e.probing) return;
        // Buckets hold the gradients last layer first: parameter p is tensor count - 1 - p.
        for (const std::size_t p : parameters) buckets_->ready(buckets_->tensor_count() - 1 - p, e.stream);
      }));
    }
  }
  if (backward_end_ == ops_.size())
    ops.push_back(backward_op("wait for the gradient averages", ops_.back().layer, wait_for_the_averages));
  backward_end_ += ops.size() - ops_.size();
  ops_ = std::move(ops);
}

// The buckets, over every parameter's gradient, last layer first (the order
// the backward pass finishes them).
void CudnnSession::make_gradient_buckets() {
  std::vector<GradientTensor> tensors;
  for (std::size_t p = parameters_.size(); p-- > 0;) {
    const Tensor& g = parameters_[p].gradient;
    if (!g.valid()) throw Error("cuDNN data parallel: parameter " + std::to_string(p) + " has no gradient");
    ElementType type = ElementType::f32;
    if (g.type == DType::f16) type = ElementType::f16;
    else if (g.type == DType::bf16) type = ElementType::bf16;
    else if (g.type != DType::f32) throw Unsupported("cuDNN data parallel: a gradient type NCCL cannot average");
    tensors.push_back({pool_.address(g.buffer) + g.offset, static_cast<std::size_t>(g.elements()), type});
  }
  buckets_ = std::make_unique<GradientBuckets>(*communicator_, std::move(tensors),
                                               static_cast<std::size_t>(config_.bucket_bytes));
}

void CudnnSession::synchronize() {
  if (communicator_ == nullptr) {
    CB_CHECK_CUDA(cudaStreamSynchronize(stream_));
    return;
  }
  Event done = make_event();
  CB_CHECK_CUDA(cudaEventRecord(done, stream_));
  wait_for(done, communicator_);
}

std::vector<float> CudnnSession::fp32_storage(const Tensor& t, const char* what) {
  synchronize();
  return host_floats(pool_.address(t.buffer) + t.offset, t, stream_, what);
}

std::vector<float> CudnnSession::parameter_storage(std::size_t index) {
  return fp32_storage(parameters_.at(index).value, "parameter_storage");
}

void CudnnSession::copy_parameters_from(CudnnSession& source) {
  if (source.parameters_.size() != parameters_.size())
    throw Error("cuDNN session: copy_parameters_from a session with " + std::to_string(source.parameters_.size()) +
                " parameters into one with " + std::to_string(parameters_.size()));
  source.synchronize();
  synchronize();
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const Tensor& from = source.parameters_[i].value;
    const Tensor& to = parameters_[i].value;
    if (from.dims != to.dims || from.type != to.type || from.strides != to.strides)
      throw Error("cuDNN session: copy_parameters_from: parameter " + std::to_string(i) +
                  " is stored differently in the two sessions");
    CB_CHECK_CUDA(cudaMemcpyAsync(pool_.address(to.buffer) + to.offset, source.pool_.address(from.buffer) + from.offset,
                                  static_cast<std::size_t>(to.span_bytes()), cudaMemcpyDeviceToDevice, stream_));
  }
  CB_CHECK_CUDA(cudaStreamSynchronize(stream_));
}

std::vector<float> CudnnSession::gradient_storage(std::size_t index) {
  if (!training_) throw Error("cuDNN session: gradient_storage of an inference session");
  return fp32_storage(parameters_.at(index).gradient, "gradient_storage");
}

std::vector<float> CudnnSession::logits_storage() { return fp32_storage(logits_, "logits_storage"); }

std::vector<float> CudnnSession::step_state_storage(std::size_t index) {
  return fp32_storage(step_state_.at(index), "step_state_storage");
}

void CudnnSession::set_dropout_step(std::uint64_t step) {
  // A pageable copy is staged before returning, so `step` may go out of scope.
  CB_CHECK_CUDA(cudaMemcpyAsync(pool_.address(step_buffer_), &step, sizeof step, cudaMemcpyHostToDevice, stream_));
  CB_CHECK_CUDA(cudaStreamSynchronize(stream_));
}

void CudnnSession::run(std::size_t begin, std::size_t end, bool check, bool probing) {
  const Exec e = make_exec(check, probing);
  for (std::size_t i = begin; i < end; ++i) {
    try {
      ops_[i].run(e);
    } catch (const OutOfMemory& error) {
      throw OutOfMemory(ops_[i].label + ": " + error.what());
    } catch (const Error& error) {
      throw Error(ops_[i].label + ": " + error.what());
    }
  }
}

void CudnnSession::capture_graph() {
  StreamCapture capture(stream_);
  run(0, step_end(), false);
  graph_ = capture.finish();
  graph_exec_ = instantiate(graph_);
  CB_CHECK_CUDA(cudaGraphUpload(graph_exec_, stream_));
  CB_CHECK_CUDA(cudaStreamSynchronize(stream_));
}

void CudnnSession::step() {
  if (graph_exec_) CB_CHECK_CUDA(cudaGraphLaunch(graph_exec_, stream_));
  else run(0, step_end(), false);
  ++steps_;
  fault_injection::after_step(static_cast<long long>(steps_), stream_);  // test-only trap (CROSSBENCH_GPU_FAULT)
}

MemoryUse CudnnSession::memory() const {
  // The pool: everything a step touches (tensors, weights, gradients,
  // workspaces, reserve spaces), one allocation. The measured algorithm
  // search's arena lived only before it, freed before the pool was allocated,
  // and is recorded in the decisions (search_arena=) rather than here, so
  // that heuristic and exhaustive cells report the same footprint.
  return {pool_.planned_bytes()};
}

OutputCheck CudnnSession::check() {
  synchronize();
  set_dropout_step(0);
  OutputCheck result;
  // The timed path is the checked path: where the steps are one CUDA graph, check() replays that very
  // graph (its plans, fusions, layout and algorithms), not the ops eagerly. What a step leaves behind
  // (running statistics, --update sgd's weights) is saved first and restored after, so check() leaves
  // the model as it found it, as the eager path does (e.check: no running-statistics update).
  DeviceBuffer saved;
  if (graph_exec_) {
    std::size_t bytes = 0;
    for (const Tensor& t : step_state_) bytes += static_cast<std::size_t>(t.span_bytes());
    if (bytes > 0) saved = DeviceBuffer(bytes, "check()'s copy of the step's running statistics and weights");
    std::size_t at = 0;
    for (const Tensor& t : step_state_) {
      const auto n = static_cast<std::size_t>(t.span_bytes());
      CB_CHECK_CUDA(cudaMemcpyAsync(saved.data() + at, pool_.address(t.buffer) + t.offset, n, cudaMemcpyDeviceToDevice,
                                    stream_));
      at += n;
    }
    CB_CHECK_CUDA(cudaGraphLaunch(graph_exec_, stream_));
    // An inference step is the forward alone: the loss that check() reports is computed after it.
    if (!training_) run(forward_end_, loss_end_, true);
  } else {
    run(0, loss_end_, true);
    if (training_) run(loss_end_, backward_end_, true);
  }

  const std::int64_t rows = logits_.n(), classes = logits_.c();
  std::vector<float> logits(static_cast<std::size_t>(rows * classes)), row_loss(static_cast<std::size_t>(rows));
  CB_CHECK_CUDA(cudaMemcpyAsync(logits.data(), pool_.address(logits_.buffer) + logits_.offset,
                                logits.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  CB_CHECK_CUDA(cudaMemcpyAsync(row_loss.data(), pool_.address(row_loss_buffer_), row_loss.size() * sizeof(float),
                                cudaMemcpyDeviceToHost, stream_));
  std::vector<double> norms(parameters_.size() + 1, 0.0);
  if (training_) {
    auto* sums = reinterpret_cast<double*>(pool_.address(norms_buffer_));
    auto* non_finite = reinterpret_cast<unsigned long long*>(sums + parameters_.size());
    CB_CHECK_CUDA(cudaMemsetAsync(sums, 0, norms.size() * sizeof(double), stream_));
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
      const Tensor& g = parameters_[i].gradient;
      kernels::sum_of_squares(pool_.address(g.buffer) + g.offset, g.type, g.elements(), sums + i, non_finite,
                              stream_);
    }
    CB_CHECK_CUDA(cudaMemcpyAsync(norms.data(), sums, norms.size() * sizeof(double), cudaMemcpyDeviceToHost, stream_));
  }
  if (graph_exec_) {
    std::size_t at = 0;
    for (const Tensor& t : step_state_) {
      const auto n = static_cast<std::size_t>(t.span_bytes());
      CB_CHECK_CUDA(cudaMemcpyAsync(pool_.address(t.buffer) + t.offset, saved.data() + at, n, cudaMemcpyDeviceToDevice,
                                    stream_));
      at += n;
    }
  }
  synchronize();
  set_dropout_step(steps_);  // steps after check() continue the sequence

  bool finite = true;
  for (float v : logits) {
    result.logits_checksum += v;
    finite = finite && std::isfinite(v);
  }
  double loss = 0;
  for (float v : row_loss) loss += v;
  result.loss = loss / static_cast<double>(rows);
  finite = finite && std::isfinite(result.loss);
  if (training_) {
    double total = 0;
    for (std::size_t i = 0; i < parameters_.size(); ++i) {
      result.gradient_norms.push_back(std::sqrt(norms[i]));
      total += norms[i];
    }
    result.gradient_norm = std::sqrt(total);
    unsigned long long non_finite = 0;
    std::memcpy(&non_finite, &norms.back(), sizeof non_finite);
    finite = finite && non_finite == 0 && std::isfinite(total);
  } else {
    result.gradient_norm = std::numeric_limits<double>::quiet_NaN();
  }
  result.finite = finite;
  return result;
}

Exec CudnnSession::make_exec(bool check, bool probing) const {
  Exec e;
  e.dnn = dnn_;
  e.blas = blas_;
  e.lt = lt_;
  e.stream = stream_;
  e.pool = &pool_;
  e.workspace = workspace_bytes_ > 0 ? pool_.address(workspace_buffer_) : nullptr;
  e.workspace_bytes = workspace_bytes_;
  e.check = check;
  e.probing = probing;
  return e;
}

// With --cuda-graphs the profile runs as a graph too: the step captured once
// more with an event record node between ops (cudaEventRecordExternal), so
// that no op waits for the host to issue it. Issued op by op instead, a
// host-bound cell's ops include the GPU's wait for the host (16-bit ResNets at
// batch 64 on an H200: layers sum 15.6 ms against a 3.1 ms step).
OpSamples CudnnSession::profile(int repetitions) {
  const std::size_t end = step_end();
  std::vector<Event> marks;
  marks.reserve(end + 1);
  for (std::size_t i = 0; i <= end; ++i) marks.push_back(make_event());
  const Exec e = make_exec(false, false);
  const auto enqueue = [&](unsigned flags) {
    for (std::size_t i = 0; i < end; ++i) {
      CB_CHECK_CUDA(cudaEventRecordWithFlags(marks[i], stream_, flags));
      // Nsight Systems: a range per op around its launches (a graphed profile shows them once, at capture).
      const nvtx::Range op_range(ops_[i].label);
      ops_[i].run(e);
    }
    CB_CHECK_CUDA(cudaEventRecordWithFlags(marks[end], stream_, flags));
  };
  GraphExec profile_graph;
  if (graph_exec_) {
    StreamCapture capture(stream_);
    enqueue(cudaEventRecordExternal);
    profile_graph = instantiate(capture.finish());
  }
  OpSamples samples;
  for (std::size_t l = 0; l < layer_names_.size(); ++l) samples.layers.push_back({layer_names_[l], layer_kinds_[l]});
  samples.ops.assign(ops_.begin(), ops_.begin() + static_cast<std::ptrdiff_t>(end));
  for (int r = 0; r < std::max(repetitions, 1); ++r) {
    if (profile_graph) CB_CHECK_CUDA(cudaGraphLaunch(profile_graph, stream_));
    else enqueue(cudaEventRecordDefault);
    CB_CHECK_CUDA(cudaEventSynchronize(marks[end]));
    ++steps_;
    std::vector<double> per_op(end, 0.0);
    for (std::size_t i = 0; i < end; ++i) {
      float ms = 0;
      CB_CHECK_CUDA(cudaEventElapsedTime(&ms, marks[i], marks[i + 1]));
      per_op[i] = ms;
    }
    samples.ms.push_back(std::move(per_op));
  }
  return samples;
}

}  // namespace crossbench::cudnn
