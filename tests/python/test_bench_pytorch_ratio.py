"""bench/pytorch_ratio.py on a real cube: a oneDNN run of AlexNet at batch 1
(both phases) against PyTorch times given as its JSON input; the ratios are
PyTorch ms over the cube's medians (read back with h5py), and cells missing
from the cube are an error that names them."""
import json
import math
import pathlib
import subprocess
import sys

import h5py
import pytest
from conftest import TINY_JOB

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "pytorch_ratio.py"

JOB = TINY_JOB.replace("engines = auto", "engines = onednn")  # the ratio is against oneDNN


@pytest.fixture(scope="module")
def cube(tmp_path_factory, crossbench_binary):
    directory = tmp_path_factory.mktemp("ratio")
    job = directory / "job.ini"
    job.write_text(JOB)
    output = directory / "cube.h5"
    subprocess.run([str(crossbench_binary), "run", "--job", str(job), "--output", str(output), "--quiet"],
                   check=True, timeout=300)
    return output


def medians(path):
    with h5py.File(path, "r") as f:
        phases = [p.decode() if isinstance(p, bytes) else p for p in f["phase"][()]]
        values = f["median_ms"][()]
        return {phase: float(values.reshape(-1, len(phases), values.shape[-2], values.shape[-1])[0, i, 0, 0])
                for i, phase in enumerate(phases)}


def run_script(*arguments):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, arguments)], capture_output=True, text=True,
                          timeout=60)


def pytorch_json(directory, rows):
    path = pathlib.Path(directory) / "pytorch.json"
    path.write_text(json.dumps(rows))
    return path


def test_ratios_are_pytorch_time_over_the_cube_median(cube, tmp_path):
    ours = medians(cube)
    assert set(ours) == {"inference", "training"} and all(v > 0 for v in ours.values())
    rows = [{"network": "alexnet", "precision": "fp32", "phase": phase, "batch": 1, "pytorch_ms": factor * ours[phase],
             "status": "ok"} for phase, factor in (("inference", 2.0), ("training", 0.5))]
    result = run_script("--pytorch", pytorch_json(tmp_path, rows), "--cube", cube, "--engine", "onednn",
                        "--baseline", cube)
    assert result.returncode == 0, result.stderr
    lines = {line.split("|")[3].strip(): line for line in result.stdout.splitlines()
             if line.startswith("| alexnet")}
    assert float(lines["inference"].split("|")[6]) == pytest.approx(2.0, abs=1e-3)
    assert float(lines["training"].split("|")[6]) == pytest.approx(0.5, abs=1e-3)
    assert f"over 2 cells: {math.sqrt(2.0 * 0.5):.3f}" in result.stdout
    assert "alexnet/fp32/training (0.500)" in result.stdout  # the slower cell is named
    assert "baseline: 1.000 over 2 cells" in result.stdout


def test_a_cell_missing_from_the_cube_is_an_error_naming_it(cube, tmp_path):
    rows = [{"network": "vgg11", "precision": "bf16", "phase": "training", "batch": 64, "pytorch_ms": 12.0}]
    result = run_script("--pytorch", pytorch_json(tmp_path, rows), "--cube", cube, "--engine", "onednn")
    assert result.returncode == 2
    assert "vgg11/bf16/training/64" in result.stderr


def test_an_engine_absent_from_the_cube_is_named(cube, tmp_path):
    result = run_script("--pytorch", pytorch_json(tmp_path, []), "--cube", cube)  # default engine cudnn
    assert result.returncode == 2
    assert "no 'cudnn' engine in the cube" in result.stderr and "onednn" in result.stderr
