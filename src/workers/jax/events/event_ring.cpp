#include "event_ring.hpp"

namespace crossbench::jax_events {

namespace {

// How long period_ms waits [s] for mark step + 1 where mark step is recorded already: the worker
// asks for step k only after dispatching the program holding mark k + 1, whose handler XLA may
// still be about to call (a runtime that enqueues a program from its own thread after the
// dispatch returns). Never the device's time: that wait is cudaEventSynchronize's.
constexpr std::chrono::seconds kNextMarkWait{60};

}  // namespace

EventRing::EventRing(int size) : slots_(static_cast<std::size_t>(size > 0 ? size : 1)) {}

std::string EventRing::record_mark(cudaStream_t stream) {
  {
    std::lock_guard lock(mutex_);
    if (device_ < 0) {
      // The handler runs with XLA's context current: the events belong to the device XLA runs on.
      if (auto failed = cuda_failure("cudaGetDevice", cudaGetDevice(&device_)); !failed.empty()) {
        device_ = -1;
        return failed;
      }
    }
    CudaEvent& slot = slots_[static_cast<std::size_t>(marks_ % size())];
    if (auto failed = slot.create(); !failed.empty()) return failed;
    if (auto failed = cuda_failure("cudaEventRecord(mark)", cudaEventRecord(slot.get(), stream)); !failed.empty()) {
      return failed;
    }
    ++marks_;
  }
  marked_.notify_all();
  return {};
}

bool EventRing::readable(std::int64_t step) const {
  // Marks step and step + 1 recorded, and mark step's slot not taken by mark step + size.
  return step >= 0 && step + 1 < marks_ && step >= marks_ - size();
}

std::string EventRing::unreadable(std::int64_t step) const {
  return "step " + std::to_string(step) + " is not readable (it needs marks " + std::to_string(step) + " and " +
         std::to_string(step + 1) + "): " + std::to_string(marks_) + " marks recorded, " + std::to_string(size()) +
         " slots";
}

std::string EventRing::period_ms(std::int64_t step, float* ms) {
  cudaEvent_t mark = nullptr, next_mark = nullptr;
  int device = -1;
  {
    std::unique_lock lock(mutex_);
    if (step >= 0 && marks_ == step + 1) {
      marked_.wait_for(lock, kNextMarkWait, [&] { return marks_ != step + 1; });
    }
    if (!readable(step)) return unreadable(step);
    mark = slots_[static_cast<std::size_t>(step % size())].get();
    next_mark = slots_[static_cast<std::size_t>((step + 1) % size())].get();
    device = device_;
  }
  // Outside the lock: the wait must not hold up XLA's thread recording the next marks.
  if (auto failed = cuda_failure("cudaSetDevice", cudaSetDevice(device)); !failed.empty()) return failed;
  if (auto failed = cuda_failure("cudaEventSynchronize(next mark)", cudaEventSynchronize(next_mark));
      !failed.empty()) {
    return failed;
  }
  if (auto failed = cuda_failure("cudaEventElapsedTime", cudaEventElapsedTime(ms, mark, next_mark));
      !failed.empty()) {
    return failed;
  }
  std::lock_guard lock(mutex_);
  if (!readable(step)) {
    return "step " + std::to_string(step) + "'s mark was overwritten by a later mark while it was read (" +
           std::to_string(marks_) + " marks recorded, " + std::to_string(size()) + " slots)";
  }
  return {};
}

void EventRing::reset() {
  {
    std::lock_guard lock(mutex_);
    marks_ = 0;
  }
  marked_.notify_all();  // a read waiting for a next mark gives up now, with its reason
}

}  // namespace crossbench::jax_events
