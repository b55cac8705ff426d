"""GPU faults injected and survived (issue 28), on a real GPU; skipped here
without one. The lead runs them on the H200 with:

    CROSSBENCH_BUILD_DIR=$PWD/build PYTHONPATH=analysis /usr/bin/python3 -m pytest -q tests/faults/test_gpu_faults.py

The faults come from the test-only hook of the cuDNN engine
(src/engines/cudnn/fault_injection.hpp, CROSSBENCH_GPU_FAULT), which every
cell it applies to names in its decisions. In each case the cell gets its
typed status with a message naming the fault, the rest of the rank's cells
are not_run (sticky error) or run normally (OOM, a worker's death), the cube
is written, --resume finishes the job, and no process or GPU memory is left.
"""
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from helpers import children, cube_cells, journal_of, journal_results, wait_until


def gpu_pids():
    """The pids holding GPU memory now (nvidia-smi), as ints."""
    listed = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                            capture_output=True, text=True, timeout=60)
    return {int(line) for line in listed.stdout.split() if line.strip().isdigit()}


@pytest.fixture(scope="module")
def gpu(binary):
    if shutil.which("nvidia-smi") is None:
        pytest.skip("no GPU here (nvidia-smi not found): the lead runs these on the H200")
    listed = subprocess.run([str(binary), "list", "devices", "--json"], capture_output=True, text=True, timeout=120)
    devices = json.loads(listed.stdout) if listed.returncode == 0 else []
    devices = devices if isinstance(devices, list) else [devices]
    if not any(device.get("kind") == "gpu" for device in devices):
        pytest.skip("crossbench sees no GPU")
    return True


def cudnn_job(write_job, **settings):
    values = dict(engines="cudnn", networks="alexnet", batches="1, 2, 3", phases="inference", min_steps=20,
                  max_steps=20, cell_time_limit_s=120)
    values.update(settings)
    return write_job(**values)


def run(binary, job, output, environment=None, extra=()):
    process = subprocess.Popen([str(binary), "run", "--job", job, "--output", output, "--quiet", *extra],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=dict(os.environ, **(environment or {})))
    stdout, stderr = process.communicate(timeout=900)
    assert process.pid not in gpu_pids(), "the run's process still holds GPU memory after it ended"
    return process.returncode, stdout + stderr


def cells_by_batch(output):
    statuses = {}
    for result in journal_results(output):
        statuses[result["batch"]] = (result["status"], result["message"], result["decisions"])
    return statuses


def test_a_sticky_error_fails_its_cell_and_the_rest_are_not_run(tmp_path, gpu, binary, write_job):
    job = cudnn_job(write_job)
    output = tmp_path / "trap.h5"
    code, text = run(binary, job, output, {"CROSSBENCH_GPU_FAULT": "trap:/b2/:5"})
    cells, state = cube_cells(output)
    statuses = [status for status, _ in cells]
    # The plan runs the largest batch first: b3, then b2 (the trap), then b1, not run.
    assert "not_run" in statuses, cells
    assert code == 3 and state.startswith("incomplete"), (code, state, text)  # resume me
    messages = {status: message for status, message in cells}
    assert statuses.count("failed") == 1, cells
    assert "injected fault (CROSSBENCH_GPU_FAULT=trap:/b2/:5)" in messages["failed"], messages["failed"]
    after = [status for status in statuses if status not in ("failed", "ok")]
    assert set(after) <= {"not_run"}, cells
    if "not_run" in statuses:
        assert "sticky CUDA error" in messages["not_run"], messages["not_run"]
    resumed_code, resumed_text = run(binary, job, output, extra=["--resume"])
    assert resumed_code == 0, resumed_text
    cells, state = cube_cells(output)
    assert state == "complete", state
    assert sorted(status for status, _ in cells) == ["failed", "ok", "ok"], cells


def test_an_oom_in_the_workspace_is_oom_and_the_rest_run(tmp_path, gpu, binary, write_job):
    job = cudnn_job(write_job)
    output = tmp_path / "oom.h5"
    code, text = run(binary, job, output, {"CROSSBENCH_GPU_FAULT": "oom:/b2/"})
    assert code == 0, text
    statuses = cells_by_batch(output)
    assert statuses[2][0] == "oom" and "injected fault (CROSSBENCH_GPU_FAULT=oom:/b2/)" in statuses[2][1], statuses
    assert statuses[1][0] == "ok" and statuses[3][0] == "ok", statuses
    assert cube_cells(output)[1] == "complete"
    resumed_code, resumed_text = run(binary, job, output, extra=["--resume"])
    assert resumed_code == 0, resumed_text


def test_a_worker_killed_holding_gpu_memory_costs_one_cell(tmp_path, gpu, binary, write_job):
    if importlib.util.find_spec("torch") is None:
        pytest.skip("PyTorch is not installed: no framework worker to kill")
    job = write_job(engines="pytorch", networks="alexnet", batches="16, 32", phases="training", min_steps=1000000,
                    max_steps=1000000, target_ci=1e-9, cell_time_limit_s=60,
                    # The python running this test has torch; the default worker command's
                    # /usr/bin/python3 may not (the H200 image's torch is in a venv).
                    extra=f"[workers]\npytorch = {sys.executable} -u {{workers}}/pytorch/worker.py")
    output = tmp_path / "killed_worker.h5"
    process = subprocess.Popen([str(binary), "run", "--job", job, "--output", output, "--quiet"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The worker of the first cell, once it holds GPU memory.
        def worker_on_gpu():
            return [pid for pid in children(process.pid) if pid in gpu_pids()]
        wait_until(lambda: worker_on_gpu(), process, timeout=300, what="a worker holding GPU memory")
        victim = worker_on_gpu()[0]
        os.kill(victim, signal.SIGKILL)
        stdout, stderr = process.communicate(timeout=600)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stdout + stderr
    results = journal_results(output)
    statuses = sorted(result["status"] for result in results)
    killed = [result for result in results if result["status"] == "failed"]
    assert statuses in (["failed", "timeout"], ["failed", "ok"]), results
    assert killed and "killed by signal 9" in killed[0]["message"], killed
    assert not any("GPU memory not given back" in result["message"] for result in results), results
    assert victim not in gpu_pids()


def test_memory_holds_flat_over_a_seed2017_run(tmp_path, gpu, binary):
    # Every cell of the cuDNN row of seed2017 (7 networks, inference and
    # training, batch 64), few steps: the Runner fails any cell after which
    # the rank's GPU memory is more than 256 MiB above its level before it.
    output = tmp_path / "seed2017.h5"
    repository = pathlib_repo()
    code, text = run(binary, repository / "jobs" / "seed2017.ini", output,
                     extra=["--set", "matrix.engines=cudnn", "--set", "measure.min_steps=10", "--set",
                            "measure.max_steps=10", "--set", "measure.warmup=2"])
    assert code == 0, text
    results = journal_results(output)
    assert len(results) == 14, results
    leaks = [(result["network"], result["phase"], result["message"]) for result in results
             if "GPU memory not given back" in result["message"]]
    assert not leaks, leaks
    assert all(result["status"] in ("ok", "oom") for result in results), [(r["network"], r["status"], r["message"])
                                                                        for r in results]


def pathlib_repo():
    from conftest import REPO
    return REPO
