#include "event_ring.hpp"

namespace crossbench::jax_events {

EventRing::EventRing(int size) : slots_(static_cast<std::size_t>(size > 0 ? size : 1)) {}

std::string EventRing::record_start(cudaStream_t stream) {
  std::lock_guard lock(mutex_);
  if (starts_ != ends_) {
    return "start of step " + std::to_string(starts_) + " while step " + std::to_string(ends_) +
           " has no end (every start needs its end before the next start)";
  }
  if (device_ < 0) {
    // The handler runs with XLA's context current: the events belong to the device XLA runs on.
    if (auto failed = cuda_failure("cudaGetDevice", cudaGetDevice(&device_)); !failed.empty()) {
      device_ = -1;
      return failed;
    }
  }
  Slot& slot = slots_[static_cast<std::size_t>(starts_ % size())];
  if (auto failed = slot.start.create(); !failed.empty()) return failed;
  if (auto failed = slot.end.create(); !failed.empty()) return failed;
  if (auto failed = cuda_failure("cudaEventRecord(start)", cudaEventRecord(slot.start.get(), stream));
      !failed.empty()) {
    return failed;
  }
  ++starts_;
  return {};
}

std::string EventRing::record_end(cudaStream_t stream) {
  std::lock_guard lock(mutex_);
  if (ends_ == starts_) return "end of step " + std::to_string(ends_) + " without its start";
  Slot& slot = slots_[static_cast<std::size_t>(ends_ % size())];
  if (auto failed = cuda_failure("cudaEventRecord(end)", cudaEventRecord(slot.end.get(), stream)); !failed.empty()) {
    return failed;
  }
  ++ends_;
  return {};
}

bool EventRing::readable(std::int64_t step) const {
  return step >= 0 && step < ends_ && step >= starts_ - size();
}

std::string EventRing::elapsed_ms(std::int64_t step, float* ms) {
  cudaEvent_t start = nullptr, end = nullptr;
  int device = -1;
  {
    std::lock_guard lock(mutex_);
    if (!readable(step)) {
      return "step " + std::to_string(step) + " is not readable: " + std::to_string(ends_) + " steps ended, " +
             std::to_string(starts_) + " started, " + std::to_string(size()) + " slots";
    }
    const Slot& slot = slots_[static_cast<std::size_t>(step % size())];
    start = slot.start.get();
    end = slot.end.get();
    device = device_;
  }
  // Outside the lock: the wait must not hold up XLA's thread recording the next steps.
  if (auto failed = cuda_failure("cudaSetDevice", cudaSetDevice(device)); !failed.empty()) return failed;
  if (auto failed = cuda_failure("cudaEventSynchronize(end)", cudaEventSynchronize(end)); !failed.empty()) {
    return failed;
  }
  if (auto failed = cuda_failure("cudaEventElapsedTime", cudaEventElapsedTime(ms, start, end)); !failed.empty()) {
    return failed;
  }
  std::lock_guard lock(mutex_);
  if (!readable(step)) return "step " + std::to_string(step) + "'s slot was taken by a later step while it was read";
  return {};
}

void EventRing::reset() {
  std::lock_guard lock(mutex_);
  starts_ = ends_ = 0;
}

}  // namespace crossbench::jax_events
