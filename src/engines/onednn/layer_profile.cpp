// OnednnSession::layer_times (--layer-times): the step's ops run one by one,
// each bracketed by the steady clock, and charged to the layer that built it
// (Op::layer). CPU primitives run synchronously on the calling thread's
// OpenMP team, so the clock around an op is that op's time. This pass runs
// after the Runner's timed steps, never among them.
#include <omp.h>

#include <algorithm>
#include <chrono>

#include "crossbench/error.hpp"
#include "engines/onednn/onednn_session.hpp"

namespace crossbench::onednn {
namespace {

using Clock = std::chrono::steady_clock;

double milliseconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace

std::vector<LayerTime> OnednnSession::layer_times(int repetitions) {
  if (config_.threads > 0 && omp_get_max_threads() != config_.threads) omp_set_num_threads(config_.threads);
  const std::size_t layers = network_layers_.size();
  const std::size_t end = graph_->training ? graph_->ops.size() : graph_->forward_end;  // exactly what step() runs
  // Per layer, one entry per repetition [ms].
  std::vector<std::vector<double>> forward(layers), backward(layers);
  for (int r = 0; r < std::max(repetitions, 1); ++r) {
    // The same state as a step: a new dropout mask, running statistics updated.
    graph_->state->dropout_step = steps_++;
    graph_->state->update_running_stats = true;
    std::vector<double> f(layers, 0.0), b(layers, 0.0);
    for (std::size_t i = 0; i < end; ++i) {
      const auto begin = Clock::now();
      run(i, i + 1);  // ends with stream.wait(): the op has finished when the clock is read
      const double ms = milliseconds(begin, Clock::now());
      const auto layer = static_cast<std::size_t>(graph_->ops[i].layer);
      // The loss (and its gradient) counts as the loss layer's forward; backward
      // ops and the weight update (--update sgd) as their layer's backward.
      (i < graph_->loss_end ? f : b)[layer] += ms;
    }
    for (std::size_t l = 0; l < layers; ++l) {
      forward[l].push_back(f[l]);
      backward[l].push_back(b[l]);
    }
  }
  std::vector<LayerTime> times;
  times.reserve(layers);
  for (std::size_t l = 0; l < layers; ++l)
    times.push_back({network_layers_[l].first, network_layers_[l].second, median(forward[l]), median(backward[l])});
  return times;
}

}  // namespace crossbench::onednn
