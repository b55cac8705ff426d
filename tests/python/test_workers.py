"""Framework workers under a real crossbench run on the CPU: the PyTorch worker
beside the oneDNN engine in one cube, and fault injection with a deliberately
broken worker (a real process that crashes, hangs or writes garbage)."""
import pathlib
import re
import subprocess
import sys

import h5py
import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BROKEN = REPO / "tests" / "workers" / "broken_worker.py"

JOB = """
[matrix]
networks = {networks}
engines = {engines}
precisions = fp32
batches = {batches}
phases = {phases}

[measure]
warmup = 1
min_steps = 2
max_steps = 3
target_ci = 0.5
cell_time_limit_s = {limit}

[workers]
{workers}
"""


def torch_available():
    return subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0


needs_torch = pytest.mark.skipif(not torch_available(), reason="Debian's python3-torch is not installed")


def run_job(run_crossbench, tmp_path, *, networks="alexnet", engines="pytorch", batches="2",
            phases="inference", limit=120, workers="", timeout=600):
    job = tmp_path / "job.ini"
    job.write_text(JOB.format(networks=networks, engines=engines, batches=batches, phases=phases,
                              limit=limit, workers=workers))
    output = tmp_path / "cube.h5"
    result = run_crossbench("run", "--job", job, "--output", output, "--quiet", timeout=timeout)
    assert result.returncode == 0, result.stderr + result.stdout
    return read_cells(output)


def read_cells(path):
    """{(engine, network, phase): (status, message, median)} of a cube."""
    with h5py.File(path, "r") as cube:
        names = {v: k for k, v in h5py.check_enum_dtype(cube["status"].dtype).items()}
        engines = [e.decode() for e in cube["engine"][...]]
        networks = [n.decode() for n in cube["network"][...]]
        phases = [p.decode() for p in cube["phase"][...]]
        status, message, median = cube["status"][...], cube["message"][...], cube["median_ms"][...]
        cells = {}
        for e, engine in enumerate(engines):
            for n, network in enumerate(networks):
                for p, phase in enumerate(phases):
                    index = (0, e, n, 0, 0, p, 0, 0)  # precision 0, batch 0, gpus 1, replica 0
                    cells[(engine, network, phase)] = (names[status[index]], message[index].decode(), median[index])
        return cells


@needs_torch
def test_onednn_and_pytorch_fill_one_cube(run_crossbench, tmp_path):
    cells = run_job(run_crossbench, tmp_path, networks="alexnet, googlenet", engines="onednn, pytorch",
                    phases="inference, training")
    assert len(cells) == 8
    for key, (status, message, median) in cells.items():
        assert status == "ok", (key, message)
        assert median > 0
    # Same synthetic weights and inputs: the loss in each ok cell's message agrees between engines.
    for network in ["alexnet", "googlenet"]:
        for phase in ["inference", "training"]:
            losses = {e: float(cells[(e, network, phase)][1].rsplit("loss ", 1)[1]) for e in ["onednn", "pytorch"]}
            assert losses["pytorch"] == pytest.approx(losses["onednn"], rel=1e-3), (network, phase, losses)


def broken(fault):
    return f"broken = /usr/bin/python3 -u {BROKEN} --fault {fault} --on-network googlenet"


@needs_torch
@pytest.mark.parametrize("fault,status,evidence", [
    ("crash", "failed", ["crashing on purpose", "exited with status 3"]),
    ("garbage", "failed", ["not JSON", "this is not a JSON reply"]),
    ("hang", "timeout", ["did not answer", "hanging on purpose"]),
])
def test_a_broken_worker_costs_one_cell(run_crossbench, tmp_path, fault, status, evidence):
    # googlenet costs more than alexnet, so the plan runs it first: the broken cell, then a good one.
    cells = run_job(run_crossbench, tmp_path, networks="alexnet, googlenet", engines="broken",
                    limit=8, workers=broken(fault))
    got_status, message, median = cells[("broken", "googlenet", "inference")]
    assert got_status == status, message
    for fragment in evidence:
        assert fragment in message, message
    assert np.isnan(median)
    after = cells[("broken", "alexnet", "inference")]
    assert after[0] == "ok", after[1]  # a fresh worker for the next cell on the same rank


@needs_torch
def test_protocol_mismatch_is_a_clear_error(run_crossbench, tmp_path):
    cells = run_job(run_crossbench, tmp_path, engines="broken", workers=broken("protocol"))
    status, message, _ = cells[("broken", "alexnet", "inference")]
    assert status == "failed"
    assert "speaks protocol 99" in message and "protocol 3" in message


def test_missing_interpreter_is_unsupported_with_advice(run_crossbench, tmp_path):
    cells = run_job(run_crossbench, tmp_path, engines="nowhere", workers="nowhere = /nonexistent/bin/python3 worker.py")
    status, message, _ = cells[("nowhere", "alexnet", "inference")]
    assert status == "unsupported"
    assert "/nonexistent/bin/python3" in message and "install" in message


def test_missing_module_is_unsupported_with_advice(run_crossbench, tmp_path):
    # -S: no site-packages, so `import torch` fails exactly as on a machine without PyTorch.
    worker = REPO / "src" / "workers" / "pytorch" / "worker.py"
    cells = run_job(run_crossbench, tmp_path, engines="bare", workers=f"bare = /usr/bin/python3 -S -u {worker}")
    status, message, _ = cells[("bare", "alexnet", "inference")]
    assert status == "unsupported"
    assert "PyTorch is not importable" in message and "python3-torch" in message


def test_worker_names_are_validated(run_crossbench, tmp_path):
    job = tmp_path / "job.ini"
    job.write_text(JOB.format(networks="alexnet", engines="tensorflow", batches="1", phases="inference",
                              limit=10, workers=""))
    result = run_crossbench("run", "--job", job, "--output", tmp_path / "o.h5")
    assert result.returncode == 2 and "'tensorflow'" in result.stderr and "pytorch" in result.stderr
    job.write_text(JOB.format(networks="alexnet", engines="onednn", batches="1", phases="inference",
                              limit=10, workers="onednn = /bin/true"))
    result = run_crossbench("run", "--job", job, "--output", tmp_path / "o.h5")
    assert result.returncode == 2 and "native engine" in result.stderr


def decisions_of(path):
    """{phase: decisions} of a one-network, one-engine cube (analysis package)."""
    sys.path.insert(0, str(REPO / "analysis"))
    from crossbench_analysis import cube_extras
    from crossbench_analysis.cube import CELL_DIMS, load

    cube = load(path)
    table = cube.cells.merge(cube_extras.decisions(cube), on=list(CELL_DIMS))
    return {row.phase: row.decisions for row in table.itertuples()}


@needs_torch
def test_a_worker_cells_preparation_is_split_in_its_decisions(run_crossbench, tmp_path):
    """Where a worker cell's untimed preparation_s went, told by both sides (issue 29 item 5: the framework
    cell's own cost): crossbench's wait for the process's hello and for `prepare`, the worker's model setup
    and, in its process's first cell alone, `import torch` and the device's first use."""
    run_job(run_crossbench, tmp_path, phases="inference, training",
            workers=f"pytorch = /usr/bin/python3 -u {{workers}}/pytorch/worker.py")
    fresh = decisions_of(tmp_path / "cube.h5")
    number = r"\d+\.\d\ds"
    for phase, text in fresh.items():  # a fresh worker per cell (the default)
        assert re.search(rf" setup={number}\(untimed: model, inputs\)", text), (phase, text)
        assert re.search(rf" startup=import {number} \+ device {number}\(untimed, in hello\)", text), (phase, text)
        assert re.search(rf" worker_start={number}\(new process: spawn to hello\) worker_prepare={number}$", text), text
        # The worker's whole prepare request, after its own tokens: at least its setup, at most crossbench's wait.
        seconds = {name: float(value) for name, value in re.findall(r" (setup|prepare|worker_prepare)=(\d+\.\d\d)s", text)}
        assert set(seconds) == {"setup", "prepare", "worker_prepare"}, text
        assert seconds["setup"] <= seconds["prepare"] + 0.01 and seconds["prepare"] <= seconds["worker_prepare"] + 0.01, text
        assert re.search(rf" prepare={number}\(untimed: the worker's whole prepare request\) worker_start=", text), text
    # One worker for both cells (engine.worker_per_cell = false): only the first it served started a process.
    job = tmp_path / "job.ini"
    job.write_text(job.read_text().replace("[measure]", "[engine]\nworker_per_cell = false\n\n[measure]"))
    shared = tmp_path / "shared.h5"
    result = run_crossbench("run", "--job", job, "--output", shared, "--quiet", timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    texts = list(decisions_of(shared).values())
    assert sum("(new process: spawn to hello)" in t for t in texts) == 1, texts
    assert sum(" startup=import " in t for t in texts) == 1, texts
    assert sum(re.search(rf" worker_start={number}\(running worker\) worker_prepare={number}$", t) is not None
               for t in texts) == 1, texts
