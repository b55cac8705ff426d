"""The worker side of crossbench's JSON-lines protocol (README: "Framework workers").

A worker reads one JSON request per line on stdin and writes one JSON reply
per line on stdout; everything else it prints goes to stderr (stdout is taken
over here so that a stray print cannot corrupt the protocol). ``serve`` runs
the loop for a framework adapter:

    adapter.hello()                 -> dict: framework, device, status ("ok"/"unsupported"), message
    adapter.prepare(request)        -> session object (raises WorkerError(status, message));
                                       the run's settings come from ``settings(request, key, ...)``
    session.run_steps(count, time_limit_s, warmup)
                                    -> times of up to `count` steps back to back [ms], measured with
                                       the framework's device timer; fewer when time_limit_s [s] runs out;
                                       each the mean of session.steps_per_sample (default 1) consecutive
                                       steps, sent with them (the Runner counts steps with it)
    session.peak_memory_bytes()     -> float or None
    session.check()                 -> dict: finite, loss, logits_checksum, gradient_norm, gradient_norms
    session.decisions()             -> str
    session.release()

``exit`` ends the worker at once (``leave``): the cleanups registered with ``on_exit`` run, the
interpreter's shutdown does not.

A session may instead offer ``session.step()`` (one step's time [ms]);
``run_steps`` then calls it in a loop (``steps_one_by_one``).

The worker never decides how many steps to run: crossbench's Runner
(src/runner/runner.cpp) sends ``steps`` requests (warm-up, then its stopping
rule's batches: min_steps, then 10% more at a time) and decides from the raw
times it gets back when to stop. There is no copy of the stopping rule here.
"""
import atexit
import json
import math
import os
import sys
import time
import traceback

from common import preparation

# 3: `prepare` carries the options schema's worker settings in one `settings` object;
# 2: the Runner sends `steps` batches; 1 had a `measure` request.
# src/engines/worker/worker_engine.hpp (kWorkerProtocol) holds the same number.
PROTOCOL = 3


class WorkerError(Exception):
    """A cell's outcome other than ok: status is oom, unsupported or failed."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


def settings(request, *keys):
    """The values of options-schema `keys` ("measure.seed", "engine.layout") in a `prepare`
    request, as a dict. crossbench sends every key its schema marks "to workers" (README "Job
    file keys") in the request's `settings`, typed by the schema (integers, numbers, booleans,
    text), so a worker reads them here rather than from fields named by hand. A key that is
    missing fails the cell with a message naming it: crossbench and the worker disagree about
    the schema."""
    given = request.get("settings")
    if not isinstance(given, dict):
        raise WorkerError("failed", f"the prepare request has no `settings` object (protocol {PROTOCOL} sends the "
                          "options schema's worker settings there)")
    missing = [key for key in keys if key not in given]
    if missing:
        raise WorkerError("failed", f"the prepare request's settings lack {', '.join(missing)} (it has "
                          f"{', '.join(sorted(given)) or 'none'}): this worker and crossbench disagree about the "
                          "options schema; update one of them")
    return {key: given[key] for key in keys}


def steps_one_by_one(step, count, time_limit_s):
    """Up to `count` calls of step() (each returns its time [ms]), stopping early once
    `time_limit_s` [s] has passed; the times in order."""
    start = time.monotonic()
    times = []
    while len(times) < count and time.monotonic() - start < time_limit_s:
        times.append(float(step()))
    return times


def run_steps(session, request):
    """A `steps` request: the session's own batch loop, else its step() one by one."""
    count, limit, warmup = int(request["count"]), float(request["time_limit_s"]), bool(request.get("warmup", False))
    if count < 0:
        raise WorkerError("failed", f"steps request with count {count}")
    batch = getattr(session, "run_steps", None)
    times = batch(count, limit, warmup) if batch is not None else steps_one_by_one(session.step, count, limit)
    return [float(t) for t in times]


_exit_cleanups = []


def on_exit(cleanup):
    """Runs cleanup() when the worker ends: at `exit` (``leave``) and at any other end alike."""
    _exit_cleanups.append(cleanup)
    atexit.register(cleanup)


def leave(protocol_out):
    """The worker's end at `exit`: the replies are out and the cell is over, so it flushes, runs the
    ``on_exit`` cleanups and ends the process, without the interpreter's shutdown. That shutdown runs
    the frameworks' exit handlers first: torch.compile's waits for Inductor's compile-worker pool,
    which a short cell leaves still starting, and the H200 study's pytorch-compile cells spent a median
    5-6 s (up to 10 s) between their last reply and their process's end, eager ones 1 s and JAX ones
    0.8 s (bench/results/2026-12-02/plan). Nothing is lost: the compile caches are written as each
    compile finishes, and crossbench ends the worker's process group after it."""
    for stream in (protocol_out, sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed pipe: nobody is left to read it
    for cleanup in _exit_cleanups:
        try:
            cleanup()
        except Exception as error:  # a cleanup's failure is reported, and the others still run
            print(f"crossbench worker: cleanup at exit failed: {error}", file=sys.stderr, flush=True)
    os._exit(0)


def _finite_or_none(value):
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def serve(adapter):
    """Runs the protocol until `exit` or end of input."""
    protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints (and C libraries) go to stderr
    sys.stdout = sys.stderr

    def reply(message):
        message.setdefault("protocol", PROTOCOL)
        protocol_out.write(json.dumps(message, allow_nan=False) + "\n")
        protocol_out.flush()

    adapter.protocol_out = protocol_out  # fault-injection tests write garbage through it
    hello = adapter.hello()
    reply(dict(type="hello", **hello))
    if hello.get("protocol") not in (None, PROTOCOL):
        return
    if hello.get("status", "ok") != "ok":
        return
    session = None
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if request.get("protocol") != PROTOCOL:
            print(f"crossbench worker: request with protocol {request.get('protocol')!r}; this worker speaks protocol "
                  f"{PROTOCOL}: update crossbench or the worker so both match", file=sys.stderr)
            return
        kind = request.get("type")
        if kind == "exit":
            leave(protocol_out)
        answer = {"prepare": "prepared", "steps": "stepped", "check": "checked", "release": "released"}.get(kind)
        if answer is None:
            print(f"crossbench worker: unknown request type {kind!r}", file=sys.stderr)
            return
        try:
            if kind == "prepare":
                if session is not None:
                    session.release()
                    session = None
                prepare_start = time.perf_counter()
                session = adapter.prepare(request)
                prepared = preparation.describe_prepare(time.perf_counter() - prepare_start)
                reply(dict(type=answer, status="ok", peak_memory_bytes=_finite_or_none(session.peak_memory_bytes())))
            elif kind == "steps":
                if session is None:
                    raise WorkerError("failed", "steps request without a prepared cell")
                samples = run_steps(session, request)
                reply(dict(type=answer, status="ok", samples_ms=samples,
                           steps_per_sample=int(getattr(session, "steps_per_sample", 1)),
                           peak_memory_bytes=_finite_or_none(session.peak_memory_bytes()),
                           decisions=session.decisions() + prepared))
            elif kind == "check":
                result = session.check()
                reply(dict(type=answer, status="ok", finite=bool(result["finite"]),
                           loss=_finite_or_none(result.get("loss")),
                           logits_checksum=_finite_or_none(result.get("logits_checksum")),
                           gradient_norm=_finite_or_none(result.get("gradient_norm")),
                           gradient_norms=[_finite_or_none(v) for v in result.get("gradient_norms", [])]))
            elif kind == "release":
                if session is not None:
                    session.release()
                session = None
                reply(dict(type=answer, status="ok"))
        except WorkerError as error:
            if session is not None and kind != "prepare":
                session.release()
            session = None
            reply(dict(type=answer, status=error.status, message=error.message))
        except Exception as error:  # a failed cell, not a dead worker
            status, message = adapter.classify(error)
            session = None
            adapter.recover()
            reply(dict(type=answer, status=status,
                       message=message + "\n" + "".join(traceback.format_exception(error)[-3:])))
