"""The worker side of crossbench's JSON-lines protocol (README: "Framework workers").

A worker reads one JSON request per line on stdin and writes one JSON reply
per line on stdout; everything else it prints goes to stderr (stdout is taken
over here so that a stray print cannot corrupt the protocol). ``serve`` runs
the loop for a framework adapter:

    adapter.hello()                 -> dict: framework, device, status ("ok"/"unsupported"), message
    adapter.prepare(request)        -> session object (raises WorkerError(status, message))
    session.step()                  -> time of one step [ms], measured with the framework's device timer
    session.peak_memory_bytes()     -> float or None
    session.check()                 -> dict: finite, loss, logits_checksum, gradient_norm, gradient_norms
    session.decisions()             -> str
    session.release()

The stopping rule is crossbench's Runner's (src/core/runner.cpp), so a
worker's samples obey the same warm-up, minimum and maximum steps, CI target
and time limit as a native engine's.
"""
import json
import math
import os
import sys
import time
import traceback

PROTOCOL = 1


class WorkerError(Exception):
    """A cell's outcome other than ok: status is oom, unsupported or failed."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


def percentile_of_sorted(values, q):
    if not values:
        return math.nan
    position = q * (len(values) - 1)
    below = int(math.floor(position))
    above = min(below + 1, len(values) - 1)
    return values[below] + (position - below) * (values[above] - values[below])


def relative_ci_half_width(samples):
    """(ci_high - ci_low) / 2 / median, the 95% CI of the median from order statistics."""
    n = len(samples)
    if n < 2:
        return math.inf
    ordered = sorted(samples)
    median = percentile_of_sorted(ordered, 0.5)
    half_band = 1.959963984540054 * math.sqrt(n) / 2.0
    low_rank = math.floor(n / 2.0 - half_band)
    high_rank = math.ceil(n / 2.0 + half_band) + 1.0

    def at(rank):
        return ordered[int(min(max(rank, 1.0), n) - 1)]

    if not median > 0:
        return math.inf
    return (at(high_rank) - at(low_rank)) / 2.0 / median


def measure(session, request):
    """The Runner's loop: warm-up, timed steps, stopping rule. Returns (samples, stop_reason)."""
    start = time.monotonic()
    limit = float(request["time_limit_s"])

    def out_of_time():
        return time.monotonic() - start >= limit

    for _ in range(int(request["warmup"])):
        if out_of_time():
            break
        session.step()
    samples, reason = [], "time_limit"
    min_steps, max_steps, target = int(request["min_steps"]), int(request["max_steps"]), float(request["target_ci"])
    next_check = min_steps
    while not out_of_time():
        samples.append(float(session.step()))
        if len(samples) >= max_steps:
            reason = "max_steps"
            break
        if len(samples) >= next_check:
            if relative_ci_half_width(samples) <= target:
                reason = "ci_target"
                break
            next_check = len(samples) + max(10, len(samples) // 10)
    return samples, reason


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
            print(f"crossbench worker: request with protocol {request.get('protocol')!r}; this worker speaks {PROTOCOL}",
                  file=sys.stderr)
            return
        kind = request.get("type")
        if kind == "exit":
            return
        answer = {"prepare": "prepared", "measure": "measured", "check": "checked", "release": "released"}.get(kind)
        if answer is None:
            print(f"crossbench worker: unknown request type {kind!r}", file=sys.stderr)
            return
        try:
            if kind == "prepare":
                if session is not None:
                    session.release()
                    session = None
                session = adapter.prepare(request)
                reply(dict(type=answer, status="ok", peak_memory_bytes=_finite_or_none(session.peak_memory_bytes())))
            elif kind == "measure":
                samples, reason = measure(session, request)
                reply(dict(type=answer, status="ok", samples_ms=samples, stop_reason=reason,
                           peak_memory_bytes=_finite_or_none(session.peak_memory_bytes()),
                           decisions=session.decisions()))
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
