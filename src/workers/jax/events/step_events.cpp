// CUDA events on XLA's own stream around the JAX worker's steps (DESIGN.md, Measurement "One clock").
//
// Two XLA FFI handlers, registered by the worker (src/workers/jax/step_events.py) as custom-call
// targets of the CUDA platform:
//   crossbench_step_start  records the next step's start event on the stream XLA runs it on;
//   crossbench_step_end    records that step's end event on the stream XLA runs it on.
// Both sit inside the step's own jitted program (step_events.py, StepEvents.bracket): the start
// call takes no operand, and every input of the step is tied to its result by an optimization
// barrier; the end call takes every output the step computes (and the start's token) as operands,
// reads none of them and copies none (RemainingArgs: any count, any shape and dtype, left
// undecoded), so XLA schedules it after the last kernel of the step. Each returns an f32 scalar
// that it never writes (the token the data dependencies run through; its value means nothing).
// Neither declares the command-buffer trait (XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE), so
// XLA keeps both out of its CUDA graphs and calls them on every execution, on the program's
// stream, between the graphs it launches (DESIGN.md, Measurement "One clock").
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

ffi::Error record_end(cudaStream_t stream, ffi::RemainingArgs /*the step's outputs: only waited for*/,
                      ffi::ResultBuffer<ffi::F32> /*unwritten*/) {
  return as_ffi_error("crossbench_step_end", ring().record_end(stream));
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(crossbench_step_start, record_start,
                              ffi::Ffi::Bind().Ctx<ffi::PlatformStream<cudaStream_t>>().Ret<ffi::Buffer<ffi::F32>>());
XLA_FFI_DEFINE_HANDLER_SYMBOL(
    crossbench_step_end, record_end,
    ffi::Ffi::Bind().Ctx<ffi::PlatformStream<cudaStream_t>>().RemainingArgs().Ret<ffi::Buffer<ffi::F32>>());

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
