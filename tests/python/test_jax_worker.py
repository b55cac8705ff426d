"""The JAX worker (src/workers/jax/worker.py): its protocol spoken directly, its output check against
the oneDNN engine's through `crossbench check` (agreement.py), and jax cells of a real `crossbench
run` ending `ok` in the cube.

Debian has no jax package: scripts/test makes a venv in the build directory (build/venv, with
--system-site-packages so that it shares Debian's numpy and scipy) and installs a pinned jax from
PyPI into it (scripts/common.sh, setup_jax_venv). The worker runs under $CROSSBENCH_JAX_PYTHON
(scripts/test sets it to that venv's python), else build/venv/bin/python, else /usr/bin/python3,
whichever imports jax; `crossbench` is told through the job's [workers] section. Without any, the
jax tests skip and say why ($CROSSBENCH_JAX_UNAVAILABLE: scripts/test's reason, e.g. no network).
The PyTorch reference of the protocol test skips likewise when torch is missing."""
import functools
import json
import os
import pathlib
import re
import subprocess
import sys

import h5py
import numpy as np
import pytest

from agreement import NETWORKS, RELATIVE, assert_agrees_with_onednn, require_onednn

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("CROSSBENCH_BUILD_DIR", REPO / "build"))
JAX_WORKER = REPO / "src" / "workers" / "jax" / "worker.py"
TORCH_WORKER = REPO / "src" / "workers" / "pytorch" / "worker.py"
SYSTEM_PYTHON = "/usr/bin/python3"
if str(REPO / "src" / "workers") not in sys.path:
    sys.path.insert(0, str(REPO / "src" / "workers"))
from common.protocol import PROTOCOL  # noqa: E402  (the framework-free part of the workers)


def imports(python, module):
    try:
        return subprocess.run([python, "-c", f"import {module}"], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@functools.lru_cache(maxsize=None)
def jax_python():
    """(python, None) for a python that imports jax, or (None, why not)."""
    chosen = os.environ.get("CROSSBENCH_JAX_PYTHON")
    if chosen:
        if imports(chosen, "jax"):
            return chosen, None
        return None, f"CROSSBENCH_JAX_PYTHON={chosen} cannot import jax"
    venv = BUILD / "venv" / "bin" / "python"
    for python in (str(venv), SYSTEM_PYTHON):
        if os.path.exists(python) and imports(python, "jax"):
            return python, None
    why = os.environ.get("CROSSBENCH_JAX_UNAVAILABLE", f"{venv} does not exist or has no jax")
    return None, (f"no python with jax ({why}); scripts/test installs jax into {venv.parent.parent}, "
                  "or set CROSSBENCH_JAX_PYTHON to a python with jax")


@pytest.fixture(scope="module")
def jax_interpreter():
    python, why = jax_python()
    if python is None:
        pytest.skip(why)
    return python


def jax_worker_setting(python):
    """The [workers] entry that runs the jax worker under `python`, as `--set` takes it."""
    return f"workers.jax={python} -u {{workers}}/jax/worker.py"


@pytest.fixture(scope="module")
def alexnet_graph():
    binary = BUILD / "crossbench"
    if not binary.exists():
        pytest.skip(f"crossbench binary not built at {binary} (set CROSSBENCH_BUILD_DIR)")
    result = subprocess.run([str(binary), "export-network", "alexnet"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def prepare_request(graph, *, seed=42, batch=2, phase="training", precision="fp32", compile_cache="none",
                    timing="device-paced", update="none", learning_rate=0.01):
    """A `prepare` request with every key the options schema sends to workers (its defaults but for
    those given)."""
    return dict(type="prepare", cell=dict(network=graph["name"], precision=precision, batch=batch, phase=phase,
                                          replica=0),
                graph=graph, threads=2,
                settings={"measure.seed": seed, "measure.update": update, "measure.learning_rate": learning_rate,
                          "engine.layout": "auto", "engine.compile_mode": "reduce-overhead",
                          "engine.compile_cache": compile_cache, "engine.jax_timing": timing})


def speak(python, worker, requests):
    """The worker's replies to `requests` (exit appended), on the CPU."""
    text = "".join(json.dumps(dict(protocol=PROTOCOL, **r)) + "\n" for r in [*requests, dict(type="exit")])
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", JAX_PLATFORMS="cpu", OMP_NUM_THREADS="2")
    result = subprocess.run([python, "-u", str(worker)], input=text, capture_output=True, text=True,
                            timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    replies = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert all(r["protocol"] == PROTOCOL for r in replies)
    return replies, result.stderr


def converse(python, worker, graph, *, seed=42, batch=2, phase="training", precision="fp32", compile_cache="none",
             timing="device-paced"):
    """hello, prepare, steps (warm-up 1, then 2 timed), check, release, exit; returns the replies by
    type (the timed `steps` reply as "stepped")."""
    requests = [
        prepare_request(graph, seed=seed, batch=batch, phase=phase, precision=precision, compile_cache=compile_cache,
                        timing=timing),
        dict(type="steps", count=1, warmup=True, time_limit_s=300),
        dict(type="steps", count=2, warmup=False, time_limit_s=300),
        dict(type="check"),
        dict(type="release"),
    ]
    replies, stderr = speak(python, worker, requests)
    by_type = {r["type"]: r for r in replies}  # the later (timed) `stepped` reply wins
    assert [r["type"] for r in replies] == ["hello", "prepared", "stepped", "stepped", "checked", "released"], \
        (replies, stderr[-4000:])
    return by_type


def test_jax_unsupported_without_site_packages():
    result = subprocess.run([SYSTEM_PYTHON, "-S", "-u", str(JAX_WORKER)], input="", capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    hello = json.loads(result.stdout.splitlines()[0])
    assert hello["type"] == "hello" and hello["protocol"] == PROTOCOL and hello["worker"] == "jax"
    assert hello["status"] == "unsupported"
    assert "JAX is not importable by" in hello["message"]
    assert "pip install jax (CPU) or jax[cuda12]" in hello["message"]


@pytest.mark.parametrize("timing", ["device-paced", "host"])
def test_jax_alexnet_training_matches_pytorch(alexnet_graph, jax_interpreter, timing):
    python = jax_interpreter
    jax_replies = converse(python, JAX_WORKER, alexnet_graph, timing=timing)
    hello = jax_replies["hello"]
    assert hello["status"] == "ok" and hello["framework"].startswith("jax ") and hello["device"]
    assert jax_replies["prepared"]["status"] == "ok", jax_replies["prepared"]
    measured = jax_replies["stepped"]
    assert measured["status"] == "ok", measured
    assert len(measured["samples_ms"]) == 2 and all(t > 0 for t in measured["samples_ms"])
    assert "jax" in measured["decisions"] and f" timing={timing}(" in measured["decisions"]
    checked = jax_replies["checked"]
    assert checked["status"] == "ok" and checked["finite"], checked
    assert checked["loss"] > 0
    # alexnet: 8 layers with weight + bias
    assert len(checked["gradient_norms"]) == 16 and all(n > 0 for n in checked["gradient_norms"])
    print("jax check:", {k: checked[k] for k in ("loss", "logits_checksum", "gradient_norm")})

    if not imports(SYSTEM_PYTHON, "torch"):
        pytest.skip("torch is not importable by /usr/bin/python3: no PyTorch reference")
    reference = converse(SYSTEM_PYTHON, TORCH_WORKER, alexnet_graph)["checked"]
    assert reference["status"] == "ok", reference
    print("pytorch check:", {k: reference[k] for k in ("loss", "logits_checksum", "gradient_norm")})
    assert checked["loss"] == pytest.approx(reference["loss"], rel=RELATIVE)
    assert checked["gradient_norm"] == pytest.approx(reference["gradient_norm"], rel=RELATIVE)
    for mine, theirs in zip(checked["gradient_norms"], reference["gradient_norms"]):
        assert mine == pytest.approx(theirs, rel=RELATIVE)


def test_jax_device_paced_timing_gives_one_sample_per_step_and_the_host_timings_numbers(alexnet_graph,
                                                                                     jax_interpreter):
    """engine.jax_timing = device-paced queues step k+1 before it waits for step k: one sample per
    timed step all the same, each positive, near the host timing's steps (on the CPU, where XLA
    runs a step on the host's cores, the two clocks measure nearly the same thing: a factor of 3
    either way allows for a loaded machine, not for a sample that is a sum or a fraction of
    steps), and, with update = sgd (each step takes the previous step's parameters while they are
    still in flight), the same weights after the same steps as timing = host."""
    steps = 5
    requests = []
    for timing in ("device-paced", "host"):
        # learning rate 1e-4: alexnet's synthetic weights diverge within 6 steps of 1e-2
        requests += [prepare_request(alexnet_graph, timing=timing, update="sgd", learning_rate=1e-4),
                     dict(type="steps", count=1, warmup=True, time_limit_s=300),
                     dict(type="steps", count=steps, warmup=False, time_limit_s=300),
                     dict(type="steps", count=0, warmup=False, time_limit_s=300),
                     dict(type="check")]
    replies, stderr = speak(jax_interpreter, JAX_WORKER, requests + [dict(type="release")])
    assert [r["type"] for r in replies] == ["hello"] + ["prepared", "stepped", "stepped", "stepped", "checked"] * 2 \
        + ["released"], (replies, stderr[-4000:])
    assert all(r["status"] == "ok" for r in replies[1:]), replies
    paced, host = replies[3], replies[8]
    assert replies[4]["samples_ms"] == [] and replies[9]["samples_ms"] == []  # count 0: no step run
    for reply, timing in ((paced, "device-paced"), (host, "host")):
        assert len(reply["samples_ms"]) == steps and all(t > 0 for t in reply["samples_ms"]), reply
        assert f" timing={timing}(" in reply["decisions"], reply["decisions"]
    ratio = float(np.median(paced["samples_ms"]) / np.median(host["samples_ms"]))
    print(f"median [ms] device-paced {np.median(paced['samples_ms']):.2f}, host {np.median(host['samples_ms']):.2f}")
    assert 1 / 3 < ratio < 3, (paced["samples_ms"], host["samples_ms"])
    # 1 + 5 sgd steps each (the warm-up updates too), then check's forward and backward on the result.
    paced_check, host_check = replies[5], replies[10]
    assert paced_check["finite"] and host_check["finite"], (paced_check, host_check)
    assert paced_check["loss"] == pytest.approx(host_check["loss"], rel=1e-6)
    assert paced_check["gradient_norm"] == pytest.approx(host_check["gradient_norm"], rel=1e-6)


def test_jax_worker_refuses_an_unknown_timing(alexnet_graph, jax_interpreter):
    replies, _ = speak(jax_interpreter, JAX_WORKER, [prepare_request(alexnet_graph, timing="wall")])
    assert replies[1]["type"] == "prepared" and replies[1]["status"] == "failed"
    assert "engine.jax_timing = 'wall'" in replies[1]["message"]
    assert "events, device-paced, host" in replies[1]["message"]


def test_jax_events_fall_back_to_device_paced_on_the_cpu_and_say_why(alexnet_graph, jax_interpreter):
    """engine.jax_timing = events on the CPU: no CUDA stream to put events
    on, so the worker times device-paced and its decisions name the fallback and the reason."""
    replies = converse(jax_interpreter, JAX_WORKER, alexnet_graph, timing="events")
    measured = replies["stepped"]
    assert measured["status"] == "ok" and len(measured["samples_ms"]) == 2, measured
    decisions = measured["decisions"]
    assert " timing=device-paced(" in decisions and " timing=events(" not in decisions, decisions
    assert "timing_fallback=events unavailable: not a CUDA device (cpu)" in decisions, decisions


def test_jax_events_without_the_library_say_it_is_missing(alexnet_graph, jax_interpreter, tmp_path):
    """Where the library cannot be found the reason names where it was looked for; checked in the
    worker's process with the CUDA test bypassed (the CPU would stop it first)."""
    script = r"""
import sys, types
sys.path.insert(0, sys.argv[1])
import step_events
step_events.is_cuda = lambda device: True
print(step_events.StepEvents.open(None, types.SimpleNamespace(platform="gpu"))[1])
"""
    env = dict(os.environ, CROSSBENCH_JAX_EVENTS_LIBRARY=str(tmp_path / "libcrossbench_jax_events.so"))
    done = subprocess.run([jax_interpreter, "-c", script, str(JAX_WORKER.parent)], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (f"libcrossbench_jax_events.so not found "
                                   f"({tmp_path / 'libcrossbench_jax_events.so'}: absent)")


# Every network: alexnet (dropout, fully-connected layers), googlenet (LRN, concat, ceil-mode pools,
# avg-pool), the ResNets (batch-norm, residual adds, strided 1x1 convolutions), the VGGs and OverFeat
# (large fully-connected layers, deep plain stacks).
@pytest.mark.parametrize("network", NETWORKS)
def test_jax_worker_agrees_with_onednn(run_crossbench, crossbench_binary, jax_interpreter, network):
    require_onednn(crossbench_binary)
    assert_agrees_with_onednn(run_crossbench, network, "jax", "--set", jax_worker_setting(jax_interpreter))


def test_jax_cells_end_ok_in_the_cube(run_crossbench, jax_interpreter, tmp_path):
    job, cube = tmp_path / "jax.ini", tmp_path / "jax.h5"
    job.write_text("# jax cells through a real run: the worker command from [workers]\n"
                   "[matrix]\nnetworks = alexnet\nengines = jax\nprecisions = fp32\nbatches = 2\n"
                   "phases = inference, training\n"
                   "[measure]\nwarmup = 1\nmin_steps = 3\nmax_steps = 3\ntarget_ci = 0.5\n"
                   "cell_time_limit_s = 300\n"
                   f"[workers]\njax = {jax_interpreter} -u {{workers}}/jax/worker.py\n")
    result = run_crossbench("run", "--job", job, "--output", cube, "--quiet", timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    with h5py.File(cube, "r") as f:
        names = {v: k for k, v in h5py.check_enum_dtype(f["status"].dtype).items()}
        assert [e.decode() for e in f["engine"][...]] == ["jax"]
        phases = [p.decode() for p in f["phase"][...]]
        assert sorted(phases) == ["inference", "training"]
        for p, phase in enumerate(phases):
            cell = (0, 0, 0, 0, 0, p, 0, 0)  # gpus 1, replica 0
            message = f["message"][cell].decode()
            assert names[f["status"][cell]] == "ok", (phase, message)
            assert f["steps"][cell] == 3 and f["median_ms"][cell] > 0, (phase, message)
            assert np.isfinite(f["samples_ms"][cell][:3]).all()
            assert "loss" in message, message
            decisions = f["decisions"][cell].decode()
            assert decisions.startswith("jax "), decisions
            # Where the preparation went (common/preparation.py, and crossbench's own two parts at the end).
            assert re.search(r" setup=\d+\.\d\ds\(untimed: model, inputs\) startup=import \d+\.\d\ds \+ device "
                             r"\d+\.\d\ds\(untimed, in hello\)", decisions), decisions
            assert re.search(r" worker_start=\d+\.\d\ds\(new process: spawn to hello\) worker_prepare=\d+\.\d\ds$",
                             decisions), decisions
            assert re.search(r" prepare=\d+\.\d\ds\(untimed: the worker's whole prepare request\) worker_start=",
                             decisions), decisions
            # The compile's own set-up outside its clock (the persistent cache's), after compile=.
            assert re.search(r" compile=\d+\.\ds\(untimed\) compile_cache=.* compiler_setup=\d+\.\d\ds\(untimed: the "
                             r"persistent cache's set-up and scans\)", decisions), decisions


DEVICE_MASK_CHECK = r"""
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import worker
import jax, jax.numpy as jnp
assert worker.JaxAdapter().hello()["status"] == "ok"  # imports numpy and common.synthetic into the worker
graph = json.load(open(sys.argv[2]))
compared = 0
for seed in (42, 2**63 + 11):
    net = worker.Network(graph, seed)
    draw = jax.jit(lambda states: net.device_masks(states, 2, jnp.float32))
    for step in (0, 1, 7, 2**31 + 5, 2**32 - 1):
        device = [np.asarray(m) for m in draw(net.dropout_states(step))]
        host = net.dropout_masks(2, step, np.float32)
        assert len(device) == len(host) == 2, (len(device), len(host))
        for d, h in zip(device, host):
            assert d.dtype == h.dtype and d.shape == h.shape and np.array_equal(d, h), (seed, step)
            compared += d.size
print(compared)
"""


def test_jax_dropout_masks_drawn_in_the_step_are_the_host_masks(alexnet_graph, jax_interpreter, tmp_path):
    """The jitted step draws alexnet's dropout masks on the device (splitmix64 in 32-bit limbs):
    bit for bit synthetic.dropout_keep_mask's, for seeds and steps that use all 64 bits."""
    graph = tmp_path / "alexnet.json"
    graph.write_text(json.dumps(alexnet_graph))
    done = subprocess.run([jax_interpreter, "-c", DEVICE_MASK_CHECK, str(REPO / "src" / "workers" / "jax"), str(graph)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    # seeds × steps × batch × (the two dropouts: before fc6 on 256·6·6, before fc7 on 4096)
    assert int(done.stdout.split()[-1]) == 2 * 5 * 2 * (256 * 6 * 6 + 4096)


EVENTS_CHECK = r"""
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import worker, step_events
import jax, jax.numpy as jnp
from jax.experimental import io_callback
adapter = worker.JaxAdapter()
assert adapter.hello()["status"] == "ok"
graph = json.load(open(sys.argv[2]))
calls, read, dispatched = [], [], []

class StandIn(step_events.Marks):
    # The library's part on the CPU: the mark's FFI call becomes an ordered host callback inside
    # the program (the library is CUDA-only), the ring becomes a log.
    ring_size = 64
    def __init__(self):
        super().__init__(jax)
        self.token = jax.ShapeDtypeStruct((), jnp.float32)
    def mark_token(self):
        return io_callback(lambda: (calls.append("mark"), np.float32(0))[1], self.token, ordered=True)
    def reset(self): calls.append("reset")
    def period_ms(self, step):
        read.append((step, list(dispatched)))  # what the host had dispatched when step k was read
        return 1.0 + step
    def describe(self): return "stand-in"

stand_in = StandIn()
worker.StepEvents = type("Opens", (), {"open": staticmethod(lambda jax, device: (stand_in, None))})

def request(phase):
    return dict(type="prepare", cell=dict(network=graph["name"], precision="fp32", batch=1, phase=phase, replica=0),
                graph=graph, threads=1,
                settings={"measure.seed": 42, "measure.update": "none", "measure.learning_rate": 0.01,
                          "engine.layout": "auto", "engine.compile_mode": "reduce-overhead",
                          "engine.compile_cache": "none", "engine.jax_timing": "events"})

def callbacks(jaxpr):
    # The host callbacks (the marks' stand-ins) anywhere in a jaxpr, nested programs included.
    found = 0
    for eqn in jaxpr.eqns:
        found += eqn.primitive.name == "io_callback"
        for param in eqn.params.values():
            inner = getattr(param, "jaxpr", param)
            if hasattr(inner, "eqns"):
                found += callbacks(inner)
    return found

def program(jitted, *args):
    # The jitted function's own program: the jaxpr inside make_jaxpr's one pjit call.
    (call,) = jax.make_jaxpr(jitted)(*args).jaxpr.eqns
    return call.params["jaxpr"].jaxpr

result = {}
# Inference: the loop's marks and reads. The stand-in's calibration periods (1 to 5 ms, median 3)
# against a 3 ms minimum sample: one step per sample.
worker.EVENTS_MIN_SAMPLE_MS = 3.0
session = adapter.prepare(request("inference"))
jax.effects_barrier()  # every ordered callback of prepare has run
result["prepare_calls"] = list(calls)
result["prepare_reads"] = [step for step, _ in read]
result["steps_per_sample"] = session.steps_per_sample
del calls[:], read[:]
dispatch, mark = session._dispatch, session._dispatch_mark
session._dispatch = lambda states: (dispatched.append("step"), dispatch(states))[1]
session._dispatch_mark = lambda: (dispatched.append("mark"), mark())[1]
result["times"] = session.run_steps(11, 300, False)
jax.effects_barrier()  # every ordered callback has run
result["dispatched"] = list(dispatched)
result["calls"] = list(calls)
result["read"] = [(step, len(before), before[-1]) for step, before in read]
result["inference_decisions"] = session.decisions()
mark_program = program(stand_in.program())
result["mark_program"] = dict(callbacks=callbacks(mark_program), eqns=len(mark_program.eqns),
                              inputs=len(mark_program.invars))
result["inference_step_callbacks"] = callbacks(program(session._infer, session.params, session.x))
session.release()

# Inference again against a 9 ms minimum sample: 3 steps per sample.
worker.EVENTS_MIN_SAMPLE_MS = 9.0
session = adapter.prepare(request("inference"))
result["batched_steps_per_sample"] = session.steps_per_sample
jax.effects_barrier()
del calls[:], read[:], dispatched[:]
dispatch, mark = session._dispatch, session._dispatch_mark
session._dispatch = lambda states: (dispatched.append("step"), dispatch(states))[1]
session._dispatch_mark = lambda: (dispatched.append("mark"), mark())[1]
result["batched_times"] = session.run_steps(5, 300, False)
jax.effects_barrier()
result["batched_dispatched"] = list(dispatched)
result["batched_read"] = [(step, len(before), before[-1]) for step, before in read]
result["batched_decisions"] = session.decisions()
session.release()
worker.EVENTS_MIN_SAMPLE_MS = 3.0

# Training: the step's program holds no mark; check() runs the step the timed steps ran.
session = adapter.prepare(request("training"))
states = session._step_args()
args = (session.params, session.x, session.labels, states)
result["training_step_callbacks"] = callbacks(program(session._train, *args))
session.run_steps(1, 300, True)
session.run_steps(2, 300, False)
checked = session.check()
plain_states = jax.device_put(session.net.dropout_states(0), session.device)  # check()'s step
loss, grads, _, logits = session._train(session.params, session.x, session.labels, plain_states)
result["check_loss"], result["plain_loss"] = checked["loss"], float(loss)
result["check_gradient_norm"] = checked["gradient_norm"]
result["plain_gradient_norm"] = float(np.sqrt(sum(float(np.square(np.asarray(g, np.float64)).sum()) for g in grads)))
result["training_decisions"] = session.decisions()
print(json.dumps(result))
"""


def test_jax_events_mark_between_the_steps_and_read_the_periods_between_marks(alexnet_graph, jax_interpreter,
                                                                             tmp_path):
    """engine.jax_timing = events with a CPU stand-in for the library (an ordered host callback in
    place of its FFI call, in the mark's own program as Marks.program builds it): a mark is
    dispatched before each step and after the last, the step's program holds none; the ring is
    reset before each batch; steps go out back to back with at most STEPS_IN_FLIGHT (8) dispatched
    and unread, the oldest read when full (its next mark dispatched already); step k's sample is
    read from marks k and k+1; one sample per step; no retrace; check() runs the plain step."""
    graph = tmp_path / "alexnet.json"
    graph.write_text(json.dumps(alexnet_graph))
    done = subprocess.run([jax_interpreter, "-c", EVENTS_CHECK, str(JAX_WORKER.parent), str(graph)],
                          capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, CUDA_VISIBLE_DEVICES="", JAX_PLATFORMS="cpu"))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # prepare: the plain step's compile (no mark), the mark's program compiled and run once, then the
    # calibration: 5 steps marked one by one (a reset, 6 marks), their 5 periods read
    assert result["prepare_calls"] == ["mark", "reset"] + ["mark"] * 6
    assert result["prepare_reads"] == [0, 1, 2, 3, 4]
    assert result["steps_per_sample"] == 1
    assert result["times"] == [1.0 + k for k in range(11)]
    assert result["calls"] == ["reset"] + ["mark"] * 12  # a mark before each of 11 steps, one after the last
    assert result["dispatched"] == ["mark", "step"] * 11 + ["mark"], result["dispatched"]
    # step k is read once 8 steps are unread (k+8 dispatched, mark k+1 among them), before the next
    # mark; the rest after the last mark
    assert [step for step, _, _ in result["read"]] == list(range(11))
    assert [(count, last) for _, count, last in result["read"]] == \
        [(16, "step"), (18, "step"), (20, "step")] + [(23, "mark")] * 8
    assert result["mark_program"] == dict(callbacks=1, eqns=1, inputs=0), result["mark_program"]  # the mark alone
    assert result["inference_step_callbacks"] == 0 and result["training_step_callbacks"] == 0, result
    assert " timing=events(marks: " in result["inference_decisions"], result["inference_decisions"]
    assert "step_events=stand-in" in result["inference_decisions"]
    assert "timed_steps: retraces=0" in result["inference_decisions"], result["inference_decisions"]
    assert result["check_loss"] == pytest.approx(result["plain_loss"], rel=1e-6)
    assert result["check_gradient_norm"] == pytest.approx(result["plain_gradient_norm"], rel=1e-6)
    assert "timed_steps: retraces=0" in result["training_decisions"], result["training_decisions"]
    # A 9 ms minimum over a 3 ms calibration median: 3 steps between two marks, each sample the period / 3;
    # at most max(2, ceil(8 / 3)) = 3 samples unread, the oldest read before the next sample's mark.
    assert result["batched_steps_per_sample"] == 3
    assert result["batched_times"] == pytest.approx([(1.0 + j) / 3 for j in range(5)])
    assert result["batched_dispatched"] == ["mark", "step", "step", "step"] * 5 + ["mark"]
    assert result["batched_read"] == [[0, 12, "step"], [1, 16, "step"]] + [[j, 21, "mark"] for j in (2, 3, 4)]
    assert "steps_per_sample=3(a sample spans >= 9 ms; calibration: 5 marked steps, median 3 ms)" in \
        result["batched_decisions"], result["batched_decisions"]
