"""bench/compare_cubes.py: the before/after table of two cubes (issue 14)."""

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "compare_cubes.py"
RESULTS = ROOT / "bench" / "results" / "h200-2026-11-30"
BEFORE, AFTER = RESULTS / "seed2017_after_graphs.h5", RESULTS / "seed2017_explicit_gemm.h5"

sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "analysis"))


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


@pytest.mark.skipif(not BEFORE.exists(), reason="the stored H200 cubes are not in this checkout")
def test_a_cube_against_itself_flags_nothing():
    done = run(BEFORE, BEFORE)
    assert done.returncode == 0, done.stderr
    assert "flagged (time beyond ±2%, memory growth or status change): 0" in done.stdout


@pytest.mark.skipif(not AFTER.exists(), reason="the stored H200 cubes are not in this checkout")
def test_every_cell_gets_ratio_memory_and_flags():
    import compare_cubes
    from crossbench_analysis.cube import load

    before, after = load(BEFORE), load(AFTER)
    rows = compare_cubes.table(before, after, 2.0)
    old = before.cells.set_index(["network", "precision", "phase"])
    new = after.cells.set_index(["network", "precision", "phase"])
    assert len(rows) == 42
    for r in rows.itertuples(index=False):
        key = (r.network, r.precision, r.phase)
        o, n = old.loc[key], new.loc[key]
        assert r.ratio == pytest.approx(n.median_ms / o.median_ms)
        grew = n.peak_memory_bytes > o.peak_memory_bytes
        moved = abs(n.median_ms / o.median_ms - 1) > 0.02
        assert ("memory +" in r.flag) == grew, key
        assert ("time " in r.flag) == moved, key
        if grew:
            assert f"memory +{int(n.peak_memory_bytes - o.peak_memory_bytes)} B" in r.flag
    done = run(BEFORE, AFTER, "--tolerance", "2%")
    assert done.returncode == 1
    flagged = sum(1 for r in rows.itertuples() if r.flag)
    assert f"flagged (time beyond ±2%, memory growth or status change): {flagged}" in done.stdout


def test_bad_input_is_exit_2(tmp_path):
    done = run(tmp_path / "missing.h5", tmp_path / "missing.h5")
    assert done.returncode == 2
    assert "compare_cubes:" in done.stderr
