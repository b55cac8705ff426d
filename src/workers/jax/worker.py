#!/usr/bin/env python3
"""crossbench's JAX worker: the network JSON built with plain jax.lax, jax.jit per cell.

Speaks the protocol of src/workers/common/protocol.py (README: "Framework workers").
The network and its conventions (those of src/workers/pytorch/model.py and the oneDNN engine:
convolution, pooling, lrn, batch_norm, dropout, loss, training step) and the precision recipes
(``Recipe``) are model.py's; this file is the adapter, the compile cache and the session:

- jit once: the steps are compiled in prepare (untimed, time reported); every
  trace is counted, and a trace during the timed steps (a retrace) is recorded
  in ``decisions``.
- timing (``engine.jax_timing``, recorded in ``decisions``): ``events`` is the default.
  ``events``: marks, CUDA events on XLA's own stream as the cudnn engine and PyTorch time their
  steps with, each recorded by a program of its own, ONE XLA FFI call (step_events.py: the handler
  of libcrossbench_jax_events.so), dispatched on the steps' device before each sample and after the
  sample's steps; the step's program is the plain jitted step. Sample j is cudaEventElapsedTime(mark
  j, mark j+1) [ms] over its steps_per_sample steps: those steps and whatever gap precedes mark
  j+1 on the device (a real cost of a JAX training loop: where the host cannot keep up, it shows,
  as it would for a user). A sample spans at least EVENTS_MIN_SAMPLE_MS (20 ms): where a step is
  shorter, k steps go between two marks (k fixed in prepare, _calibrate_events). Samples are
  dispatched back to back with at most max(2, ceil(STEPS_IN_FLIGHT / k)) unread; when full, the
  oldest is read (waiting on the device for the next mark). Where events cannot be had (the
  library not built or not found, not a CUDA device, its registration, a first pair of marks or
  the calibration failing) the worker falls back to device-paced and ``decisions`` says why.
  Measured on the H200 against an untraced fori_loop of the step (call22): AlexNet bf16 1.021 /
  1.045 (training / inference, k = 12 / 29), ResNet-50 bf16 1.001 / 1.020 (k = 2 / 8); one mark
  per step had read AlexNet inference 1.24-1.35 (DESIGN.md "One clock" holds the history).
  ``device-paced`` dispatches steps k+1 .. k+STEPS_QUEUED before it waits for step k's result and
  takes each step's time as the interval between consecutive completions seen by the host
  (time.perf_counter after block_until_ready); the device always has the next steps queued, so
  the interval is the device's time per step, and the host's dispatch and the wait's wake-up,
  both paid once per step, cancel between consecutive completions. The first timed step's
  interval runs from a sync point (nothing in flight) before its dispatch, so it alone includes
  one dispatch. Three queued, not one: with one, the host's wake-up after each wait left the
  H200 idle between AlexNet's 0.55 ms inference steps (3.2% above an untraced device loop of the
  same step; 3 queued: 0.8% below it, bench/results/2026-12-02/call6).
  ``host``: time.perf_counter around the jitted call and block_until_ready, each step alone
  (adds the host's dispatch and the wake-up to every step). bench/gpu_jax_clock.py holds the
  three against each other and against an untraced device loop of the same step.
- compile cache: JAX's persistent compilation cache in the request's
  ``engine.compile_cache`` directory (its jax/ subdirectory; every compile kept,
  however short or small: ``JaxCache``), so a later cell or run of the same step
  skips XLA's compile; ``decisions`` says cold or warm and the cache hits.
"""
import argparse
import gc
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if os.path.dirname(os.path.abspath(__file__)) not in sys.path:  # model.py, step_events.py, also for a bench script
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))

from common import compile_cache, preparation  # noqa: E402
from common.output_check import check_result  # noqa: E402
from common.libraries import loaded_library_versions  # noqa: E402
from common.protocol import WorkerError, serve, settings  # noqa: E402
from model import Network, Recipe, device_keep_mask  # noqa: E402,F401  (device_keep_mask re-exported)
from step_events import StepEvents  # noqa: E402

WORKER = "jax"
TIMING_SETTING = "engine.jax_timing"
EVENTS, DEVICE_PACED, HOST = "events", "device-paced", "host"
STEPS_QUEUED = 3  # device-paced: steps dispatched ahead of the one waited for (their outputs stay alive)
# events: steps dispatched whose samples are not read yet. Reading step k waits on the host for
# mark k+1 (the start of step k+1 on the device) while the device runs the later steps in flight,
# so the device never waits for the host's read, wake-up and next dispatch unless they take longer
# than the 7 steps queued behind. Deeper than device-paced's 3: a sample holds any gap before the
# next step starts, so a host hiccup (a collection, a slow wake-up) that drained the queue would
# show in it; 8 absorbs those. The device holds the queued steps' outputs meanwhile (up to 8 steps'
# worth of memory). The library's ring must hold STEPS_IN_FLIGHT + 1 marks (the closing one).
STEPS_IN_FLIGHT = 8
# events: a sample spans at least EVENTS_MIN_SAMPLE_MS of the device's time [ms]. A mark is a program
# of its own, and its dispatch costs the host about as much as a short step's (AlexNet bf16 inference
# on the H200: 0.56 ms steps, one mark per step read 1.24-1.35x an untraced loop,
# bench/results/2026-12-02/call17, call20). Where a step is shorter, one sample is the mean of
# steps_per_sample consecutive steps between two marks (nvbench's batch measurement; google/benchmark
# likewise runs a short function many times per sample), so the mark's cost is spread over them.
# steps_per_sample is fixed in prepare from CALIBRATION_STEPS marked steps (one per sample), at most
# MAX_STEPS_PER_SAMPLE, and sent with the samples (README "Framework workers") so that the Runner
# counts steps (energy per image) right; steps of 20 ms or more are one per sample, as before.
EVENTS_MIN_SAMPLE_MS = 20.0
CALIBRATION_STEPS = 5
MAX_STEPS_PER_SAMPLE = 64
TIMINGS = {
    EVENTS: "events(marks: a CUDA event recorded on XLA's stream by a program of one XLA FFI call, dispatched "
            "before each sample's steps and after the last; each sample is cudaEventElapsedTime(mark k, mark k+1) "
            "[ms] over its steps_per_sample steps, those steps and any gap before the next sample's first step "
            "starts on the device; steps_per_sample chosen in prepare so that a sample spans the minimum below; "
            f"at most max(2, {STEPS_IN_FLIGHT}/steps_per_sample) samples dispatched and unread)",
    DEVICE_PACED: f"device-paced(steps k+1..k+{STEPS_QUEUED} dispatched before step k's result is waited for; each "
                  "sample is the interval between consecutive completions [ms], the first from a sync before it)",
    HOST: "host(perf_counter around the jitted call and block_until_ready, each step alone)",
}
np = synthetic = None  # numpy and common.synthetic, imported by hello() (so a python without them says so)


class JaxAdapter:
    def __init__(self):
        self.jax = None
        self.startup = None  # (import, device) [s] of hello, told by the process's first cell (common/preparation.py)

    def hello(self):
        global np, synthetic
        clock = preparation.StartupClock()
        try:
            import jax
            if getattr(jax, "__file__", None) is None:
                # src/workers/jax, this worker's own directory, taken as a namespace package: no jax here
                raise ImportError("No module named 'jax'")
            import jax.numpy  # noqa: F401
            import numpy as np
            from common import synthetic
        except Exception as error:  # ImportError, or a broken install
            return dict(worker=WORKER, status="unsupported",
                        message=f"JAX is not importable by {sys.executable} ({error}): "
                                "pip install jax (CPU) or jax[cuda12]")
        self.jax = jax
        clock.imported()
        device = jax.devices()[0]
        if device.platform == "cpu":
            described = "cpu"
        else:
            described = f"{device.platform}: {getattr(device, 'device_kind', str(device))}"
        # A tiny jitted matmul on the device loads the backend's libraries, which are then named.
        jax.block_until_ready(jax.jit(lambda a: a @ a)(jax.numpy.ones((2, 2))))
        versions = {"framework": f"jax {jax.__version__}", "jax": jax.__version__}
        try:
            import jaxlib
            versions["jaxlib"] = getattr(jaxlib, "__version__", None) or jaxlib.version.__version__
        except Exception:  # noqa: BLE001 (an odd install: the version is simply not named)
            pass
        versions.update(loaded_library_versions())
        self.startup = clock.seconds()
        return dict(worker=WORKER, status="ok", framework=f"jax {jax.__version__}", device=described,
                    versions=versions)

    def prepare(self, request):
        startup, self.startup = self.startup, None
        return JaxSession(self.jax, request, startup)

    def classify(self, error):
        text = str(error)
        if "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower() or isinstance(error, MemoryError):
            first = text.splitlines()[0] if text else type(error).__name__
            return "oom", f"out of memory: {first}"
        return "failed", f"{type(error).__name__}: {error}"

    def recover(self):
        gc.collect()
        try:
            self.jax.clear_caches()
        except Exception:
            pass


# ---- The persistent compilation cache ----------------------------------------------------------

# What jax.monitoring reported in this process: the compiles that asked the persistent cache and its hits.
CACHE_REQUESTS = "/jax/compilation_cache/compile_requests_use_cache"
CACHE_HITS = "/jax/compilation_cache/cache_hits"
_cache_events = {CACHE_REQUESTS: 0, CACHE_HITS: 0}
_listening = None  # None: not tried yet; else whether jax.monitoring reports to us


def _count_cache_event(event, *args, **kwargs):
    if event in _cache_events:
        _cache_events[event] += 1


def _listen_to_cache_events(jax):
    global _listening
    if _listening is None:
        try:
            jax.monitoring.register_event_listener(_count_cache_event)
            _listening = True
        except Exception:  # noqa: BLE001 (a jax without jax.monitoring: no hit counts, said in decisions)
            _listening = False
    return _listening


class JaxCache:
    """engine.compile_cache for JAX: its persistent compilation cache in the directory's jax/
    subdirectory, keeping every compile (jax keeps by default only compiles over 1 s:
    jax_persistent_cache_min_compile_time_secs = 0 and jax_persistent_cache_min_entry_size_bytes = -1
    keep them all), or off for `none`. The worker's hello has jitted already, and jax decides once per
    process whether and where it caches, so that decision is reset (compilation_cache.reset_cache)
    for the next compile to read these settings."""

    FLAGS = (("jax_persistent_cache_min_compile_time_secs", 0.0), ("jax_persistent_cache_min_entry_size_bytes", -1))

    def __init__(self, jax, setting):
        self.jax = jax
        self.setting = setting
        self.notes = []
        self.directory = None
        if setting == compile_cache.NONE:
            self._update("jax_enable_compilation_cache", False)
        else:
            self.directory = compile_cache.framework_directory(setting, "jax")
            self._update("jax_enable_compilation_cache", True)
            if not self._update("jax_compilation_cache_dir", self.directory):
                raise WorkerError("failed", f"{compile_cache.SETTING}: jax {jax.__version__} takes no "
                                  "jax_compilation_cache_dir (no persistent compilation cache); set "
                                  f"{compile_cache.SETTING}=none")
            for flag, value in self.FLAGS:
                self._update(flag, value)
        try:
            from jax.experimental.compilation_cache import compilation_cache as cache_module
            cache_module.reset_cache()
        except Exception as error:  # noqa: BLE001 (said in decisions: the hello's choice may stand)
            self.notes.append(f"not reset ({type(error).__name__}): the process's first compile decided the cache")
        self.listening = _listen_to_cache_events(jax)
        self.events_before = dict(_cache_events)
        self.entries_before = compile_cache.count_entries(self.directory)
        self.entries_after = None

    def _update(self, flag, value):
        """jax.config.update; a flag this jax lacks is noted in decisions (False), never fatal here."""
        try:
            self.jax.config.update(flag, value)
            return True
        except Exception as error:  # noqa: BLE001 (jax raises AttributeError or ValueError for unknown flags)
            self.notes.append(f"{flag}: not in jax {self.jax.__version__} ({type(error).__name__})")
            return False

    def compiled(self):
        self.entries_after = compile_cache.count_entries(self.directory)

    def describe(self):
        if self.directory is None:
            return "compile_cache=none(jax's persistent compilation cache off: every compile cold)"
        detail = list(self.notes)
        if self.listening:
            requests = _cache_events[CACHE_REQUESTS] - self.events_before[CACHE_REQUESTS]
            hits = _cache_events[CACHE_HITS] - self.events_before[CACHE_HITS]
            detail.append(f"persistent cache hits={hits} of {requests} compiles")
        after = self.entries_after if self.entries_after is not None else compile_cache.count_entries(self.directory)
        return compile_cache.describe(self.setting, self.entries_before, after, "; ".join(detail))


# ---- A cell -----------------------------------------------------------------------------------

def cell_peak_bytes(stats_at_start, stats_now):
    """The cell's peak device memory [bytes] from XLA's allocator statistics
    (``Device.memory_stats()``), or NaN where it cannot be told.

    ``peak_bytes_in_use`` is the most the allocator ever handed out in this
    process, not the preallocated pool (``bytes_limit``/``pool_bytes``), but it is
    never reset. A process that serves one cell ([engine] worker_per_cell = true,
    the default) has only this cell's peak. A process that served earlier cells
    has this cell's peak only when the peak rose during it; otherwise an earlier
    cell's larger peak would be reported for this one (every cell of a shared
    process showed the same number), so the cell's peak is unknown: NaN."""
    if not stats_now or "peak_bytes_in_use" not in stats_now:
        return math.nan
    peak = float(stats_now["peak_bytes_in_use"])
    before = float((stats_at_start or {}).get("peak_bytes_in_use", 0.0))
    if before > 0 and peak <= before:
        return math.nan
    return peak


class JaxSession:
    def __init__(self, jax, request, startup=None):
        import jax.numpy as jnp

        setup_start = time.perf_counter()
        self.startup = startup
        self.jax = jax
        cell = request["cell"]
        self.precision, self.phase, self.batch = cell["precision"], cell["phase"], int(cell["batch"])
        self.training = self.phase == "training"
        self.device = jax.devices()[0]
        self.stats_at_start = self._memory_stats()  # before this cell allocates anything: cell_peak_bytes
        self.cpu = self.device.platform == "cpu"
        if self.cpu and self.precision in ("tf32", "fp16", "amp-fp16"):
            raise WorkerError("unsupported", f"{self.precision} on the CPU: "
                              + ("tf32 is a GPU tensor-core mode" if self.precision == "tf32"
                                 else "XLA's CPU path has no fast fp16 training"))
        self.recipe = Recipe(self.precision)
        self.dtype = self.recipe.compute_dtype
        self.matmul_precision = self.recipe.matmul_precision
        # The options schema's worker settings (README "Job file keys", column "to workers"); the
        # layout and the compile mode are PyTorch's: XLA picks its own layout and always jits.
        given = settings(request, "measure.seed", "measure.update", "measure.learning_rate", compile_cache.SETTING,
                         TIMING_SETTING)
        self.timing = given[TIMING_SETTING]
        if self.timing not in TIMINGS:
            raise WorkerError("failed", f"{TIMING_SETTING} = {self.timing!r}: this worker knows {', '.join(TIMINGS)}")
        self.events = None  # StepEvents while timing = events
        self.steps_per_sample = 1  # events: consecutive steps per sample (_calibrate_events)
        self.calibration_ms = None  # events: the median period of the calibration's marked steps [ms]
        self.timing_fallback = None  # why events gave way to device-paced (decisions)
        if self.timing == EVENTS:
            # untimed: registers the handler, runs marks around a tiny program twice
            self.events, why = StepEvents.open(jax, self.device)
            if self.events is None:
                self.timing, self.timing_fallback = DEVICE_PACED, why
            elif self.events.ring_size < STEPS_IN_FLIGHT + 1:  # a mark's slot is kept until ring_size later marks
                self.timing_fallback = (f"the event ring holds {self.events.ring_size} marks, fewer than the "
                                        f"{STEPS_IN_FLIGHT + 1} a read may need ({STEPS_IN_FLIGHT} steps in flight "
                                        "and the closing mark)")
                self.timing, self.events = DEVICE_PACED, None
        self.net = Network(request["graph"], int(given["measure.seed"]))
        self.traces = 0  # times the steps were traced (jit compiles); see decisions()
        self.traces_before_timed = self.traces_after_timed = None
        self.sgd = given["measure.update"] == "sgd" and self.training
        self.learning_rate = float(given["measure.learning_rate"])
        put = lambda a: jax.device_put(a, self.device)  # noqa: E731
        # Batch-norm gamma/beta stay fp32 in every recipe (as cuDNN's batch-norm takes them).
        batch_norm = {position for slots in self.net.slots.values() for slot, position in slots.items()
                      if slot in (synthetic.BN_GAMMA, synthetic.BN_BETA)}
        self.batch_norm_params = batch_norm
        self.params = [put(np.asarray(p)).astype(jnp.float32 if i in batch_norm else self.recipe.storage_dtype)
                       for i, p in enumerate(self.net.host_params)]
        self.x = put(synthetic.input(self.net.graph, self.batch, self.net.seed)).astype(self.recipe.storage_dtype)
        self.labels = put(synthetic.labels(self.net.graph, self.batch, self.net.seed))
        self.step_index = 0  # dropout step of the next training step
        self.mask_dtype = np.float32 if self.dtype == jnp.float32 else (
            np.float16 if self.dtype == jnp.float16 else jnp.bfloat16)

        net, training, sgd, lr = self.net, self.training, self.sgd, self.learning_rate
        compute, mixed = self.dtype, self.recipe.mixed

        def to_compute(params, x):
            """amp-*: the fp32 parameters (except batch-norm's) and input cast to 16 bits."""
            if not mixed:
                return params, x
            return ([p if i in batch_norm else p.astype(compute) for i, p in enumerate(params)],
                    x.astype(compute))

        batch, mask_dtype = self.batch, self.mask_dtype

        def loss_and_logits(params, x, labels, masks):
            logits = net.forward(*to_compute(params, x), masks, training)
            return net.loss(logits, labels), logits

        def train_step(params, x, labels, states):
            self.traces += 1  # runs only while jax traces (compiles) the step
            masks = net.device_masks(states, batch, mask_dtype)  # drawn inside the step, on the device
            (loss, logits), grads = jax.value_and_grad(loss_and_logits, has_aux=True)(params, x, labels, masks)
            if not sgd:
                # No update: the parameters are not an output. Returned unchanged they are not the
                # arguments' buffers (not donated), so XLA would copy every one of them each step,
                # work no JAX user's step does (AlexNet: 16 copies, ~2-3% of a bf16 step).
                return loss, grads, (), logits
            params = [p - jnp.asarray(lr, p.dtype) * g for p, g in zip(params, grads)]
            return loss, grads, params, logits

        def infer_step(params, x):
            self.traces += 1
            return net.forward(*to_compute(params, x), [], False)

        # check() reuses the compiled step of the session's timing (compiling the network again
        # for it would double the worker's compile time per cell); only the loss of the inference
        # logits is its own, small, function.
        self._train = jax.jit(train_step)
        self._infer = jax.jit(infer_step)
        # timing = events: the same steps, with the mark's own program (step_events.py) between them.
        self._loss = jax.jit(net.loss)
        cache_start = time.perf_counter()
        self.compile_cache = JaxCache(jax, given[compile_cache.SETTING])  # before the compile: see JaxCache
        start = time.perf_counter()
        self.setup_s = cache_start - setup_start  # [s] the parameters, inputs and jitted functions, before the compile
        with jax.default_matmul_precision(self.matmul_precision):
            self._one_step(self._step_args())  # compilation, untimed; counts as step 0
            if self.timing == EVENTS:
                try:  # the mark's program, compiled untimed (StepEvents.open ran it already)
                    self.jax.block_until_ready(self._dispatch_mark())
                except Exception as error:  # noqa: BLE001 (any failure: device-paced, with the reason)
                    self.timing_fallback = (f"the mark's program failed beside the step: {type(error).__name__}: "
                                            f"{str(error).splitlines()[0] if str(error) else ''}")
                    self.timing, self.events = DEVICE_PACED, None
        compiled_at = time.perf_counter()
        self.compile_s = compiled_at - start
        self.compile_cache.compiled()
        # [s] the persistent cache's set-up before the compile and its scan after, outside both clocks
        self.compiler_setup_s = (start - cache_start) + (time.perf_counter() - compiled_at)
        if self.timing == EVENTS:
            self._calibrate_events()

    def _calibrate_events(self):
        """Untimed, in prepare: CALIBRATION_STEPS steps marked one by one; their median period [ms]
        fixes steps_per_sample = ceil(EVENTS_MIN_SAMPLE_MS / median), 1 .. MAX_STEPS_PER_SAMPLE."""
        try:
            periods = sorted(self._run_marked(CALIBRATION_STEPS, math.inf, 1))
        except Exception as error:  # noqa: BLE001 (any failure: device-paced, with the reason)
            self.timing_fallback = (f"the calibration's marked steps failed: {type(error).__name__}: "
                                    f"{str(error).splitlines()[0] if str(error) else ''}")
            self.timing, self.events = DEVICE_PACED, None
            return
        self.calibration_ms = periods[len(periods) // 2]
        self.min_sample_ms = EVENTS_MIN_SAMPLE_MS
        wanted = math.ceil(self.min_sample_ms / self.calibration_ms) if self.calibration_ms > 0 else MAX_STEPS_PER_SAMPLE
        self.steps_per_sample = max(1, min(MAX_STEPS_PER_SAMPLE, wanted))

    def _step_args(self):
        """The step's dropout stream states (two words per layer): all the host gives the step."""
        if not self.training:
            return None
        return self.jax.device_put(self.net.dropout_states(self.step_index), self.device)

    def _dispatch(self, states):
        """Enqueues one step on the device and returns its outputs (not waited for: jax
        dispatches asynchronously). With update = sgd the next step takes these parameters,
        still in flight: the device orders the two steps."""
        if self.training:
            result = self._train(self.params, self.x, self.labels, states)
            if self.sgd:
                self.params = result[2]
            self.step_index += 1
            return result
        return self._infer(self.params, self.x)

    def _dispatch_mark(self):
        """Dispatches a mark (its own program) on the session's device, behind every step
        dispatched before it. Returns its token (not waited for)."""
        with self.jax.default_device(self.device):
            return self.events.program()()

    def _one_step(self, states):
        self.jax.block_until_ready(self._dispatch(states))

    def step(self):
        """One step timed alone (``host`` timing) [ms]."""
        states = self._step_args()  # 8 bytes per dropout layer; the masks are drawn in the step
        if states is not None:
            self.jax.block_until_ready(states)
        with self.jax.default_matmul_precision(self.matmul_precision):
            begin = time.perf_counter()
            self._one_step(states)
            return (time.perf_counter() - begin) * 1e3

    def run_steps(self, count, time_limit_s, warmup):
        """`count` steps, each timed alone; fewer once `time_limit_s` [s] has passed. Traces
        during non-warm-up batches are retraces in the timed steps (decisions())."""
        if not warmup and self.traces_before_timed is None:
            self.traces_before_timed = self.traces
        if self.timing == HOST:
            begin = time.monotonic()
            times = []
            while len(times) < count and time.monotonic() - begin < time_limit_s:
                times.append(self.step())
        elif self.timing == EVENTS:
            times = self.run_events(count, time_limit_s)
        else:
            times = self.run_device_paced(count, time_limit_s)
        if not warmup:
            self.traces_after_timed = self.traces
        return times

    def run_device_paced(self, count, time_limit_s):
        """Up to `count` steps with the next STEPS_QUEUED always queued: steps k+1 .. k+STEPS_QUEUED
        are dispatched (each one's dropout states put on the device, then the jitted call) before
        the host waits for step k, and step k's time [ms] is the interval from step k-1's
        completion to its own, as the host sees them after block_until_ready. While the host keeps
        ahead, the device never idles between steps, so the interval is the device's time per
        step; the wake-up after each wait is in both ends of an interval and cancels. The first
        interval starts at a sync point (every earlier step waited for: run_steps always ends so),
        so it alone also holds one dispatch. No new step is dispatched once `time_limit_s` [s] has
        passed; those in flight still count."""
        jax = self.jax
        times = []
        if count <= 0:
            return times
        with jax.default_matmul_precision(self.matmul_precision):
            states = self._step_args()
            if states is not None:
                jax.block_until_ready(states)  # the first step's 8 bytes per dropout layer, before the clock
            begin = time.monotonic()
            previous = time.perf_counter()  # the sync point: nothing of this session is in flight
            pending = [self._dispatch(states)]
            dispatched = 1
            while pending:
                while (dispatched < count and len(pending) <= STEPS_QUEUED
                       and time.monotonic() - begin < time_limit_s):
                    pending.append(self._dispatch(self._step_args()))  # queued behind the ones in flight
                    dispatched += 1
                jax.block_until_ready(pending.pop(0))
                now = time.perf_counter()
                times.append((now - previous) * 1e3)
                previous = now
        return times

    def run_events(self, count, time_limit_s):
        """Up to `count` samples of steps_per_sample steps each (_run_marked)."""
        return self._run_marked(count, time_limit_s, self.steps_per_sample)

    def _run_marked(self, count, time_limit_s, per_sample):
        """Up to `count` samples, each `per_sample` steps dispatched back to back after a mark (the
        mark's own program, step_events.py), the last sample followed by one more mark. Sample j [ms
        per step] is the period from mark j to mark j+1 (slots j and j+1 of the library's ring)
        divided by `per_sample`. At most max(2, ceil(STEPS_IN_FLIGHT / per_sample)) samples are
        dispatched and unread; when that many are, the oldest is read first (its closing mark, the
        next sample's first, is dispatched already: hence at least 2). The outputs of each unread
        sample's last step stay referenced until it is read (the device frees nothing of a period
        still open; the steps before it within a sample are dropped as a user's loop drops them).
        With update = sgd the parameters thread through _dispatch. No new sample is started once
        `time_limit_s` [s] has passed; those started still count."""
        jax, events = self.jax, self.events
        samples = []
        if count <= 0:
            return samples
        unread_limit = max(2, math.ceil(STEPS_IN_FLIGHT / per_sample))
        with jax.default_matmul_precision(self.matmul_precision):
            events.reset()  # this batch's first sample starts at mark 0
            begin = time.monotonic()
            started = 0
            kept = []  # per unread sample: its last step's outputs
            while started < count and (started == 0 or time.monotonic() - begin < time_limit_s):
                if started - len(samples) == unread_limit:
                    samples.append(events.period_ms(len(samples)) / per_sample)  # its closing mark is dispatched
                    kept.pop(0)
                self._dispatch_mark()  # mark `started`: the start of this sample's period
                for _ in range(per_sample):
                    outputs = self._dispatch(self._step_args())
                kept.append(outputs)
                started += 1
            self._dispatch_mark()  # closes the last sample's period
            while len(samples) < started:
                samples.append(events.period_ms(len(samples)) / per_sample)
            kept.clear()
        return samples

    def _memory_stats(self):
        try:
            return self.device.memory_stats()
        except Exception:  # a backend without allocator statistics (the CPU's) reports none: NaN
            return None

    def peak_memory_bytes(self):
        return cell_peak_bytes(self.stats_at_start, self._memory_stats())

    def check(self):
        """Session::check(): one forward (+ backward when training) with dropout step 0, run by the
        compiled step the timed steps ran (every timing runs the same plain step)."""
        train, infer = self._train, self._infer
        with self.jax.default_matmul_precision(self.matmul_precision):
            if self.training:
                states = self.jax.device_put(self.net.dropout_states(0), self.device)
                result = train(self.params, self.x, self.labels, states)  # no update
                loss, grads, _, logits = result
            else:
                logits = infer(self.params, self.x)
                loss = self._loss(logits, self.labels)
                grads = None
        logits64 = np.asarray(logits.astype(np.float32), dtype=np.float64)
        squared_norms = None if grads is None else [
            np.square(np.asarray(g.astype(np.float32), dtype=np.float64)).sum() for g in grads]
        return check_result(loss, logits64.sum(), np.isfinite(logits64).all(), squared_norms)

    def decisions(self):
        text = (f"jax {self.jax.__version__} jit {self.recipe.describe()} "
                f"matmul_precision={self.matmul_precision} layout=NCHW")
        if self.training:
            text += " dropout_masks=device-in-step(timed)"
        text += f" timing={TIMINGS[self.timing]}"
        if self.events is not None:
            text += f" step_events={self.events.describe()}"
            text += (f" steps_per_sample={self.steps_per_sample}(a sample spans >= {self.min_sample_ms:g} ms; "
                     f"calibration: {CALIBRATION_STEPS} marked steps, median {self.calibration_ms:.4g} ms)"
                     if self.calibration_ms is not None else "")
        if self.timing_fallback:
            text += f" timing_fallback=events unavailable: {self.timing_fallback}"
        text += f" compile={self.compile_s:.1f}s(untimed) {self.compile_cache.describe()} traces={self.traces}"
        text += preparation.describe_compiler_setup(self.compiler_setup_s, "the persistent cache's set-up and scans")
        text += preparation.describe(self.setup_s, self.startup)  # common/preparation.py
        if self.traces_before_timed is not None and self.traces_after_timed is not None:
            text += f" timed_steps: retraces={self.traces_after_timed - self.traces_before_timed}"
        stats = self._memory_stats()
        if stats and "peak_bytes_in_use" in stats:
            text += (" peak_memory=peak_bytes_in_use" if math.isfinite(cell_peak_bytes(self.stats_at_start, stats))
                     else " peak_memory=unknown(an earlier cell of this process peaked higher; "
                          "worker_per_cell=true measures each cell)")
        return text

    def release(self):
        self.params = self.x = self.labels = None
        self._train = self._infer = self._loss = None
        gc.collect()


def main():
    argparse.ArgumentParser(description="crossbench JAX worker (JSON lines on stdin/stdout)").parse_args()
    serve(JaxAdapter())


if __name__ == "__main__":
    main()
