"""CUDA events on XLA's own stream around the JAX worker's steps (``engine.jax_timing = events``).

libcrossbench_jax_events.so (src/workers/jax/events/, built by CMake where jaxlib's FFI headers
are found) holds two XLA FFI handlers: ``crossbench_step_start`` records a step's start event on
the stream XLA runs it on, ``crossbench_step_end`` the step's end event. Each is registered as a
custom-call target of the CUDA platform and jitted alone into a tiny program (one custom call, an
unwritten f32 scalar as its result, ``has_side_effect`` so XLA keeps it). The worker dispatches
start, the step, end: PjRt enqueues every program of a device, in dispatch order, on that device's
one compute stream (xla/pjrt/pjrt_stream_executor_client.cc: each execution's stream is
``device_state->compute_stream()``; streams an XLA program forks for its own concurrent work join
it again before the program ends), so the two events bracket exactly the step's kernels, as CUDA
events bracket a step on the cudnn engine's and PyTorch's streams. Step i's events sit in slot
i % ring size of the library's ring; its time is read (cudaEventElapsedTime [ms]) once its end
program's result is ready, i.e. once the end event has been recorded and passed.

Where the library is looked for, first found wins:
  $CROSSBENCH_JAX_EVENTS_LIBRARY (a path: only that one),
  next to this file (installed: PREFIX/share/crossbench/workers/jax/),
  $CROSSBENCH_BINARY_DIR (the crossbench binary's folder, which it tells its workers: a build
  folder, a bundle's .bundle/bin),
  the dynamic linker's own search by name (LD_LIBRARY_PATH: a bundle's .bundle/run sets it).
Anything that stops events (no library, not a CUDA device, a registration or a first run that
fails) is returned as the reason, which the worker records in ``decisions`` when it falls back.
"""
import ctypes
import math
import os

LIBRARY = "libcrossbench_jax_events.so"
LIBRARY_ENV = "CROSSBENCH_JAX_EVENTS_LIBRARY"
BINARY_DIR_ENV = "CROSSBENCH_BINARY_DIR"
START_TARGET, END_TARGET = "crossbench_step_start", "crossbench_step_end"

# The targets registered in this process: XLA keeps a registration for the process's life and
# takes a name once, so the record of it must live as long (a module global for that reason only).
_registered_from = None


def candidates():
    """The library paths to try, in order (see the module's docstring)."""
    explicit = os.environ.get(LIBRARY_ENV)
    if explicit:
        return [explicit]
    paths = [os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY)]
    binary_dir = os.environ.get(BINARY_DIR_ENV)
    if binary_dir:
        paths.append(os.path.join(binary_dir, LIBRARY))
    paths.append(LIBRARY)  # a bare name: the dynamic linker searches LD_LIBRARY_PATH and its cache
    return paths


def load_library():
    """(ctypes.CDLL, path) of the first candidate that loads and has every symbol, or (None, why)."""
    tried = []
    for path in candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path}: absent")
            continue
        try:
            library = ctypes.CDLL(path)
        except OSError as error:
            tried.append(f"{path}: {error}")
            continue
        missing = [name for name in (START_TARGET, END_TARGET, "crossbench_step_events_elapsed_ms",
                                     "crossbench_step_events_reset", "crossbench_step_events_ring_size",
                                     "crossbench_step_events_last_error") if not hasattr(library, name)]
        if missing:
            tried.append(f"{path}: lacks {', '.join(missing)}")
            continue
        library.crossbench_step_events_elapsed_ms.argtypes = [ctypes.c_int64, ctypes.POINTER(ctypes.c_float)]
        library.crossbench_step_events_elapsed_ms.restype = ctypes.c_int
        library.crossbench_step_events_reset.restype = ctypes.c_int
        library.crossbench_step_events_ring_size.restype = ctypes.c_int
        library.crossbench_step_events_last_error.restype = ctypes.c_char_p
        return library, path
    return None, f"{LIBRARY} not found ({'; '.join(tried)})"


def is_cuda(device):
    """Whether `device` is a CUDA GPU (not the CPU, not ROCm)."""
    if device.platform not in ("gpu", "cuda"):
        return False
    version = str(getattr(getattr(device, "client", None), "platform_version", "")).lower()
    return "rocm" not in version and "hip" not in version


def _ffi_module(jax):
    try:
        import jax.ffi as ffi  # jax 0.5 and later
        if hasattr(ffi, "ffi_call"):
            return ffi
    except ImportError:
        pass
    import jax.extend.ffi as ffi  # jax 0.4.x
    return ffi


class StepEvents:
    """The library's ring seen from the worker: start() and end() dispatch the two tiny programs
    (asynchronously, like the step), elapsed_ms(i) reads step i's time since the last reset()."""

    def __init__(self, jax, library, path):
        import jax.numpy as jnp

        self.jax = jax
        self.library = library
        self.path = path
        self.ring_size = int(library.crossbench_step_events_ring_size())
        ffi = _ffi_module(jax)
        token = jax.ShapeDtypeStruct((), jnp.float32)  # the handlers' unwritten result
        self._start = jax.jit(ffi.ffi_call(START_TARGET, token, has_side_effect=True))
        self._end = jax.jit(ffi.ffi_call(END_TARGET, token, has_side_effect=True))

    @classmethod
    def open(cls, jax, device):
        """(StepEvents, None) ready to time steps on `device`, or (None, why not). Registers the
        handlers once per process, then runs one start/end pair (compiling both programs, untimed)
        and reads it back, so that a library XLA cannot call fails here, not in the timed steps."""
        global _registered_from
        if not is_cuda(device):
            return None, f"not a CUDA device ({device.platform})"
        library, where = load_library()
        if library is None:
            return None, where
        if _registered_from is None:
            try:
                ffi = _ffi_module(jax)
                for target in (START_TARGET, END_TARGET):
                    ffi.register_ffi_target(target, ffi.pycapsule(getattr(library, target)), platform="CUDA")
            except Exception as error:  # noqa: BLE001 (any failure: device-paced, with the reason)
                return None, f"registering the FFI targets of {where} failed: {type(error).__name__}: {error}"
            _registered_from = where
        elif _registered_from != where:
            return None, f"the FFI targets are registered from {_registered_from}, not {where}"
        try:
            events = cls(jax, library, where)
            events.reset()
            jax.block_until_ready(events.start())
            jax.block_until_ready(events.end())
            first = events.elapsed_ms(0)
            events.reset()
        except Exception as error:  # noqa: BLE001
            return None, f"a first start/end pair failed on {device}: {type(error).__name__}: {error}"
        if not math.isfinite(first) or first < 0:
            return None, f"a first start/end pair read {first} ms"
        return events, None

    def start(self):
        """Dispatches the next step's start event (the program's unwritten output)."""
        return self._start()

    def end(self):
        """Dispatches the open step's end event; its output is ready once the end event has passed."""
        return self._end()

    def reset(self):
        self.library.crossbench_step_events_reset()

    def elapsed_ms(self, step):
        """Step `step`'s start-to-end time [ms] (counted from the last reset); waits for its end
        event. Raises RuntimeError with the library's reason when it cannot be read."""
        ms = ctypes.c_float()
        if self.library.crossbench_step_events_elapsed_ms(step, ctypes.byref(ms)) != 0:
            reason = self.library.crossbench_step_events_last_error().decode(errors="replace")
            raise RuntimeError(f"{LIBRARY}: {reason}")
        return float(ms.value)

    def describe(self):
        return f"{self.path}, ring of {self.ring_size}"
