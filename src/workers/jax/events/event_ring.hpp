// The ring of (start, end) event pairs of the JAX worker's timed steps.
//
// Step i (counted from the last reset) records its start and end events in slot i % size. The FFI
// handlers (step_events.cpp) call record_start / record_end on XLA's thread, in the order the
// device's executions are enqueued; the worker reads step i's elapsed time from its own thread
// once step i's end has completed. A step's slot stays readable until step i + size starts.
#pragma once

#include "cuda_event.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace crossbench::jax_events {

class EventRing {
 public:
  explicit EventRing(int size);

  // Records the next step's start event on `stream`. "" or what failed (a CUDA call, or a start
  // while the previous step has no end).
  std::string record_start(cudaStream_t stream);
  // Records the open step's end event on `stream`. "" or what failed (a CUDA call, or no open step).
  std::string record_end(cudaStream_t stream);
  // Step `step`'s start-to-end time [ms] in *ms, after waiting for its end event. "" or what
  // failed (a step not ended yet, one whose slot a later step took, a CUDA call).
  std::string elapsed_ms(std::int64_t step, float* ms);
  // Forgets every step: the next start is step 0. The events are kept for reuse.
  void reset();
  int size() const { return static_cast<int>(slots_.size()); }

 private:
  struct Slot {
    CudaEvent start, end;
  };

  bool readable(std::int64_t step) const;  // under mutex_

  std::mutex mutex_;
  std::vector<Slot> slots_;  // events created lazily, on the device of the first record
  int device_ = -1;          // the CUDA device the events belong to (-1: none created yet)
  std::int64_t starts_ = 0;  // starts recorded since the last reset
  std::int64_t ends_ = 0;    // ends recorded since the last reset (starts_ - 1 or starts_)
};

}  // namespace crossbench::jax_events
