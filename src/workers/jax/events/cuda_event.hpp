// A CUDA event that destroys itself (RAII), and the checked-call text of the CUDA runtime's errors.
// CUDA runtime only: this library never links the driver API (libcuda); cudart finds the driver.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <utility>

namespace crossbench::jax_events {

// "" when `status` is cudaSuccess, else "<call>: <CUDA's name>: <CUDA's text>".
inline std::string cuda_failure(const char* call, cudaError_t status) {
  if (status == cudaSuccess) return {};
  return std::string(call) + ": " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status);
}

// One timing event (cudaEventDefault: timing enabled), created on the thread's current device
// by create(); destroyed with its owner. Moves, never copies.
class CudaEvent {
 public:
  CudaEvent() = default;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& other) noexcept {
    if (this != &other) {
      destroy();
      event_ = std::exchange(other.event_, nullptr);
    }
    return *this;
  }
  ~CudaEvent() { destroy(); }

  // "" or the failure; a second call does nothing.
  std::string create() {
    if (event_) return {};
    return cuda_failure("cudaEventCreateWithFlags", cudaEventCreateWithFlags(&event_, cudaEventDefault));
  }
  cudaEvent_t get() const { return event_; }

 private:
  void destroy() {
    // At process exit the runtime may be unloading already (cudaErrorCudartUnloading): nothing
    // is left to free then, and a destructor has no one to tell.
    if (event_) (void)cudaEventDestroy(event_);
    event_ = nullptr;
  }

  cudaEvent_t event_ = nullptr;
};

}  // namespace crossbench::jax_events
