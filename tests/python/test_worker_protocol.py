"""Worker protocol 3 (README "Framework workers"): the Runner asks a worker for batches of steps
and decides alone when to stop; `prepare` carries the options schema's worker settings. Spoken
directly to the PyTorch worker, and through a real crossbench run with a worker that records the
requests it got. Also: the amp-* precisions are the frameworks' recipe, which the native engines
answer `unsupported`."""
import json
import os
import pathlib
import subprocess
import sys

import h5py
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
if str(REPO / "src" / "workers") not in sys.path:
    sys.path.insert(0, str(REPO / "src" / "workers"))
from common.protocol import PROTOCOL  # noqa: E402

TORCH_WORKER = REPO / "src" / "workers" / "pytorch" / "worker.py"
RECORDING = REPO / "tests" / "workers" / "recording_worker.py"
PYTHON = "/usr/bin/python3"


def torch_available():
    return subprocess.run([PYTHON, "-c", "import torch"], capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(not torch_available(), reason="Debian's python3-torch is not installed")


def small_graph():
    """conv + batch-norm + relu + max-pool + flatten + dropout + fc + loss, on 3x8x8 images."""
    layers = []

    def layer(kind, inputs, params, output):
        layers.append({"index": len(layers), "name": f"{kind}{len(layers)}", "kind": kind, "inputs": inputs,
                       "params": params, "output": output})
        return len(layers) - 1

    x = layer("input", [], {}, [3, 8, 8])
    c = layer("convolution", [x], {"out_channels": 4, "kernel": 3, "stride": 1, "padding": 1, "bias": True}, [4, 8, 8])
    b = layer("batch_norm", [c], {"epsilon": 1e-5, "momentum": 0.1}, [4, 8, 8])
    r = layer("relu", [b], {}, [4, 8, 8])
    m = layer("max_pool", [r], {"kernel": 2, "stride": 2, "padding": 0, "ceil_mode": False}, [4, 4, 4])
    f = layer("flatten", [m], {}, [64, 1, 1])
    d = layer("dropout", [f], {"rate": 0.5}, [64, 1, 1])
    fc = layer("fully_connected", [d], {"out_features": 10, "bias": True}, [10, 1, 1])
    layer("softmax_cross_entropy", [fc], {}, [1, 1, 1])
    return {"format": "crossbench-network/1", "name": "small", "classes": 10,
            "input": {"channels": 3, "height": 8, "width": 8}, "layers": layers}


# The schema's defaults of the keys it sends to workers (`crossbench list options`, "to workers").
DEFAULT_SETTINGS = {"measure.seed": 42, "measure.update": "none", "measure.learning_rate": 0.01,
                    "engine.layout": "auto", "engine.compile_mode": "reduce-overhead",
                    "engine.compile_cache": "none", "engine.jax_timing": "events"}


def prepare_request(precision="fp32", phase="training", settings=None):
    return dict(type="prepare", cell=dict(network="small", precision=precision, batch=2, phase=phase, replica=0),
                graph=small_graph(), threads=1, settings={**DEFAULT_SETTINGS, **(settings or {})})


def converse(requests, worker=TORCH_WORKER, protocol=PROTOCOL):
    text = "".join(json.dumps(dict(protocol=protocol, **r)) + "\n" for r in requests)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    result = subprocess.run([PYTHON, "-u", str(worker)], input=text, capture_output=True, text=True,
                            timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()], result.stderr


def test_steps_requests_return_exactly_the_steps_asked_for():
    replies, stderr = converse([
        dict(type="steps", count=3, warmup=False, time_limit_s=60),  # before any prepare: a failed cell
        prepare_request(),
        dict(type="steps", count=2, warmup=True, time_limit_s=60),
        dict(type="steps", count=5, warmup=False, time_limit_s=60),
        dict(type="steps", count=4, warmup=False, time_limit_s=0),  # no time left: no step
        dict(type="steps", count=0, warmup=False, time_limit_s=60),
        dict(type="release"), dict(type="exit")])
    assert [r["type"] for r in replies] == ["hello", "stepped", "prepared", "stepped", "stepped", "stepped",
                                            "stepped", "released"], stderr[-2000:]
    assert all(r["protocol"] == PROTOCOL for r in replies)
    assert replies[1]["status"] == "failed" and "without a prepared cell" in replies[1]["message"]
    counts = [len(r["samples_ms"]) for r in replies[3:7]]
    assert counts == [2, 5, 0, 0]
    assert all(t > 0 for t in replies[4]["samples_ms"])
    assert "recipe=fp32-strict" in replies[4]["decisions"] and "eager" in replies[4]["decisions"]
    # No stopping rule in the worker: nothing in a reply says why it stopped.
    assert all("stop_reason" not in r for r in replies)


def test_the_old_measure_request_is_refused():
    replies, stderr = converse([prepare_request(), dict(type="measure", warmup=1, min_steps=2, max_steps=2,
                                                        target_ci=0.5, time_limit_s=60)])
    assert [r["type"] for r in replies] == ["hello", "prepared"]
    assert "unknown request type 'measure'" in stderr


def run_cells(run_crossbench, tmp_path, *, engines, precisions, workers, measure):
    job = tmp_path / "job.ini"
    job.write_text("[matrix]\nnetworks = alexnet\n"
                   f"engines = {engines}\nprecisions = {precisions}\nbatches = 1\nphases = inference\n"
                   f"[measure]\n{measure}cell_time_limit_s = 300\n[workers]\n{workers}\n")
    cube = tmp_path / "cube.h5"
    result = run_crossbench("run", "--job", job, "--output", cube, "--quiet", timeout=900)
    assert result.returncode == 0, result.stderr + result.stdout
    cells = {}
    with h5py.File(cube, "r") as f:
        names = {v: k for k, v in h5py.check_enum_dtype(f["status"].dtype).items()}
        engines_axis = [e.decode() for e in f["engine"][...]]
        precisions_axis = [p.decode() for p in f["precision"][...]]
        for e, engine in enumerate(engines_axis):
            for p, precision in enumerate(precisions_axis):
                at = (0, e, 0, p, 0, 0, 0, 0)
                cells[(engine, precision)] = dict(status=names[f["status"][at]], message=f["message"][at].decode(),
                                                  decisions=f["decisions"][at].decode(), steps=int(f["steps"][at]))
    return cells


def test_the_runner_decides_the_batches_and_when_to_stop(run_crossbench, tmp_path):
    record = tmp_path / "requests.jsonl"
    cells = run_cells(run_crossbench, tmp_path, engines="recording", precisions="fp32",
                      workers=f"recording = {PYTHON} -u {RECORDING} --record {record}",
                      measure="warmup = 2\nmin_steps = 3\nmax_steps = 17\ntarget_ci = 1e-12\n")
    cell = cells[("recording", "fp32")]
    assert cell["status"] == "ok", cell["message"]
    # target_ci 1e-12 is never met: the Runner's schedule runs to max_steps in the rule's batches:
    # warm-up, min_steps, then 10 more (10% of the steps, at least 10), cut at max_steps.
    requests = [json.loads(line) for line in record.read_text().splitlines()]
    assert requests == [{"count": 2, "warmup": True}, {"count": 3, "warmup": False},
                        {"count": 10, "warmup": False}, {"count": 4, "warmup": False}]
    assert cell["steps"] == 17
    assert "stopped by max_steps after 17 steps" in cell["message"], cell["message"]


@pytest.mark.parametrize("worker_per_cell", ["true", "false"])
def test_a_worker_that_ends_with_its_cell_is_not_asked_to_release_it(run_crossbench, tmp_path, worker_per_cell):
    # Its exit frees everything; a release first would only add the framework's teardown to the cell's wall.
    # A worker that serves the next cell (engine.worker_per_cell = false) releases each cell.
    record = tmp_path / "requests.jsonl"
    cells = run_cells(run_crossbench, tmp_path, engines="recording", precisions="fp32",
                      workers=f"recording = {PYTHON} -u {RECORDING} --record {record}",
                      measure=f"warmup = 1\nmin_steps = 2\nmax_steps = 2\n[engine]\nworker_per_cell = {worker_per_cell}\n"
                              "[measure]\n")
    assert cells[("recording", "fp32")]["status"] == "ok", cells[("recording", "fp32")]["message"]
    requests = [json.loads(line) for line in record.read_text().splitlines()]
    released = [{"release": True}] if worker_per_cell == "false" else []
    assert requests == [{"count": 1, "warmup": True}, {"count": 2, "warmup": False}] + released


def test_amp_precisions_run_in_pytorch_and_are_unsupported_in_onednn(run_crossbench, tmp_path):
    cells = run_cells(run_crossbench, tmp_path, engines="onednn, pytorch", precisions="amp-bf16, amp-fp16",
                      workers="", measure="warmup = 1\nmin_steps = 2\nmax_steps = 2\n")
    onednn = cells[("onednn", "amp-bf16")]
    if "not built" in onednn["message"]:
        pytest.skip("the onednn engine is not built here")
    for precision in ("amp-bf16", "amp-fp16"):
        native = cells[("onednn", precision)]
        assert native["status"] == "unsupported", native
        assert "mixed-precision recipe" in native["message"] and precision in native["message"], native
    torch_cell = cells[("pytorch", "amp-bf16")]
    assert torch_cell["status"] == "ok", torch_cell["message"]
    assert ("recipe=amp-bf16 (fp32 master weights and gradients; bf16 compute through casts) [torch.autocast bf16"
            in torch_cell["decisions"])
    # amp-fp16 on a CPU: PyTorch has no fast fp16 there; the worker says so.
    assert cells[("pytorch", "amp-fp16")]["status"] == "unsupported"
