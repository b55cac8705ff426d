"""bench/telemetry_ab.py: the telemetryab stage's table from its cubes (i<interval>_r<round>.h5)."""
import importlib.util
import os
import pathlib
import subprocess

import pytest

h5py = pytest.importorskip("h5py", reason="h5py is not importable by this Python")

REPO = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("telemetry_ab", REPO / "bench" / "telemetry_ab.py")
telemetry_ab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(telemetry_ab)


def test_the_cubes_are_grouped_by_interval_and_round():
    runs = telemetry_ab.runs_of(["/x/i10_r2.h5", "/x/i0_r1.h5", "/x/i10_r1.h5"])
    assert runs == {10: [(1, "/x/i10_r1.h5"), (2, "/x/i10_r2.h5")], 0: [(1, "/x/i0_r1.h5")]}
    with pytest.raises(SystemExit, match="not a telemetryab cube"):
        telemetry_ab.runs_of(["/x/seed.h5"])


def test_each_cell_is_compared_between_the_intervals(tmp_path):
    binary = pathlib.Path(os.environ.get("CROSSBENCH_BUILD_DIR", REPO / "build")) / "crossbench"
    if not binary.exists():
        pytest.skip(f"no crossbench binary at {binary}")
    for interval in (10, 0):
        subprocess.run([str(binary), "run", "--job", str(REPO / "jobs" / "seed2017.ini"), "--quiet",
                        "--set", "matrix.engines=onednn", "--set", "matrix.networks=alexnet",
                        "--set", "matrix.precisions=fp32", "--set", "matrix.phases=inference",
                        "--set", "matrix.batches=1", "--set", "measure.min_steps=3", "--set", "measure.warmup=1",
                        "--set", f"measure.telemetry_interval_ms={interval}",
                        "--output", str(tmp_path / f"i{interval}_r1.h5")], check=True, capture_output=True)
        with h5py.File(tmp_path / f"i{interval}_r1.h5", "r") as cube:
            value = cube.attrs["measure_telemetry_interval_ms"]
            assert (value.decode() if isinstance(value, bytes) else str(value)) == str(interval)
    table = telemetry_ab.medians(telemetry_ab.runs_of(sorted(str(p) for p in tmp_path.glob("i*_r1.h5"))), ["onednn"])
    (key, by_interval), = table.items()
    assert key == ("onednn", "alexnet", "fp32", "inference", 1)
    assert sorted(by_interval) == [0, 10] and all(len(v) == 1 and v[0] > 0 for v in by_interval.values())
