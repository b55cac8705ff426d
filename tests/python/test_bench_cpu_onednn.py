"""bench/cpu_onednn_vs_pytorch.py end to end on this machine's CPU: the oneDNN engine against PyTorch on the
same exported network, and --baseline-set (the same binary with other settings on the baseline side)."""
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "cpu_onednn_vs_pytorch.py"

pytest.importorskip("torch")
h5py = pytest.importorskip("h5py")


def run_script(build_dir, *arguments, timeout=300):
    environment = dict(os.environ, CROSSBENCH_BUILD_DIR=str(build_dir))
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, arguments)], capture_output=True, text=True,
                          timeout=timeout, env=environment)


def test_baseline_set_times_the_same_binary_unfused_beside_fused(crossbench_binary, tmp_path):
    keep = tmp_path / "keep"
    done = run_script(crossbench_binary.parent, "--networks", "alexnet", "--batches", "1", "--phases", "inference",
                      "--threads", "1", "--warmup", "1", "--min-steps", "3", "--max-steps", "3",
                      "--baseline-set", "engine.fuse=false", "--keep", keep)
    assert done.returncode == 0, done.stderr
    assert "before: " in done.stdout and "--set engine.fuse=false; after: " in done.stdout, done.stdout
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith("alexnet ")]
    assert len(rows) == 2, done.stdout  # one row in the PyTorch table, one in the before/after table
    before_ms, after_ms, ratio = float(rows[1][3]), float(rows[1][4]), float(rows[1][5])
    assert before_ms > 0 and after_ms > 0 and ratio == pytest.approx(after_ms / before_ms, abs=1e-3)
    # The two sides' cubes record what each ran: unfused (every group refused, saying why) and fused.
    with h5py.File(keep / "baseline_alexnet_1_inference.h5", "r") as cube:
        assert cube.attrs["engine_fuse"] in (b"false", "false")
        assert "--set engine.fuse=false" in str(cube.attrs["command_line"])
        decisions = cube["decisions"][()].ravel()[0]
        assert b"fusions=none;refused=conv_bias_relu[conv1+relu1](fusion turned off" in decisions
    with h5py.File(keep / "onednn_alexnet_1_inference.h5", "r") as cube:
        assert cube.attrs["engine_fuse"] in (b"true", "true")
        assert b"fusions=conv_bias_relu:5,fc_bias_relu:2" in cube["decisions"][()].ravel()[0]
    # Both sides and PyTorch computed the same loss on the same batch (the tables print 6 digits).
    unfused_loss, fused_loss, pytorch_loss = float(rows[1][-2]), float(rows[1][-1]), float(rows[0][-1])
    assert fused_loss == pytest.approx(unfused_loss, rel=1e-5) and fused_loss == pytest.approx(pytorch_loss, rel=1e-4)


def test_a_baseline_setting_without_a_value_is_refused_naming_it(crossbench_binary):
    done = run_script(crossbench_binary.parent, "--networks", "alexnet", "--batches", "1",
                      "--baseline-set", "engine.fuse", timeout=120)
    assert done.returncode != 0
    assert "--baseline-set 'engine.fuse': expected KEY=VALUE" in done.stderr, done.stderr
