"""The analysis package's synthetic cube writer computes a cell's statistics as the Runner does:
held, value by value, to the statistics that the C++ summarize() (src/core/statistics.cpp)
stored in a cube written by the C++ writer's sample program (tests/cube/write_sample_cube.cpp)."""
import glob
import math
import os
import pathlib
import subprocess

import h5py
import numpy as np
import pytest

from crossbench_analysis.synthetic import _stats, median_ci_indices

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("CROSSBENCH_BUILD_DIR", REPO / "build"))
STATISTICS = ("median_ms", "mean_ms", "std_ms", "min_ms", "max_ms", "p05_ms", "p95_ms", "ci_low_ms", "ci_high_ms")


def test_median_ci_positions_are_the_runners_order_statistics():
    # 1-based ranks floor(n/2 - 1.96 sqrt(n)/2) and ceil(n/2 + 1.96 sqrt(n)/2) + 1, clamped to 1..n,
    # returned 0-based: n = 100 gives ranks 40 and 61.
    assert median_ci_indices(2) == (0, 1)
    assert median_ci_indices(10) == (0, 9)
    assert median_ci_indices(100) == (39, 60)
    assert median_ci_indices(1000) == (468, 531)


def test_the_stats_of_one_sample_have_no_interval():
    stats = _stats(np.array([2.5]))
    assert stats["median_ms"] == 2.5 and math.isnan(stats["ci_low_ms"]) and math.isnan(stats["std_ms"])


def test_synthetic_statistics_equal_the_cpp_runners():
    hits = sorted(glob.glob(str(BUILD / "**" / "write_sample_cube"), recursive=True))
    if not hits:
        pytest.skip(f"write_sample_cube (tests/cube) is not built under {BUILD}")
    cube = BUILD / "synthetic_statistics_cube.h5"
    result = subprocess.run([hits[0], str(cube)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    compared = 0
    with h5py.File(cube, "r") as f:
        ok = h5py.check_enum_dtype(f["status"].dtype)["ok"]
        status = f["status"][...]
        samples = f["samples_ms"][...]
        stored = {name: f[name][...] for name in STATISTICS}
    for index in zip(*np.nonzero(status == ok)):
        cell = samples[index]
        cell = cell[~np.isnan(cell)]
        mine = _stats(cell)
        for name in STATISTICS:
            assert mine[name] == pytest.approx(float(stored[name][index]), rel=1e-12, nan_ok=True), (index, name)
        compared += 1
    assert compared >= 2, "the sample cube has ok cells with samples"


def test_amp_precisions_are_ordered_and_take_their_16_bit_peak():
    from crossbench_analysis.analysis import PRECISION_ORDER
    from crossbench_analysis.peaks import PeakTable

    assert PRECISION_ORDER == ("fp32", "tf32", "fp16", "bf16", "amp-fp16", "amp-bf16")
    table = PeakTable.read()
    key = "NVIDIA H200 (132 SMs, sm_9.0, 140.0 GiB)"
    assert table.peak(key, "amp-bf16").tflops == table.peak(key, "bf16").tflops is not None
    assert table.peak(key, "amp-fp16").tflops == table.peak(key, "fp16").tflops
