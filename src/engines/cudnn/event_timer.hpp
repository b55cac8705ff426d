// The Runner's device-side step timer: CUDA events recorded on the session's
// own stream around each step (DESIGN.md "Measurement").
#pragma once

#include "crossbench/engine.hpp"
#include "engines/cudnn/handles.hpp"

namespace crossbench::cudnn {

class EventTimer final : public StepTimer {
 public:
  explicit EventTimer(cudaStream_t stream) : stream_(stream), start_(make_event()), stop_(make_event()) {}
  void start() override { CB_CHECK_CUDA(cudaEventRecord(start_, stream_)); }
  void stop() override { CB_CHECK_CUDA(cudaEventRecord(stop_, stream_)); }
  double elapsed_ms() override {  // waits until the step has finished [ms]
    CB_CHECK_CUDA(cudaEventSynchronize(stop_));
    float ms = 0;
    CB_CHECK_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  }

 private:
  cudaStream_t stream_;
  Event start_, stop_;
};

}  // namespace crossbench::cudnn
