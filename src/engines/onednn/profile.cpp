// OnednnSession::profile (--layer-times): the step's ops run one by one, each
// bracketed by the steady clock, tagged with the layer that built it
// (Op::layer) and its stage. CPU primitives run synchronously on the calling
// thread's OpenMP team, so the clock around an op is that op's time. This
// pass runs after the Runner's timed steps, never among them; the Runner
// takes the medians.
#include <omp.h>

#include <algorithm>
#include <chrono>

#include "core/nvtx.hpp"
#include "engines/onednn/onednn_session.hpp"

namespace crossbench::onednn {

OpSamples OnednnSession::profile(int repetitions) {
  using Clock = std::chrono::steady_clock;
  if (config_.threads > 0 && omp_get_max_threads() != config_.threads) omp_set_num_threads(config_.threads);
  const std::size_t end = graph_->training ? graph_->ops.size() : graph_->forward_end;  // exactly what step() runs
  OpSamples samples;
  for (const auto& [name, kind] : network_layers_) samples.layers.push_back({name, kind});
  samples.ops.assign(graph_->ops.begin(), graph_->ops.begin() + static_cast<std::ptrdiff_t>(end));
  for (int r = 0; r < std::max(repetitions, 1); ++r) {
    // The same state as a step: a new dropout mask, running statistics updated.
    graph_->state->dropout_step = steps_++;
    graph_->state->update_running_stats = true;
    std::vector<double> per_op(end, 0.0);
    for (std::size_t i = 0; i < end; ++i) {
      const nvtx::Range op_range(graph_->ops[i].label);  // Nsight Systems: one range per op ("conv1 forward")
      const auto begin = Clock::now();
      run(i, i + 1);  // ends with stream.wait(): the op has finished when the clock is read
      per_op[i] = std::chrono::duration<double, std::milli>(Clock::now() - begin).count();  // [ms]
    }
    samples.ms.push_back(std::move(per_op));
  }
  return samples;
}

}  // namespace crossbench::onednn
