// CudnnSession: one prepared (network, batch, precision, phase) on one GPU.
// Exposed in this header (not in the public Engine interface) so that the
// engine's tests and benches can reach what only this engine has.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "crossbench/device.hpp"
#include "crossbench/engine.hpp"
#include "crossbench/gradient_buckets.hpp"
#include "engines/cudnn/algorithm_cache.hpp"
#include "engines/cudnn/cublaslt_matmul.hpp"
#include "engines/cudnn/cudnn_settings.hpp"
#include "engines/cudnn/event_timer.hpp"
#include "engines/cudnn/graph.hpp"
#include "engines/cudnn/graph_convolution_cache.hpp"

namespace crossbench::cudnn {

class CudnnSession final : public Session {
 public:
  // Builds, plans, allocates and initialises everything; throws OutOfMemory
  // (having released all it took) when the cell does not fit.
  // With `communicator`: data-parallel training (Engine::prepare with a communicator).
  // `algorithm_cache`: the engine's measured choices (shared across cells);
  // nullptr: the session keeps its own, in memory.
  CudnnSession(const Network& network, const CellSpec& cell, const CudnnConfig& config, const Device& device,
               Communicator* communicator = nullptr, AlgorithmCache* algorithm_cache = nullptr,
               GraphPlanStore* graph_plans = nullptr);
  ~CudnnSession() override;

  void step() override;  // enqueues one step on the session's stream and returns
  StepTimer& timer() override { return *timer_; }
  MemoryUse memory() const override;
  OutputCheck check() override;
  OpSamples profile(int repetitions) override;

  // ---- For tests and benches ----
  std::int64_t unshared_bytes() const { return pool_.unshared_bytes(); }
  std::int64_t pool_bytes() const { return pool_.planned_bytes(); }
  std::size_t op_count() const { return ops_.size(); }
  bool uses_cuda_graph() const { return static_cast<bool>(graph_exec_); }
  // Parameter `index` (layer order: weight, bias, gamma, beta) as stored,
  // widened to fp32 (tests compare data-parallel and single-GPU weights).
  std::size_t parameter_count() const { return parameters_.size(); }
  int parameter_layer(std::size_t index) const { return parameters_.at(index).layer; }  // its layer's index
  std::vector<float> parameter_storage(std::size_t index);
  // Overwrites every parameter with `source`'s (a session of the same network, precision
  // and layout): tests compare one step of two sessions from the same, non-zero weights.
  void copy_parameters_from(CudnnSession& source);
  // What the last step() left (after it has finished), as stored, in fp32:
  // parameter `index`'s gradient (training) and the logits, (N, classes).
  // Tests compare a CUDA graph's replay with eager steps element by element.
  std::vector<float> gradient_storage(std::size_t index);
  std::vector<float> logits_storage();
  // What a step writes that outlives it: every batch-norm's running mean and
  // running variance (layer order), then, under --update sgd, the weights.
  std::size_t step_state_count() const { return step_state_.size(); }
  std::vector<float> step_state_storage(std::size_t index);

 private:
  // What an op sees (graph.hpp's Exec): the session's handles, stream, pool and workspace.
  Exec make_exec(bool check, bool probing) const;
  void run(std::size_t begin, std::size_t end, bool check, bool probing = false);
  void initialise(const Network& network, const Builder& b);
  void capture_graph();
  // engine.search_in_step (cudnn_session_in_step.cpp): the layers' near-tied choices timed inside the
  // captured step, each kept where the step runs faster with it; recorded in (and replayed from) `cache`
  // under `cell_key`. Returns the decisions' "in_step=..." (empty: no choice to make).
  std::string choose_in_step(AlgorithmCache& cache, const std::string& cell_key);
  double median_graphed_step_ms();  // [ms] of kStepTimedReplays replays of graph_exec_ after a few untimed
  std::size_t step_end() const { return training_ ? ops_.size() : forward_end_; }
  void set_dropout_step(std::uint64_t step);
  void add_gradient_averaging();
  void make_gradient_buckets();
  void synchronize();  // the session's stream, watching the communicator in data parallel
  // Synchronises, then copies a packed tensor to the host, widened to fp32 (fp32, bf16, fp16).
  std::vector<float> fp32_storage(const Tensor& t, const char* what);

  CellSpec cell_;
  CudnnConfig config_;
  bool training_ = false;
  std::vector<std::string> layer_names_, layer_kinds_;
  // Declaration order is release order reversed: the graph and the pool go
  // before the handles, the handles before the stream.
  Stream stream_;
  CudnnHandle dnn_;
  CublasHandle blas_;
  LtHandle lt_;
  DeviceBuffer pool_spacer_;  // engine.pool_spacer_mb: held before the pool, never read or written
  MemoryPool pool_;
  std::vector<Op> ops_;
  std::vector<Parameter> parameters_;
  // The Graph API graphs the layers' plans run in, one per distinct problem (released after the layers,
  // before the handles).
  GraphConvolutionCache graph_convolutions_;
  std::vector<std::unique_ptr<LayerImpl>> impls_;
  std::size_t forward_end_ = 0, loss_end_ = 0, backward_end_ = 0;
  Tensor logits_;
  // What one step writes that must outlive it (batch-norm running statistics; the weights under
  // --update sgd): check() restores them after replaying the step's graph.
  std::vector<Tensor> step_state_;
  int row_loss_buffer_ = -1, step_buffer_ = -1, workspace_buffer_ = -1, cublas_workspace_buffer_ = -1,
      norms_buffer_ = -1;
  std::size_t workspace_bytes_ = 0;
  std::int64_t arena_peak_bytes_ = 0;
  Graph graph_;
  GraphExec graph_exec_;
  std::unique_ptr<EventTimer> timer_;
  std::uint64_t steps_ = 0;
  std::unique_ptr<AlgorithmCache> own_algorithm_cache_;  // without the engine's
  // Data parallel: the group's communicator, the buckets over the gradients,
  // and events around the wait for the averages (the exposed communication).
  Communicator* communicator_ = nullptr;
  std::unique_ptr<GradientBuckets> buckets_;
  Event backward_done_, averages_done_;
  std::int64_t first_image_ = 0;
};

}  // namespace crossbench::cudnn
