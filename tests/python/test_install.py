"""crossbench installs the way an HPC site expects (issue 27, README "For site
administrators"): `cmake --install` lays out PREFIX/bin and PREFIX/share/crossbench,
and the installed binary finds its jobs and workers relative to its own prefix,
wherever the prefix is moved, never through the source tree it was built from."""
import os
import shutil
import subprocess
from pathlib import Path

import h5py
import pytest

from conftest import BUILD, REPO


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@pytest.fixture(scope="module")
def prefix(tmp_path_factory, crossbench_binary):
    """crossbench installed into a temporary prefix, then moved elsewhere (a
    module tree is often built in one place and served from another)."""
    root = tmp_path_factory.mktemp("install")
    result = subprocess.run(["cmake", "--install", str(BUILD), "--prefix", str(root / "first")], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    moved = root / "apps" / "crossbench" / "0.1.0"
    moved.parent.mkdir(parents=True)
    shutil.move(str(root / "first"), moved)
    return moved


def test_install_layout(prefix):
    share = prefix / "share" / "crossbench"
    for path in ("bin/crossbench", "bin/crossbench-report"):
        assert os.access(prefix / path, os.X_OK), path
    for path in ("jobs/quick.ini", "jobs/seed2017.ini", "slurm/single-node.sbatch", "slurm/common.sh",
                 "workers/common/protocol.py", "workers/pytorch/worker.py", "workers/jax/worker.py",
                 "workers/jax/model.py",
                 "python/crossbench_analysis/cli.py", "python/crossbench_analysis/peaks.csv"):
        assert (share / path).is_file(), path
    assert not list(share.rglob("__pycache__"))


def run_installed(prefix, cwd, *arguments, timeout=600):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CROSSBENCH_BUILD_DIR")}
    return subprocess.run([str(prefix / "bin" / "crossbench"), *map(str, arguments)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_installed_binary_runs_quick_ini_from_its_prefix(prefix, tmp_path):
    # No --job, from a directory without jobs/: the default job is the prefix's quick.ini.
    result = run_installed(prefix, tmp_path, "run", "--filter", "alexnet/", "-o", tmp_path / "quick.h5")
    assert result.returncode == 0, result.stderr
    quick = prefix / "share" / "crossbench" / "jobs" / "quick.ini"
    with h5py.File(tmp_path / "quick.h5", "r") as f:
        assert _text(f.attrs["job_path"]) == str(quick)
        assert _text(f.attrs["job_file"]) == quick.read_text()
        statuses = f["status"][()].reshape(-1)
    assert (statuses == 1).sum() == 4   # alexnet, batches 1 and 2, both phases: ok
    # The next: hint names the installed analysis command, and it works without PYTHONPATH.
    assert f"next: {prefix / 'bin' / 'crossbench-report'} report {tmp_path / 'quick.h5'}" in result.stderr
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    info = subprocess.run([str(prefix / "bin" / "crossbench-report"), "info", str(tmp_path / "quick.h5")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert info.returncode == 0 and "alexnet" in info.stdout, info.stderr
    # jobs/NAME.ini from any directory: the prefix's job of that name.
    plan = run_installed(prefix, tmp_path, "plan", "--job", "jobs/seed2017.ini", "--ranks", "2")
    assert plan.returncode == 0 and "resnet152" in plan.stdout, plan.stderr


def test_installed_binary_runs_the_prefix_workers_not_the_source_trees(prefix, tmp_path):
    job = tmp_path / "worker.ini"
    job.write_text("[matrix]\nnetworks = alexnet\nengines = pytorch\nprecisions = fp32\nbatches = 1\n"
                   "phases = inference\n[measure]\nwarmup = 0\nmin_steps = 2\nmax_steps = 2\n")
    result = run_installed(prefix, tmp_path, "run", "--job", job, "-o", tmp_path / "a.h5", "--quiet")
    assert result.returncode == 0, result.stderr
    with h5py.File(tmp_path / "a.h5", "r") as f:
        assert f["status"][()].reshape(-1)[0] == 1, _text(f["message"][()].reshape(-1)[0])
    # Without the prefix's worker the cell fails: nothing falls back to the source tree.
    worker = prefix / "share" / "crossbench" / "workers" / "pytorch" / "worker.py"
    saved = worker.read_text()
    worker.unlink()
    try:
        result = run_installed(prefix, tmp_path, "run", "--job", job, "-o", tmp_path / "b.h5", "--quiet")
    finally:
        worker.write_text(saved)
    assert result.returncode == 0, result.stderr
    with h5py.File(tmp_path / "b.h5", "r") as f:
        assert f["status"][()].reshape(-1)[0] != 1
        message = _text(f["message"][()].reshape(-1)[0])
    assert str(worker) in message or "worker.py" in message, message
    assert str(REPO) not in message
