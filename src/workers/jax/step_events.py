"""Marks: CUDA events on XLA's own stream between the JAX worker's steps (``engine.jax_timing = events``).

libcrossbench_jax_events.so (src/workers/jax/events/, built by CMake where jaxlib's FFI headers
are found) holds one XLA FFI handler, ``crossbench_step_mark``: it records the next mark (a CUDA
event) on the stream XLA runs it on. The mark is a program of its own (``Marks.program``: the
mark call alone, jitted once), dispatched on the steps' device before each step and once after
the last; the step's program is the plain jitted step, exactly what the other timings and a
user's loop run (no call, no barrier inside it: XLA's command buffers, its CUDA graphs, keep the
whole step). A device's programs run in dispatch order on its one compute stream, so mark k
precedes every kernel of step k and follows every kernel of step k - 1.

Why not inside the step's program: an FFI call first in the step, ordered by an optimization
barrier over the step's inputs, read 0.9998-1.04 of an untraced loop in training but 1.63-1.65
(AlexNet) and 2.27-2.43 (ResNet-50) in bf16 inference on the H200 (bench/results/2026-12-02/
call15, call16), near the host's synchronous time: likely the call splits XLA's command buffer
and a step of short kernels then waits on their launches (not measured apart).

Step k's sample is the period from its mark to the next one: cudaEventElapsedTime(mark k, mark
k + 1) [ms], i.e. step k, the next mark program (one event record, no kernel) and whatever gap
follows on the device before it (the time the device waits for the host counts, as it does in a
user's training loop). Mark i sits in slot i % ring size of the library's ring (reset before each
batch); step k is read (the library waits for mark k + 1 on the device) while later steps are in
flight.

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
MARK_TARGET = "crossbench_step_mark"

# Where the target registered in this process came from: XLA keeps a registration for the process's
# life and takes a name once, so the record of it must live as long (a module global for that reason only).
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
        missing = [name for name in (MARK_TARGET, "crossbench_step_events_period_ms",
                                     "crossbench_step_events_reset", "crossbench_step_events_ring_size",
                                     "crossbench_step_events_last_error") if not hasattr(library, name)]
        if missing:
            tried.append(f"{path}: lacks {', '.join(missing)}")
            continue
        library.crossbench_step_events_period_ms.argtypes = [ctypes.c_int64, ctypes.POINTER(ctypes.c_float)]
        library.crossbench_step_events_period_ms.restype = ctypes.c_int
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


class Marks:
    """The mark's program; subclasses give the call: mark_token() (no operand, traced into the
    program, returning an f32 scalar). StepEvents gives the library's FFI call; the worker's tests
    give a CPU stand-in."""

    def __init__(self, jax):
        self.jax = jax
        self._program = None

    def mark_token(self):
        raise NotImplementedError

    def program(self):
        """The mark's own program (jitted once, compiled on its first call): the mark call alone,
        no input; its token means nothing. Run it on the steps' device (jax.default_device)."""
        if self._program is None:
            self._program = self.jax.jit(lambda: self.mark_token())
        return self._program


class StepEvents(Marks):
    """The library's ring seen from the worker: program() is the mark's program (its FFI call),
    period_ms(k) reads step k's period (mark k to mark k + 1) since the last reset()."""

    def __init__(self, jax, library, path):
        import jax.numpy as jnp

        super().__init__(jax)
        self.library = library
        self.path = path
        self.ring_size = int(library.crossbench_step_events_ring_size())
        token = jax.ShapeDtypeStruct((), jnp.float32)  # the handler's unwritten result
        self._mark = _ffi_module(jax).ffi_call(MARK_TARGET, token, has_side_effect=True)

    def mark_token(self):
        return self._mark()

    @classmethod
    def open(cls, jax, device):
        """(StepEvents, None) ready to time steps on `device`, or (None, why not). Registers the
        handler once per process, then runs marks around a tiny program twice (untimed) and reads
        both periods back, as the worker reads its steps (no wait for the programs' outputs), so
        that a library XLA cannot call fails here, not in a timed batch."""
        global _registered_from
        if not is_cuda(device):
            return None, f"not a CUDA device ({device.platform})"
        library, where = load_library()
        if library is None:
            return None, where
        if _registered_from is None:
            try:
                ffi = _ffi_module(jax)
                ffi.register_ffi_target(MARK_TARGET, ffi.pycapsule(getattr(library, MARK_TARGET)), platform="CUDA")
            except Exception as error:  # noqa: BLE001 (any failure: device-paced, with the reason)
                return None, f"registering the FFI target of {where} failed: {type(error).__name__}: {error}"
            _registered_from = where
        elif _registered_from != where:
            return None, f"the FFI target is registered from {_registered_from}, not {where}"
        try:
            events = cls(jax, library, where)
            tiny = jax.jit(lambda x: x + 1)
            mark = events.program()
            x = jax.device_put(jax.numpy.zeros((), jax.numpy.float32), device)
            with jax.default_device(device):
                jax.block_until_ready((tiny(x), mark()))  # compiles both, untimed
                events.reset()
                outputs = [mark(), tiny(x), mark(), tiny(x), mark()]
                periods = [events.period_ms(0), events.period_ms(1)]
                jax.block_until_ready(outputs)
            events.reset()
        except Exception as error:  # noqa: BLE001
            return None, f"a first mark failed on {device}: {type(error).__name__}: {error}"
        if not all(math.isfinite(ms) and ms >= 0 for ms in periods):
            return None, f"a first pair of marks read periods {periods} ms"
        return events, None

    def reset(self):
        self.library.crossbench_step_events_reset()

    def period_ms(self, step):
        """Step `step`'s period [ms] (counted from the last reset): cudaEventElapsedTime from its
        mark to the next; waits for the next mark on the device. Raises RuntimeError with the
        library's reason when it cannot be read."""
        ms = ctypes.c_float()
        if self.library.crossbench_step_events_period_ms(step, ctypes.byref(ms)) != 0:
            reason = self.library.crossbench_step_events_last_error().decode(errors="replace")
            raise RuntimeError(f"{LIBRARY}: {reason}")
        return float(ms.value)

    def describe(self):
        return f"{self.path}, ring of {self.ring_size} marks"
