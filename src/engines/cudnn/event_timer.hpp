// The Runner's device-side step timer: CUDA events recorded on the session's
// own stream around each step (DESIGN.md "Measurement").
#pragma once

#include <chrono>
#include <limits>
#include <thread>

#include "crossbench/communicator.hpp"
#include "crossbench/engine.hpp"
#include "engines/cudnn/handles.hpp"

namespace crossbench::cudnn {

// Waits for `event`; with a communicator, by polling its health meanwhile.
inline void wait_for(cudaEvent_t event, Communicator* communicator) {
  if (communicator == nullptr) {
    CB_CHECK_CUDA(cudaEventSynchronize(event));
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  cudaError_t status;
  while ((status = cudaEventQuery(event)) == cudaErrorNotReady) {
    communicator->check_health(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    std::this_thread::yield();
  }
  CB_CHECK_CUDA(status);
}

class EventTimer final : public StepTimer {
 public:
  explicit EventTimer(cudaStream_t stream) : stream_(stream), start_(make_event()), stop_(make_event()) {}
  void start() override { CB_CHECK_CUDA(cudaEventRecord(start_, stream_)); }
  void stop() override { CB_CHECK_CUDA(cudaEventRecord(stop_, stream_)); }
  // Data parallel: the wait polls, so that a failed or stuck collective ends
  // the cell (Communicator::check_health) instead of hanging the rank.
  void watch(Communicator* communicator) { watched_ = communicator; }
  // Data parallel: the events the step records around its wait for the
  // gradient averages (owned by the session, which outlives its timer).
  void time_exposed_communication(cudaEvent_t backward_done, cudaEvent_t averages_done) {
    backward_done_ = backward_done;
    averages_done_ = averages_done;
  }
  double elapsed_ms() override {  // waits until the step has finished [ms]
    wait_for(stop_, watched_);
    float ms = 0;
    CB_CHECK_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
    timed_ = true;
    return ms;
  }
  double exposed_communication_ms() override {  // [ms]; the step has finished (elapsed_ms)
    if (backward_done_ == nullptr || !timed_) return std::numeric_limits<double>::quiet_NaN();
    float ms = 0;
    CB_CHECK_CUDA(cudaEventElapsedTime(&ms, backward_done_, averages_done_));
    return ms;
  }

 private:
  cudaStream_t stream_;
  Event start_, stop_;
  Communicator* watched_ = nullptr;
  cudaEvent_t backward_done_ = nullptr, averages_done_ = nullptr;
  bool timed_ = false;  // a step has been timed: the exposed-communication events are recorded
};

}  // namespace crossbench::cudnn
