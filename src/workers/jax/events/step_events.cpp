// CUDA events on XLA's own stream around the JAX worker's steps (DESIGN.md, Measurement "One clock").
//
// Two XLA FFI handlers, registered by the worker (src/workers/jax/step_events.py) as custom-call
// targets of the CUDA platform:
//   crossbench_step_start  records the next step's start event on the stream XLA runs it on;
//   crossbench_step_end    records that step's end event on the stream XLA runs it on.
// Each takes no operand and returns an f32 scalar that it never writes (a custom call needs a
// result to be dispatched and waited for; the value means nothing). The worker runs them as tiny
// jitted programs before and after each step's program: PjRt runs a device's programs in order on
// its one compute stream, so the two events bracket exactly the step's work.
//
// Plain C functions for ctypes read the times back: crossbench_step_events_elapsed_ms (step k's
// start-to-end time [ms], waiting for its end event), _reset, _ring_size, _last_error.
//
// The one process-wide EventRing: XLA calls a handler with its call frame alone (no user data), so
// the handlers and the ctypes functions can meet only in state of the library itself. It is built
// on first use and destroyed when the library unloads (its events with it).
#include "event_ring.hpp"

#include "xla/ffi/api/ffi.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace ffi = xla::ffi;
using crossbench::jax_events::EventRing;

namespace {

constexpr int kRingSize = 16;  // steps whose times stay readable: the worker keeps at most 4 in flight

EventRing& ring() {
  static EventRing the_ring(kRingSize);
  return the_ring;
}

// The last failure of a ctypes call, per calling thread (what _last_error returns).
thread_local std::string last_error;

int reported(const std::string& failure) {
  last_error = failure;
  return failure.empty() ? 0 : 1;
}

ffi::Error as_ffi_error(const char* handler, const std::string& failure) {
  if (failure.empty()) return ffi::Error::Success();
  return ffi::Error::Internal(std::string(handler) + ": " + failure);
}

ffi::Error record_start(cudaStream_t stream, ffi::ResultBuffer<ffi::F32> /*unwritten*/) {
  return as_ffi_error("crossbench_step_start", ring().record_start(stream));
}

ffi::Error record_end(cudaStream_t stream, ffi::ResultBuffer<ffi::F32> /*unwritten*/) {
  return as_ffi_error("crossbench_step_end", ring().record_end(stream));
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(crossbench_step_start, record_start,
                              ffi::Ffi::Bind().Ctx<ffi::PlatformStream<cudaStream_t>>().Ret<ffi::Buffer<ffi::F32>>());
XLA_FFI_DEFINE_HANDLER_SYMBOL(crossbench_step_end, record_end,
                              ffi::Ffi::Bind().Ctx<ffi::PlatformStream<cudaStream_t>>().Ret<ffi::Buffer<ffi::F32>>());

extern "C" {

// Step `step`'s (counted from the last reset) start-to-end time [ms] into *ms; 0, or 1 with the
// reason in crossbench_step_events_last_error().
int crossbench_step_events_elapsed_ms(std::int64_t step, float* ms) { return reported(ring().elapsed_ms(step, ms)); }

// The next start is step 0 again. Always 0.
int crossbench_step_events_reset() {
  ring().reset();
  return reported({});
}

int crossbench_step_events_ring_size() { return ring().size(); }

// The reason of this thread's last failed call ("" after a success); valid until its next call.
const char* crossbench_step_events_last_error() { return last_error.c_str(); }

}  // extern "C"
