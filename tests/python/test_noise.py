"""Noise you can see (issue 26): where two compared cells' CIs overlap the report says
"within noise" instead of ranking them, and cells that missed target_ci are listed."""
import pathlib
import subprocess
import sys

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "analysis"))
from crossbench_analysis.synthetic import ok_cell, write_cube  # noqa: E402

A = "NVIDIA A (100 SMs, sm_9.0, 80 GiB)"
B = "NVIDIA B (100 SMs, sm_9.0, 80 GiB)"


def cube(path, spread, b_factor):
    """Devices A and B, engines x and y, alexnet training at batch 64: B's steps take
    `b_factor` times A's, y's 1.01 times x's; every cell's samples are lognormal with
    sigma `spread` (40 steps)."""
    rng = np.random.default_rng(26)
    axes = {"device": [A, B], "engine": ["x", "y"], "network": ["alexnet"], "precision": ["fp32"],
            "batch": [64], "phase": ["training"], "replica": [0]}
    cells = []
    for device, factor in ((A, 1.0), (B, b_factor)):
        for engine, slower in (("x", 1.0), ("y", 1.01)):
            co = dict(device=device, engine=engine, network="alexnet", precision="fp32", batch=64,
                      phase="training", replica=0)
            samples = 10.0 * factor * slower * np.exp(rng.normal(0, spread, 40))
            cells.append(ok_cell(co, samples, 64, steps=40, rank=0))
    write_cube(path, axes, cells, attrs={"measure_target_ci": "0.01", "git_revision": "abc"})


def report(path, out):
    r = subprocess.run([str(REPO / "scripts" / "report"), "report", str(path), "-o", str(out)],
                       capture_output=True, text=True, timeout=600, cwd=REPO)
    assert r.returncode == 0, r.stdout + r.stderr
    return (out / "report.md").read_text()


def test_overlapping_cis_are_within_noise_not_ranked(tmp_path):
    cube(tmp_path / "noisy.h5", spread=0.5, b_factor=1.02)
    md = report(tmp_path / "noisy.h5", tmp_path / "noisy")
    assert "**within noise** of" in md          # the device ranking: 2% apart, CIs of tens of %
    assert "within noise of y (CIs overlap)" in md  # the headline's engine lead: 1% apart
    assert "missed `measure.target_ci` = 1%" in md


def test_separated_cis_are_ranked(tmp_path):
    cube(tmp_path / "quiet.h5", spread=0.001, b_factor=1.5)
    md = report(tmp_path / "quiet.h5", tmp_path / "quiet")
    assert "within noise" not in md
    assert "1.01× y" in md
    assert "missed `measure.target_ci`" not in md
