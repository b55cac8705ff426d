// Marks: CUDA events on XLA's own stream at the start of the JAX worker's steps (DESIGN.md,
// Measurement "One clock").
//
// One XLA FFI handler, registered by the worker (src/workers/jax/step_events.py) as a custom-call
// target of the CUDA platform:
//   crossbench_step_mark  records the next mark on the stream XLA runs it on.
// It is called in a program of its own (step_events.py, Marks.program: the call alone, no operand),
// which the worker dispatches before each step and after the last, so the step's own program stays
// whole (an FFI call inside the step made bf16 inference read 1.6-2.4x an untraced loop on the
// H200, likely by splitting XLA's command buffer). It returns an f32 scalar that it never writes
// (its value means nothing). It does not declare the command-buffer trait
// (XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE): XLA calls it on every execution, on the
// program's stream (DESIGN.md, Measurement "One clock").
//
// Plain C functions for ctypes read the periods back: crossbench_step_events_period_ms (step k's
// period [ms], mark k to mark k + 1, waiting for mark k + 1), _reset, _ring_size, _last_error.
//
// The one process-wide EventRing: XLA calls a handler with its call frame alone (no user data), so
// the handler and the ctypes functions can meet only in state of the library itself. It is built
// on first use and destroyed when the library unloads (its events with it).
#include "event_ring.hpp"

#include "xla/ffi/api/ffi.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace ffi = xla::ffi;
using crossbench::jax_events::EventRing;

namespace {

// Marks whose events stay readable. Reading step k needs marks k and k + 1 while the worker has at
// most 8 steps in flight (worker.py, STEPS_IN_FLIGHT) and then the closing mark: at most 9 marks
// from mark k on are recorded, so 9 slots would do; 64 leaves margin for a caller that reads later.
constexpr int kRingSize = 64;

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

ffi::Error record_mark(cudaStream_t stream, ffi::ResultBuffer<ffi::F32> /*unwritten*/) {
  if (auto failed = ring().record_mark(stream); !failed.empty()) {
    return ffi::Error::Internal("crossbench_step_mark: " + failed);
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(crossbench_step_mark, record_mark,
                              ffi::Ffi::Bind().Ctx<ffi::PlatformStream<cudaStream_t>>().Ret<ffi::Buffer<ffi::F32>>());

extern "C" {

// Step `step`'s (counted from the last reset) period [ms], mark step to mark step + 1, into *ms;
// 0, or 1 with the reason in crossbench_step_events_last_error().
int crossbench_step_events_period_ms(std::int64_t step, float* ms) { return reported(ring().period_ms(step, ms)); }

// The next mark is mark 0 again. Always 0.
int crossbench_step_events_reset() {
  ring().reset();
  return reported({});
}

int crossbench_step_events_ring_size() { return ring().size(); }

// The reason of this thread's last failed call ("" after a success); valid until its next call.
const char* crossbench_step_events_last_error() { return last_error.c_str(); }

}  // extern "C"
