// OnednnSession: one prepared (network, batch, precision, phase) on the CPU.
// Exposed in this header (not in the public Engine interface) so that the
// engine's tests can read parameters, activations and gradients.
#pragma once

#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "crossbench/engine.hpp"
#include "crossbench/synthetic.hpp"
#include "engines/onednn/graph.hpp"

namespace crossbench::onednn {

// The steady clock around a step (CPU steps are synchronous), and in data
// parallel the step's wait for the gradient averages, which the graph's
// gradient-averaging op measures (Graph::data_parallel->last_exposed_ms).
class OnednnTimer final : public StepTimer {
 public:
  void start() override { clock_.start(); }
  void stop() override { clock_.stop(); }
  double elapsed_ms() override { return clock_.elapsed_ms(); }
  double exposed_communication_ms() override {
    return exposed_ms_ != nullptr ? *exposed_ms_ : std::numeric_limits<double>::quiet_NaN();
  }
  void time_exposed_communication(const double* exposed_ms) { exposed_ms_ = exposed_ms; }  // [ms], the graph's

 private:
  SteadyClockTimer clock_;
  const double* exposed_ms_ = nullptr;
};

class OnednnSession final : public Session {
 public:
  // With `communicator`: data-parallel training (Engine::prepare with a communicator).
  OnednnSession(const Network& network, const CellSpec& cell, const EngineConfig& config,
                const GraphOptions& options = {}, Communicator* communicator = nullptr);

  void step() override;
  StepTimer& timer() override { return timer_; }
  MemoryUse memory() const override { return {static_cast<std::int64_t>(graph_->pool.planned_bytes())}; }
  OutputCheck check() override;
  // --layer-times: every op of `repetitions` steps timed, raw (profile.cpp).
  OpSamples profile(int repetitions) override;

  // ---- For tests: values in canonical layouts (synthetic.hpp), as fp32 ----
  // A parameter's value and gradient (after check() or step() in training).
  std::vector<float> parameter(int layer, synthetic::Slot slot);
  std::vector<float> parameter_gradient(int layer, synthetic::Slot slot);
  // A layer's output, NCHW (or (N, features)), and the gradient of the loss
  // with respect to it. Meaningful only with GraphOptions{reuse_memory = false,
  // in_place = false}: otherwise the buffer may hold a later tensor.
  // Not every layer's output exists: a fused group (kit/fusion.hpp) writes only its last layer's.
  bool has_output(int layer) const { return graph_->outputs.at(static_cast<std::size_t>(layer)).valid(); }
  const kit::FusionPlan& fusions() const { return graph_->fusions; }
  std::vector<float> output(int layer);
  std::vector<float> output_gradient(int layer);
  bool has_output_gradient(int layer) const { return graph_->gradients.at(static_cast<std::size_t>(layer)).valid(); }
  std::vector<float> logits();
  std::size_t unshared_bytes() const { return graph_->pool.unshared_bytes(); }

 private:
  void run(std::size_t begin, std::size_t end);
  std::vector<float> to_canonical(const Tensor& tensor, const md& canonical);
  const Parameter& find(int layer, synthetic::Slot slot) const;

  std::unique_ptr<Graph> graph_;
  std::vector<std::pair<std::string, std::string>> network_layers_;  // (name, kind) in layer order
  EngineConfig config_;
  OnednnTimer timer_;
  std::uint64_t steps_ = 0;
};

}  // namespace crossbench::onednn
