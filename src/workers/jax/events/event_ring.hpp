// The ring of marks of the JAX worker's timed steps: one CUDA event per step, recorded at the
// step's start on XLA's stream.
//
// Mark i (counted from the last reset) is recorded in slot i % size. The FFI handler
// (step_events.cpp) calls record_mark on the thread XLA enqueues the step's program from, in the
// order the device's executions are enqueued: step i's mark, then (after the last step) one
// closing mark. The worker reads step i's period, mark i to mark i + 1, from its own thread once
// both are recorded; mark i's slot stays readable until mark i + size is recorded.
#pragma once

#include "cuda_event.hpp"

#include <cuda_runtime_api.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace crossbench::jax_events {

class EventRing {
 public:
  explicit EventRing(int size);

  // Records the next mark on `stream`. "" or the CUDA call that failed.
  std::string record_mark(cudaStream_t stream);
  // Step `step`'s period [ms] in *ms: cudaEventElapsedTime(mark step, mark step + 1), after waiting
  // for mark step + 1 on the device. "" or what failed (a mark not recorded, a slot a later mark
  // took, a CUDA call).
  std::string period_ms(std::int64_t step, float* ms);
  // Forgets every mark: the next mark is mark 0. The events are kept for reuse.
  void reset();
  int size() const { return static_cast<int>(slots_.size()); }

 private:
  bool readable(std::int64_t step) const;  // under mutex_
  std::string unreadable(std::int64_t step) const;  // under mutex_: why not

  std::mutex mutex_;
  std::condition_variable marked_;  // notified by record_mark
  std::vector<CudaEvent> slots_;    // events created lazily, on the device of the first mark
  int device_ = -1;                 // the CUDA device the events belong to (-1: none created yet)
  std::int64_t marks_ = 0;          // marks recorded since the last reset
};

}  // namespace crossbench::jax_events
