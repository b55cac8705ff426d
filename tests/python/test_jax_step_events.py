"""engine.jax_timing = events: libcrossbench_jax_events.so (src/workers/jax/events/) and the worker's
side of it (src/workers/jax/step_events.py).

Here (no GPU): where the library is looked for and why it is not used, its ctypes functions that
touch no device (the ring's size, reset, the refusal to read a period whose marks were never
recorded, with its reason), and which devices count as CUDA. The marks' wiring inside the worker's
step programs is tested on the CPU with a stand-in for the library (test_jax_worker.py,
test_jax_events_mark_each_step_first_and_read_the_periods_between_marks). On a machine with a CUDA GPU and a jax that sees it
(the GPU machine: `python3` with jax[cuda]), test_events_time_the_workers_steps_on_the_gpu runs
the worker's events timing on a small network; elsewhere it skips and says why."""
import ctypes
import json
import os
import pathlib
import subprocess
import sys
import types

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("CROSSBENCH_BUILD_DIR", REPO / "build"))
JAX_DIR = REPO / "src" / "workers" / "jax"
BUILT = BUILD / "libcrossbench_jax_events.so"
sys.path.insert(0, str(JAX_DIR))
import step_events  # noqa: E402  (ctypes, os and math only: no jax needed to import it)


@pytest.fixture
def library_env(monkeypatch):
    """A clean lookup: neither the explicit path nor the binary's folder set."""
    monkeypatch.delenv(step_events.LIBRARY_ENV, raising=False)
    monkeypatch.delenv(step_events.BINARY_DIR_ENV, raising=False)
    return monkeypatch


def test_the_library_is_looked_for_explicitly_next_to_the_worker_then_by_the_binary_and_the_linker(library_env):
    library_env.setenv(step_events.BINARY_DIR_ENV, "/opt/crossbench/build")
    assert step_events.candidates() == [str(JAX_DIR / step_events.LIBRARY),
                                        "/opt/crossbench/build/" + step_events.LIBRARY, step_events.LIBRARY]
    library_env.setenv(step_events.LIBRARY_ENV, "/x/libmine.so")
    assert step_events.candidates() == ["/x/libmine.so"]  # explicit: that one only


def test_an_absent_library_is_the_reason(library_env, tmp_path):
    library_env.setenv(step_events.LIBRARY_ENV, str(tmp_path / "libnothing.so"))
    library, why = step_events.load_library()
    assert library is None
    assert why == f"{step_events.LIBRARY} not found ({tmp_path / 'libnothing.so'}: absent)"


def test_a_library_without_the_handlers_is_refused(library_env):
    library_env.setenv(step_events.LIBRARY_ENV, "libm.so.6")  # loads, but holds none of ours
    library, why = step_events.load_library()
    assert library is None and "libm.so.6: lacks crossbench_step_mark, crossbench_step_events_period_ms" in why


def test_only_a_cuda_gpu_gets_events():
    def device(platform, version=""):
        return types.SimpleNamespace(platform=platform, client=types.SimpleNamespace(platform_version=version))

    assert step_events.is_cuda(device("gpu", "cuda 13000"))
    assert not step_events.is_cuda(device("cpu"))
    assert not step_events.is_cuda(device("gpu", "rocm 6.2"))
    events, why = step_events.StepEvents.open(None, device("cpu"))  # never touches jax or the library
    assert events is None and why == "not a CUDA device (cpu)"


@pytest.fixture
def built_library(library_env):
    if not BUILT.exists():
        pytest.skip(f"{BUILT} not built (CMake builds it where jaxlib's FFI headers and a CUDA toolkit are found)")
    library_env.setenv(step_events.BINARY_DIR_ENV, str(BUILD))
    library, where = step_events.load_library()
    assert library is not None, where
    return library, where


def test_the_built_library_exports_the_handler_and_reads_no_period_whose_marks_never_ran(built_library):
    library, where = built_library
    assert where in (str(BUILT), str(JAX_DIR / step_events.LIBRARY))
    for stale in ("crossbench_step_start", "crossbench_step_end", "crossbench_step_events_elapsed_ms"):
        assert not hasattr(library, stale), stale  # one name per concept: the mark
    assert library.crossbench_step_events_ring_size() == 64
    assert library.crossbench_step_events_reset() == 0
    ms = ctypes.c_float(-1)
    # No mark recorded: refused with the reason at once, before any CUDA call (this machine may
    # have no GPU), for the first step and for one far off.
    assert library.crossbench_step_events_period_ms(0, ctypes.byref(ms)) == 1
    assert library.crossbench_step_events_last_error().decode() == \
        "step 0 is not readable (it needs marks 0 and 1): 0 marks recorded, 64 slots"
    assert library.crossbench_step_events_period_ms(-1, ctypes.byref(ms)) == 1
    assert library.crossbench_step_events_last_error().decode().startswith("step -1 is not readable")
    assert ms.value == -1
    assert library.crossbench_step_events_reset() == 0 and library.crossbench_step_events_last_error() == b""


def test_the_library_needs_no_driver_and_no_shared_cudart():
    """CUDA runtime only, linked statically: the worker's process resolves no cudart of ours, and
    the driver API (libcuda) is never linked (cudart loads it at run time)."""
    if not BUILT.exists():
        pytest.skip(f"{BUILT} not built")
    needed = subprocess.run(["ldd", str(BUILT)], capture_output=True, text=True, timeout=60).stdout
    assert "libcuda.so" not in needed and "libcudart" not in needed, needed


# ---- On the GPU machine --------------------------------------------------------------------------

GPU_CHECK = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import worker
adapter = worker.JaxAdapter()
hello = adapter.hello()
assert hello["status"] == "ok", hello
graph = json.load(open(sys.argv[2]))
result = {}
for timing in ("events", "device-paced"):
    request = dict(type="prepare", cell=dict(network=graph["name"], precision="tf32", batch=64, phase="training",
                                             replica=0), graph=graph, threads=1,
                   settings={"measure.seed": 42, "measure.update": "none", "measure.learning_rate": 0.01,
                             "engine.layout": "auto", "engine.compile_mode": "reduce-overhead",
                             "engine.compile_cache": "none", "engine.jax_timing": timing})
    session = adapter.prepare(request)
    session.run_steps(5, 300, True)
    samples = []
    for _ in range(3):  # interleaved batches of 20
        samples += session.run_steps(20, 300, False)
    result[timing] = dict(samples=samples, decisions=session.decisions(), timing=session.timing)
    session.release()
print(json.dumps(result))
"""


def gpu_python():
    """A python whose jax sees a CUDA GPU, or None with the reason."""
    for python in filter(None, (os.environ.get("CROSSBENCH_JAX_PYTHON"), "python3")):
        try:
            done = subprocess.run([python, "-c", "import jax; d = jax.devices()[0]; print(d.platform)"],
                                  capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0 and done.stdout.strip().splitlines()[-1:] == ["gpu"]:
            return python, None
    return None, "no python here has a jax that sees a CUDA GPU (this test runs on the GPU machine)"


def test_events_time_the_workers_steps_on_the_gpu(tmp_path):
    """On the GPU: alexnet tf32 training at batch 64 (at 16 the step is host-bound) timed by events
    (one mark per step, recorded inside the step's own program), then device-paced, in one process.
    Every events sample is positive and finite, the decisions name events and the library (no
    fallback, no retrace), and the medians agree within 10%: both measure the period from one
    step to the next, events on the device's clock (mark to mark), device-paced on the host's
    (completion to completion); the 1% comparison is bench/gpu_jax_clock.py's, over many more
    steps."""
    if not BUILT.exists():
        pytest.skip(f"{BUILT} not built")
    python, why = gpu_python()
    if python is None:
        pytest.skip(why)
    binary = BUILD / "crossbench"
    if not binary.exists():
        pytest.skip(f"crossbench binary not built at {binary}")
    graph = tmp_path / "alexnet.json"
    exported = subprocess.run([str(binary), "export-network", "alexnet", "--output", str(graph)],
                              capture_output=True, text=True, timeout=120)
    assert exported.returncode == 0, exported.stderr
    env = dict(os.environ, **{step_events.LIBRARY_ENV: str(BUILT)})
    done = subprocess.run([python, "-c", GPU_CHECK, str(JAX_DIR), str(graph)], capture_output=True, text=True,
                          timeout=900, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    events, paced = result["events"], result["device-paced"]
    assert events["timing"] == "events", events["decisions"]
    assert " timing=events(marks: " in events["decisions"], events["decisions"]
    assert f"step_events={BUILT}, ring of 64 marks" in events["decisions"], events["decisions"]
    assert "timing_fallback" not in events["decisions"], events["decisions"]
    assert "timed_steps: retraces=0" in events["decisions"], events["decisions"]
    assert len(events["samples"]) == 60
    assert all(0 < t < 1e4 for t in events["samples"]), events["samples"]  # [ms], finite
    e = sorted(events["samples"])[30]
    c = sorted(paced["samples"])[30]
    print(f"alexnet tf32 training b64: events median {e:.4f} ms, device-paced {c:.4f} ms, e/c {e / c:.4f}")
    assert 0.9 < e / c < 1.1, (events["samples"], paced["samples"])
