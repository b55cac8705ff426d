"""CUDA events on XLA's own stream inside the JAX worker's steps (``engine.jax_timing = events``).

libcrossbench_jax_events.so (src/workers/jax/events/, built by CMake where jaxlib's FFI headers
are found) holds two XLA FFI handlers: ``crossbench_step_start`` records a step's start event on
the stream XLA runs it on, ``crossbench_step_end`` the step's end event. Both are custom-call
targets of the CUDA platform called INSIDE the step's own jitted program (``StepEvents.bracket``),
so a step is still one dispatch:

  start = the start call (``has_side_effect``: never removed; an unwritten f32 scalar as result)
  inputs = optimization_barrier((every input of the step, start))   # no op of the step before it
  outputs = step(inputs)
  outputs = optimization_barrier(every output the step computes)    # all of them together
  end = the end call(outputs..., start)                             # operands only waited for
  return outputs, end

``has_side_effect`` keeps a custom call from being removed or duplicated, not in program order
(XLA orders only by data; openxla/stablehlo#1365): the order comes from the data dependencies
above. XLA's GPU compiler schedules the program with the barriers in place and removes them after
scheduling (OptimizationBarrierExpander in its post-scheduling pipeline, which keeps the schedule),
and runs the scheduled thunks in order on the program's one stream; so the start event precedes
every kernel that reads an input, and the end event follows every kernel whose output the step
returns. Neither handler declares the command-buffer trait, so XLA's command-buffer (CUDA graph)
scheduling keeps both out of its graphs: a graph ends before such a custom call and a new one may
start after it (command_buffer_scheduling.cc), and the handlers run on every execution. Inputs the
step returns unchanged (the parameters of a training step without update) are left out of the
events program's outputs: XLA would add a copy of each (a parameter live out of the program) that
no barrier orders, which may fall outside the bracket (the plain step still returns and copies
them; DESIGN.md, Measurement "One clock"). Step i's events sit in slot i % ring size of the
library's ring (each start takes the next slot, its end records that slot's end); its time is read
(cudaEventElapsedTime [ms]) once the step's outputs are ready.

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


class Bracket:
    """Start and end events inside a jitted step; subclasses give the two calls: start_token()
    (no operand) and end_token(*operands), each traced into the program and returning an f32
    scalar. StepEvents gives the library's FFI calls; the worker's tests give a CPU stand-in."""

    def __init__(self, jax):
        self.jax = jax

    def start_token(self):
        raise NotImplementedError

    def end_token(self, *operands):
        raise NotImplementedError

    def bracket(self, step):
        """`step` wrapped for jax.jit: f(*args) -> (step(*args), end token), with the start call
        before every op of the step and the end call after every output it computes (the module's
        docstring). Outputs that are inputs returned unchanged come back as None."""
        jax = self.jax

        def bracketed(*args):
            start = self.start_token()
            args, start = jax.lax.optimization_barrier((args, start))
            tied = {id(leaf) for leaf in jax.tree_util.tree_leaves(args)}
            leaves, tree = jax.tree_util.tree_flatten(step(*args), is_leaf=lambda leaf: leaf is None)
            computed = [i for i, leaf in enumerate(leaves) if leaf is not None and id(leaf) not in tied]
            outputs = jax.lax.optimization_barrier([leaves[i] for i in computed])
            returned = [None] * len(leaves)
            for i, output in zip(computed, outputs):
                returned[i] = output
            # The start's token too: every output of both barriers has a user, so none is pruned.
            end = self.end_token(*outputs, start)
            return jax.tree_util.tree_unflatten(tree, returned), end

        return bracketed


class StepEvents(Bracket):
    """The library's ring seen from the worker: bracket(step) puts its two FFI calls into a step's
    program, elapsed_ms(i) reads step i's time since the last reset()."""

    def __init__(self, jax, library, path):
        import jax.numpy as jnp

        super().__init__(jax)
        self.library = library
        self.path = path
        self.ring_size = int(library.crossbench_step_events_ring_size())
        ffi = _ffi_module(jax)
        token = jax.ShapeDtypeStruct((), jnp.float32)  # the handlers' unwritten result
        self._start = ffi.ffi_call(START_TARGET, token, has_side_effect=True)
        self._end = ffi.ffi_call(END_TARGET, token, has_side_effect=True)

    def start_token(self):
        return self._start()

    def end_token(self, *operands):
        return self._end(*operands)

    @classmethod
    def open(cls, jax, device):
        """(StepEvents, None) ready to time steps on `device`, or (None, why not). Registers the
        handlers once per process, then runs one tiny bracketed program (untimed) and reads its
        time back, so that a library XLA cannot call fails here, not in the step's compile."""
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
            tiny = jax.jit(events.bracket(lambda x: x + 1))
            jax.block_until_ready(tiny(jax.device_put(jax.numpy.zeros((), jax.numpy.float32), device)))
            first = events.elapsed_ms(0)
            events.reset()
        except Exception as error:  # noqa: BLE001
            return None, f"a first bracketed program failed on {device}: {type(error).__name__}: {error}"
        if not math.isfinite(first) or first < 0:
            return None, f"a first bracketed program read {first} ms"
        return events, None

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
