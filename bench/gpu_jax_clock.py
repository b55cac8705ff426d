#!/usr/bin/env python3
"""One clock for all engines (issue 26 item 4): is the JAX worker's step time the device's?

The JAX worker's own step (src/workers/jax/worker.py, prepared exactly as a `prepare` request of
the worker protocol prepares it: the network from `crossbench export-network`, the synthetic
weights, the precision's recipe, jax.jit) is timed several ways, interleaved in rounds, same
process, same session:

  a  host         the worker's engine.jax_timing = host: perf_counter around the jitted call and
                  block_until_ready, each step alone (the host's dispatch and the wait's wake-up
                  are in every step)
  b  device       the GPU's own timestamps of host-synced steps (the same `host` steps, under
                  jax.profiler): per step, the first kernel's start to the last kernel's end on
                  the GPU plane of the xplane (ProfileData); steps are separated by a host sync,
                  so their kernels never overlap. Also b_paced: the same timestamps for steps run
                  device-paced, the interval between consecutive steps' last kernel ends (what c
                  sees from the host). Fallback without ProfileData: cupy CUDA events on the
                  legacy default stream after each queued step, valid only where JAX's streams
                  are blocking streams (tested, said in the output).
  c  device-paced the worker's engine.jax_timing = device-paced: steps k+1..k+STEPS_QUEUED (3)
                  dispatched before step k's result is waited for; the interval between
                  consecutive completions (c depth 3, paced_deeper: the same outside the worker;
                  it measured the worker's choice of 3 when the worker queued 1)
  e  events       the worker's engine.jax_timing = events: marks, CUDA events on XLA's own stream,
                  each recorded by the XLA FFI handler of libcrossbench_jax_events.so in a program
                  of its own (src/workers/jax/step_events.py), dispatched before each step and
                  after the last; the step's program is the plain one. Each sample is
                  cudaEventElapsedTime(mark k, mark k+1), step k and any gap before mark k+1 on
                  the device; steps dispatched back to back, at most 8 unread. The clock of the
                  cudnn and PyTorch rows, on the JAX step. The session compiles the plain step
                  and the mark's program in prepare, so neither retraces.
                  Where the worker cannot have events (the library not found: --events-library), it
                  says why and the column is empty.
  d  device loop  the untraced reference (--reference loop, the default): the worker's own jitted
                  step called K times inside one jax.lax.fori_loop, one XLA program, so the host
                  neither dispatches nor waits between steps and no profiler runs; wall / K, K large
                  enough that the loop runs >= --loop-ms (the one dispatch and wake-up amortised
                  below 0.1%). The loop carries the step's outputs (loss, every gradient, logits) so
                  nothing is dead code, and the next step's last parameter gets `previous loss * 0`
                  added (one tiny op) so XLA cannot hoist a loop-invariant step out of the loop.
                  The profiler's spans (b) add time of their own per kernel: --reference trace or
                  both keeps them.

Per cell the medians [ms] and a/ref, c/ref, ref = d (or b without d), e/d and c/e; the issue's bar
(DESIGN.md "One clock": a host clock only where measured within 1% of events on the same steps):
whether c (device-paced) is within 1% of e (events), and whether e is within 1% of d.
Cells: --networks x --precisions x --phases at --batch, alexnet first (its ~1.4 ms step is where
host overhead matters most); cells not started within --budget-s [s] are reported `skipped`.

  python3 bench/gpu_jax_clock.py --crossbench ".bundle/run .bundle/bin/crossbench" --out /tmp/out/jaxclock.json

Every measurement is wrapped: one that fails is reported (status, message) and the rest go on;
the table and --out are rewritten after every cell.
"""
import argparse
import json
import math
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import worker_in_process  # noqa: E402

TARGET = 0.01  # issue 26: within 1% of the device's own clock
STARTED = time.monotonic()


def say(text):
    print(text, flush=True)


def median(values):
    ordered = sorted(v for v in values if v == v)
    n = len(ordered)
    if n == 0:
        return math.nan
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


def load_worker():
    """The JAX worker module itself (src/workers/jax/worker.py)."""
    return worker_in_process.load_worker("jax")


def prepare_request(graph, network, precision, phase, batch, compile_cache):
    """A `prepare` request as crossbench sends it, with events timing (so that the session opens
    the step events; this script switches session.timing between the clocks itself)."""
    return worker_in_process.prepare_request(graph, network, precision, phase, batch,
                                             engine__compile_cache=compile_cache, engine__jax_timing="events")


# ---- The device's own clock: jax.profiler's xplane -------------------------------------------

def find_profile_data(jax):
    """(where, ProfileData class, what was tried): the first place this jax offers it; (None, None,
    tried) where none does."""
    tried = []
    candidates = (
        ("jax.profiler.ProfileData", lambda: jax.profiler.ProfileData),
        ("jax._src.profiler.ProfileData", lambda: __import__("jax._src.profiler", fromlist=["x"]).ProfileData),
        ("jax._src.lib.xla_client.profiler.ProfileData",
         lambda: __import__("jax._src.lib", fromlist=["x"]).xla_client.profiler.ProfileData),
        ("xprof.profile_data.ProfileData", lambda: __import__("xprof.profile_data", fromlist=["x"]).ProfileData),
    )
    for where, get in candidates:
        try:
            found = get()
            if found is not None:
                return where, found, "; ".join(tried + [f"{where}: found"])
            tried.append(f"{where}: None")
        except Exception as error:  # noqa: BLE001 (absent in this jax: try the next)
            tried.append(f"{where}: {type(error).__name__}")
    return None, None, "; ".join(tried)


H2D = re.compile(r"memcpy.?h(2|to)d|h(2|to)d.?memcpy", re.IGNORECASE)
DERIVED_LINES = ("XLA Modules", "XLA Ops", "Steps", "Framework", "Source", "TensorFlow", "Launch")


class Trace:
    """jax.profiler.start_trace / stop_trace around `run()`; the GPU plane's ops as
    (start [ns], end [ns], name) sorted by start, without host-to-device copies (the dropout
    states the host puts before a step: not the step's work)."""

    described = False

    def __init__(self, jax, profile_data, run):
        directory = tempfile.mkdtemp(prefix="jaxclock-trace-")
        try:
            jax.profiler.start_trace(directory)
            try:
                self.result = run()
            finally:
                jax.profiler.stop_trace()
            files = sorted(pathlib.Path(directory).glob("**/*.xplane.pb"))
            if not files:
                raise RuntimeError(f"no .xplane.pb under {directory} after stop_trace")
            data = (profile_data.from_file(str(files[-1])) if hasattr(profile_data, "from_file")
                    else profile_data.from_serialized_xspace(files[-1].read_bytes()))
            self.ops, self.excluded, self.lines = self._gpu_ops(data)
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    def _gpu_ops(self, data):
        planes = [p for p in data.planes if p.name.startswith("/device:GPU")]
        if not Trace.described:
            Trace.described = True
            say(f"  xplane planes: {[p.name for p in data.planes]}")
        ops, excluded, used = [], 0, []
        for plane in planes[:1]:  # one GPU: this process's device 0
            lines = list(plane.lines)
            streams = [line for line in lines if line.name.startswith("Stream")]
            chosen = streams or [line for line in lines if not line.name.startswith(DERIVED_LINES)]
            for line in chosen:
                used.append(line.name)
                for event in line.events:
                    start = float(event.start_ns)
                    end = start + float(event.duration_ns)
                    if H2D.search(event.name):
                        excluded += 1
                        continue
                    ops.append((start, end, event.name))
            if not getattr(Trace, "lines_said", False):
                Trace.lines_said = True
                say(f"  GPU plane {plane.name}: lines {[line.name for line in lines]}; timed from {used}")
        ops.sort()
        return ops, excluded, used


def group_steps(ops, steps):
    """The ops of `steps` consecutive steps, one list per step: the ops in start order cut into
    equal chunks (every step runs the same compiled program: the same ops in the same order),
    held by their names being the same sequence in every chunk. Else (an op count not divisible
    by the steps, or names that differ): cut at the steps - 1 widest gaps between one op's end and
    the next op's start (host-synced steps have the host's sync and dispatch between them).
    Returns (groups, how)."""
    if not ops or steps <= 0:
        return [], "no GPU ops"
    if len(ops) % steps == 0:
        size = len(ops) // steps
        groups = [ops[k * size:(k + 1) * size] for k in range(steps)]
        names = [tuple(op[2] for op in group) for group in groups]
        if all(n == names[0] for n in names):
            return groups, f"{size} ops per step, the same names in every step"
    if len(ops) < steps:
        return [], f"{len(ops)} GPU ops for {steps} steps"
    latest, reach = [], -math.inf  # latest[i - 1]: the latest end of ops[:i] [ns]
    for op in ops:
        reach = max(reach, op[1])
        latest.append(reach)
    gaps = sorted(range(1, len(ops)), key=lambda i: ops[i][0] - latest[i - 1], reverse=True)
    cuts = sorted(gaps[:steps - 1])
    bounds = [0] + cuts + [len(ops)]
    groups = [ops[bounds[k]:bounds[k + 1]] for k in range(steps)]
    sizes = sorted(len(g) for g in groups)
    return groups, f"cut at the widest gaps ({len(ops)} ops, {sizes[0]}..{sizes[-1]} per step)"


def spans_ms(groups):
    """Per step: its first op's start to its last op's end [ms]."""
    return [(max(op[1] for op in g) - g[0][0]) / 1e6 for g in groups if g]


def completion_intervals_ms(groups):
    """Per step after the first: the previous step's last op's end to its own [ms]."""
    ends = [max(op[1] for op in g) for g in groups if g]
    return [(b - a) / 1e6 for a, b in zip(ends, ends[1:])]


# ---- The fallback: cupy events on the legacy default stream ----------------------------------

def cupy_reference(jax, session, steps):
    """Device-paced steps with a cupy event recorded on the legacy default stream after each
    dispatch; the intervals between consecutive events [ms]. The legacy stream waits for prior work
    of every *blocking* stream of the context, so an event there completes with the step only if
    JAX's streams are blocking: tested first (an event recorded after a dispatch that completes
    while the step's outputs are not ready means non-blocking streams: no reference)."""
    import cupy

    legacy = cupy.cuda.Stream.null
    states = session._step_args()
    first = cupy.cuda.Event()
    out = session._dispatch(states)
    first.record(legacy)
    first.synchronize()
    leaves = jax.tree_util.tree_leaves(out)
    ready = all(leaf.is_ready() for leaf in leaves)
    jax.block_until_ready(out)
    if not ready:
        return dict(valid=False, why="an event on the legacy default stream completed before the JAX step: "
                                     "JAX's streams are non-blocking streams; no cupy reference")
    events, outs = [], []
    for _ in range(steps + 1):
        outs.append(session._dispatch(session._step_args()))
        event = cupy.cuda.Event()
        event.record(legacy)
        events.append(event)
        if len(outs) > 2:
            jax.block_until_ready(outs.pop(0))
    for pending in outs:
        jax.block_until_ready(pending)
    events[-1].synchronize()
    intervals = [cupy.cuda.get_elapsed_time(a, b) for a, b in zip(events, events[1:])]
    return dict(valid=True, why="JAX's streams are blocking (the legacy stream's event waited for the step)",
                intervals_ms=intervals)



def paced_deeper(jax, session, count, depth):
    """Device-paced with `depth` steps in flight (the worker keeps 1 queued behind the one running):
    if the intervals shrink with depth, the host's wake-up and dispatch left the device idle
    between steps at depth 1. Intervals between consecutive completions [ms], the first dropped."""
    pending, times, dispatched, previous = [], [], 0, None
    with jax.default_matmul_precision(session.matmul_precision):
        while dispatched < min(depth + 1, count):
            pending.append(session._dispatch(session._step_args()))
            dispatched += 1
        while pending:
            jax.block_until_ready(pending.pop(0))
            now = time.perf_counter()
            if previous is not None:
                times.append((now - previous) * 1e3)
            previous = now
            if dispatched < count:
                pending.append(session._dispatch(session._step_args()))
                dispatched += 1
    return times


# ---- The untraced reference: the step in a device loop ------------------------------------------

def loop_reference(jax, session, min_loop_ms, per_step_guess_ms, runs=3):
    """The session's jitted step K times in one jax.lax.fori_loop (one XLA program: no host work
    between steps, no profiler); per run wall [ms] / K. Returns dict(steps=K, runs_ms=[per step of
    each run], compile_s)."""
    import jax.numpy as jnp
    from jax import lax

    steps = max(20, int(math.ceil(min_loop_ms / max(per_step_guess_ms, 1e-3))))
    states = session._step_args()
    labels = session.labels if session.training else None

    def tweak(params, carry_scalar):
        # the dependency on the previous step: params[-1] + loss * 0 (never simplified away: x * 0
        # is not 0 for NaN x, so XLA keeps it)
        last = params[-1]
        return list(params[:-1]) + [last + (carry_scalar * 0).astype(last.dtype)]

    # Everything the step reads is an argument of the jitted loop: a closed-over array would be a
    # constant of the program, and XLA would fold the step's work on it at compile time.
    if session.training:
        def loop(params, x, labels, states, init):
            def body(_, carry):
                loss, grads, _, logits = session._train(tweak(params, carry[0]), x, labels, states)
                return (loss.astype(jnp.float32), grads, logits)
            return lax.fori_loop(0, steps, body, init)

        loss, grads, _, logits = session._train(session.params, session.x, labels, states)
        init = (loss.astype(jnp.float32), grads, logits)
    else:
        def loop(params, x, labels, states, init):
            def body(_, logits):
                return session._infer(tweak(params, logits.ravel()[0].astype(jnp.float32)), x)
            return lax.fori_loop(0, steps, body, init)

        init = session._infer(session.params, session.x)
    jax.block_until_ready(init)
    looped = jax.jit(loop)
    arguments = (session.params, session.x, labels, states, init)
    with jax.default_matmul_precision(session.matmul_precision):
        tick = time.perf_counter()
        jax.block_until_ready(looped(*arguments))  # compile and one untimed run
        compile_s = time.perf_counter() - tick
        runs_ms = []
        for _ in range(runs):
            begin = time.perf_counter()
            jax.block_until_ready(looped(*arguments))
            runs_ms.append((time.perf_counter() - begin) * 1e3 / steps)
    return dict(steps=steps, runs_ms=runs_ms, compile_s=compile_s)

# ---- A cell --------------------------------------------------------------------------------------

def attempt(row, key, work):
    """work() into row[key]; a failure is reported in row["errors"], never fatal."""
    try:
        row[key] = work()
        return row[key]
    except Exception as error:  # noqa: BLE001 (one failed measurement is data)
        row.setdefault("errors", []).append(f"{key}: {type(error).__name__}: {str(error).splitlines()[0][:300]}")
        say(f"    {key} failed: {type(error).__name__}: {error}\n" + "".join(traceback.format_exc(limit=3))[-1500:])
        return None


def measure_cell(args, jax, worker, adapter, profile_data, network, precision, phase):
    row = dict(network=network, precision=precision, phase=phase, batch=args.batch, status="ok")
    graph = json.loads(graph_path(args, network).read_text())
    request = prepare_request(graph, network, precision, phase, args.batch, args.compile_cache)
    tick = time.perf_counter()
    session = adapter.prepare(request)  # the worker's JaxSession: the compile is its untimed step 0
    row["prepare_s"] = time.perf_counter() - tick
    samples = {k: [] for k in ("a_host", "b_device", "b_paced", "a_under_trace", "c_paced_under_trace",
                               "c_device_paced", "b_cupy", "d_loop", "c_depth3", "e_events")}
    limit = 1e9  # [s]: every step asked for

    def run(timing, count):
        session.timing = timing
        return session.run_steps(count, limit, False)

    has_events = session.events is not None
    row["events"] = session.events.describe() if has_events else f"unavailable: {session.timing_fallback}"
    try:
        session.timing = worker.DEVICE_PACED
        session.run_steps(args.warmup, limit, True)
        for round_index in range(args.rounds):
            got = attempt(row, "last_a", lambda: run(worker.HOST, args.steps))
            samples["a_host"] += got or []
            got = attempt(row, "last_c", lambda: run(worker.DEVICE_PACED, args.steps))
            samples["c_device_paced"] += got or []
            if has_events:
                samples["e_events"] += attempt(row, "last_e", lambda: run(worker.EVENTS, args.steps)) or []
            samples["c_depth3"] += attempt(row, "last_c3", lambda: paced_deeper(jax, session, args.steps, 3)) or []
            if args.reference in ("loop", "both"):
                guess = median(samples["c_device_paced"]) if samples["c_device_paced"] else 1.0
                got = attempt(row, "last_d", lambda: loop_reference(jax, session, args.loop_ms, guess))
                if got:
                    row["loop_steps"] = got["steps"]
                    row["loop_compile_s"] = got["compile_s"]
                    samples["d_loop"] += got["runs_ms"]
            if args.reference == "loop":
                pass
            elif profile_data is not None:
                def device_host_synced():
                    trace = Trace(jax, profile_data, lambda: run(worker.HOST, args.steps))
                    groups, how = group_steps(trace.ops, len(trace.result))
                    row["grouping"] = how
                    row["h2d_copies_excluded"] = trace.excluded
                    samples["a_under_trace"].extend(trace.result)
                    return spans_ms(groups)

                def device_paced():
                    trace = Trace(jax, profile_data, lambda: run(worker.DEVICE_PACED, args.steps))
                    groups, how = group_steps(trace.ops, len(trace.result))
                    row["grouping_paced"] = how
                    samples["c_paced_under_trace"].extend(trace.result[1:])
                    return completion_intervals_ms(groups)

                samples["b_device"] += attempt(row, "last_b", device_host_synced) or []
                samples["b_paced"] += attempt(row, "last_b_paced", device_paced) or []
            else:
                got = attempt(row, "last_cupy", lambda: cupy_reference(jax, session, args.steps))
                if got:
                    row["cupy"] = got["why"]
                    samples["b_cupy"] += got.get("intervals_ms", [])
        row["decisions"] = session.decisions()
    finally:
        session.release()
    for key in [k for k in row if k.startswith("last_")]:
        del row[key]
    row["samples_ms"] = samples
    for key, values in samples.items():
        row[f"{key}_ms"] = median(values)
    reference = row["b_device_ms"] if row["b_device_ms"] == row["b_device_ms"] else row["b_cupy_ms"]
    if row["d_loop_ms"] == row["d_loop_ms"]:
        reference = row["d_loop_ms"]  # the untraced reference wherever it was measured
    row["reference_ms"] = reference
    row["a_over_b"] = row["a_host_ms"] / reference if reference > 0 else math.nan
    row["c_over_b"] = row["c_device_paced_ms"] / reference if reference > 0 else math.nan
    paced = row["b_paced_ms"]
    row["c_over_b_paced"] = row["c_device_paced_ms"] / paced if paced > 0 else math.nan
    row["c_within_1pct"] = bool(abs(row["c_over_b"] - 1) <= TARGET) if row["c_over_b"] == row["c_over_b"] else None
    row["a_within_1pct"] = bool(abs(row["a_over_b"] - 1) <= TARGET) if row["a_over_b"] == row["a_over_b"] else None
    row.update(event_ratios(row["e_events_ms"], row["c_device_paced_ms"], row["d_loop_ms"]))
    return row


def within(ratio):
    """True/False: `ratio` within TARGET of 1; None where it was not measured (NaN)."""
    return bool(abs(ratio - 1) <= TARGET) if ratio == ratio else None


def event_ratios(e_ms, c_ms, d_ms):
    """The events column's ratios: e/d (events against the untraced loop), c/e (device-paced against
    events on the same steps) and whether each is within TARGET; NaN / None where a side is missing."""
    e_over_d = e_ms / d_ms if e_ms > 0 and d_ms > 0 else math.nan
    c_over_e = c_ms / e_ms if c_ms > 0 and e_ms > 0 else math.nan
    return dict(e_over_d=e_over_d, c_over_e=c_over_e, e_within_1pct_of_d=within(e_over_d),
                c_within_1pct_of_e=within(c_over_e))


def graph_path(args, network):
    return pathlib.Path(args.graphs_dir) / f"{network}.json"


def cells(args):
    networks = args.networks.split(",")
    for network in networks:
        for precision in args.precisions.split(","):
            for phase in args.phases.split(","):
                yield network, precision, phase


def print_table(rows):
    say(f"\n{'network':9s} {'prec':5s} {'phase':9s} {'a host':>9s} {'ref':>9s} {'c paced':>9s} "
        f"{'b trace':>9s} {'e events':>9s} {'a/ref':>7s} {'c/ref':>7s} {'e/d':>7s} {'c/e':>7s}  c within 1%  "
        f"[ms]; ref = d (device loop, untraced) where measured, else b (profiler spans)")
    for r in rows:
        if r["status"] != "ok":
            say(f"{r['network']:9s} {r['precision']:5s} {r['phase']:9s} {r['status']}: {r.get('message', '')[:160]}")
            continue
        within = {True: "yes", False: "NO", None: "-"}[r["c_within_1pct"]]
        say(f"{r['network']:9s} {r['precision']:5s} {r['phase']:9s} {r['a_host_ms']:9.3f} {r['reference_ms']:9.3f} "
            f"{r['c_device_paced_ms']:9.3f} {r['b_device_ms']:9.3f} {r.get('e_events_ms', math.nan):9.3f} "
            f"{r['a_over_b']:7.4f} {r['c_over_b']:7.4f} {r.get('e_over_d', math.nan):7.4f} "
            f"{r.get('c_over_e', math.nan):7.4f}  {within}" + (f"  (loop of {r['loop_steps']} steps)" if r.get("loop_steps") else "")
            + (f"  c depth 3: {r['c_depth3_ms']:.3f}" if r.get("c_depth3_ms") == r.get("c_depth3_ms") else "")
            + (f"  events {r['events']}" if str(r.get("events", "")).startswith("unavailable") else "")
            + (f"  errors: {r['errors']}" if r.get("errors") else ""))
    ok = [r for r in rows if r["status"] == "ok" and r["c_within_1pct"] is not None]
    if ok:
        say(f"c (device-paced) within 1% of the reference: "
            f"{sum(r['c_within_1pct'] for r in ok)} of {len(ok)} cells; "
            f"a (host) within 1%: {sum(bool(r['a_within_1pct']) for r in ok)} of {len(ok)}")
    say(verdict(rows))


def verdict(rows):
    """The events line: in how many cells c (device-paced) is within 1% of e (events on the same
    steps), and e within 1% of d (the untraced loop), of the cells where both were measured."""
    def count(key):
        judged = [r[key] for r in rows if r.get("status") == "ok" and r.get(key) is not None]
        return f"{sum(judged)} of {len(judged)} cells" if judged else "not measured"
    return (f"c (device-paced) within 1% of e (events, the same steps): {count('c_within_1pct_of_e')}; "
            f"e (events) within 1% of d (device loop): {count('e_within_1pct_of_d')}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--networks", default="alexnet,resnet50")
    parser.add_argument("--precisions", default="tf32,bf16")
    parser.add_argument("--phases", default="training,inference")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per cell")
    parser.add_argument("--steps", type=int, default=30, help="steps per method per round")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of a, c, b (interleaved)")
    parser.add_argument("--reference", choices=("loop", "trace", "both"), default="loop",
                        help="the device's own time: d, the step in a device loop (untraced), b, the "
                             "profiler's kernel spans, or both (the ratios use d where it was measured)")
    parser.add_argument("--loop-ms", type=float, default=600, help="each device-loop run lasts at least this [ms]")
    parser.add_argument("--budget-s", type=float, default=150, help="no new cell after this long [s]")
    parser.add_argument("--crossbench", default=".bundle/run .bundle/bin/crossbench",
                        help="the command that runs the crossbench binary (export-network)")
    parser.add_argument("--graphs-dir", default="/tmp/crossbench-graphs")
    parser.add_argument("--compile-cache", default="/tmp/crossbench-jaxclock-cache",
                        help="engine.compile_cache of the prepare requests (none: every compile cold)")
    parser.add_argument("--events-library", default=".bundle/bin/libcrossbench_jax_events.so",
                        help="the worker's step events library (column e), unless "
                             "$CROSSBENCH_JAX_EVENTS_LIBRARY names one")
    parser.add_argument("--out", help="JSON with every cell, rewritten after each")
    args = parser.parse_args()
    if os.path.exists(args.events_library):
        os.environ.setdefault("CROSSBENCH_JAX_EVENTS_LIBRARY", os.path.abspath(args.events_library))

    os.makedirs(args.graphs_dir, exist_ok=True)
    for network in args.networks.split(","):
        path = graph_path(args, network)
        if not path.exists():
            subprocess.run(args.crossbench.split() + ["export-network", network, "--output", str(path)], check=True,
                           stdout=subprocess.DEVNULL)
    worker = load_worker()
    adapter = worker.JaxAdapter()
    hello = adapter.hello()  # imports jax, numpy and the synthetic values into the worker, as its process does
    say(f"worker hello: {json.dumps(hello)}")
    if hello.get("status") != "ok":
        raise SystemExit(f"the jax worker says {hello.get('status')}: {hello.get('message')}")
    import jax

    where, profile_data, tried = find_profile_data(jax)
    if profile_data is None:
        say(f"ProfileData: not found ({tried}); the reference is cupy events on the legacy default stream")
    else:
        say(f"ProfileData: {tried} ({', '.join(n for n in ('from_file', 'from_serialized_xspace') if hasattr(profile_data, n))})")
    rows, meta = [], dict(hello=hello, profile_data=where, profile_data_tried=tried, target=TARGET,
                          steps=args.steps, rounds=args.rounds, warmup=args.warmup)
    for network, precision, phase in cells(args):
        if time.monotonic() - STARTED > args.budget_s:
            rows.append(dict(network=network, precision=precision, phase=phase, batch=args.batch, status="skipped",
                             message=f"not started: past --budget-s {args.budget_s:.0f} s"))
            continue
        say(f"=== {network} {precision} {phase} b{args.batch} at {time.monotonic() - STARTED:.0f} s")
        try:
            row = measure_cell(args, jax, worker, adapter, profile_data, network, precision, phase)
            say(f"  prepare {row['prepare_s']:.1f} s; {row.get('grouping', '')}; decisions: {row.get('decisions', '')[:400]}")
        except Exception as error:  # noqa: BLE001 (a failed cell is data)
            status, message = adapter.classify(error)
            say(f"  {status}: {message}\n" + traceback.format_exc(limit=4)[-1500:])
            adapter.recover()
            row = dict(network=network, precision=precision, phase=phase, batch=args.batch, status=status,
                       message=message[:500])
        rows.append(row)
        print_table(rows)
        if args.out:
            pathlib.Path(args.out).write_text(json.dumps(dict(meta, cells=rows), indent=1, allow_nan=True))
    meta["wall_s"] = time.monotonic() - STARTED
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(dict(meta, cells=rows), indent=1, allow_nan=True))
    say(f"jaxclock wall_s {meta['wall_s']:.0f}")


if __name__ == "__main__":
    main()
