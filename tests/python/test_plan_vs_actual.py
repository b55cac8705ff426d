"""bench/plan_vs_actual.py: `crossbench plan --json` against the wall times a cube recorded (issue 29
item 5), on this machine's CPU: the same tiny job planned and run."""
import json
import pathlib
import subprocess
import sys

import pytest

h5py = pytest.importorskip("h5py")
np = pytest.importorskip("numpy")

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import plan_vs_actual  # noqa: E402
from conftest import TINY_JOB  # noqa: E402


def test_every_planned_cell_the_run_finished_is_compared_with_its_wall_time(run_crossbench, tmp_path):
    job = tmp_path / "job.ini"
    job.write_text(TINY_JOB)
    planned = run_crossbench("plan", "--job", job, "--json")
    assert planned.returncode == 0, planned.stderr
    plan_path = tmp_path / "plan.json"
    plan_path.write_text(planned.stdout)
    done = run_crossbench("run", "--job", job, "--output", tmp_path / "c.h5")
    assert done.returncode == 0, done.stderr
    rows, missing = plan_vs_actual.compare(json.loads(planned.stdout), [tmp_path / "c.h5"])
    assert sorted(r["name"] for r in rows) == sorted(c["name"] for c in json.loads(planned.stdout)["cells"])
    assert missing == []
    with h5py.File(tmp_path / "c.h5", "r") as cube:
        timed = float(np.nansum(cube["timed_s"][()]))  # [s] over the two cells
    for row in rows:
        assert row["status"] == "ok" and row["compile"] == ""  # a native engine: no compile cache
        assert row["predicted_s"] > 0 and row["actual_s"] > 0
        assert row["ratio"] == pytest.approx(row["actual_s"] / row["predicted_s"])
        assert row["within"] == (abs(row["ratio"] - 1) <= 0.25)
    # A cell's wall time holds its timed steps, and more (preparation, warm-up, the check).
    assert sum(r["actual_s"] for r in rows) >= timed
    out = subprocess.run([sys.executable, str(REPO / "bench" / "plan_vs_actual.py"), str(plan_path),
                          str(tmp_path / "c.h5"), "--markdown", str(tmp_path / "t.md")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "| all | 2 |" in out.stdout and (tmp_path / "t.md").read_text() == out.stdout
    assert "2 planned cells compared; 0 planned cells in no cube." in out.stdout


def test_a_file_that_is_not_a_plan_is_refused_by_name(tmp_path):
    bad = tmp_path / "plan.json"
    bad.write_text('{"devices": []}')
    out = subprocess.run([sys.executable, str(REPO / "bench" / "plan_vs_actual.py"), str(bad), str(tmp_path / "x.h5")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "has no 'cells'" in out.stderr


def test_the_compile_state_is_read_from_the_decisions():
    assert plan_vs_actual.compile_state("x compile_cache=/a/b (warm: 3 entries before) y") == "warm"
    assert plan_vs_actual.compile_state("compile_cache=/a (cold: empty before, 412 entries after)") == "cold"
    assert plan_vs_actual.compile_state("recipe=pure-bf16 layout=nhwc") == ""


def test_the_compile_found_is_read_from_the_hit_counts():
    found = plan_vs_actual.compile_found
    assert found("compile_cache=/c (warm: 9 entries before, 9 after; fx_graph_cache hits=2 misses=0; "
                 "aot_autograd_cache hits=1 misses=0)") == "hit"
    assert found("compile_cache=/c (warm: 9 entries before; fx_graph_cache hits=1 misses=1)") == "miss"
    assert found("compile_cache=/c (warm: 286 entries before; persistent cache hits=1 of 2 compiles)") == "miss"
    assert found("compile_cache=/c (warm: 286 entries before; persistent cache hits=2 of 2 compiles)") == "hit"
    assert found("compile_cache=/c (cold: empty before; persistent cache hits=0 of 0 compiles)") == "miss"
    assert found("recipe=pure-bf16 layout=nhwc") == ""


def test_the_estimate_as_found_moves_only_the_compile():
    cold = {"estimated_s": 70.0, "search_kind": "torch.compile (cold)",
            "model": {"preparation_s": 8.0, "search_s": 60.0, "steps_s": 2.0}}
    assert plan_vs_actual.as_found(cold, "miss") == 70.0
    assert plan_vs_actual.as_found(cold, "hit") == pytest.approx(8 + 15 + 2)
    assert plan_vs_actual.as_found(cold, "") == 70.0
    # A planned-warm cell of a plan that does not say its cold compile (before 2026-12-03): the cold one is
    # 4x the warm one; a hit costs at least the 4.5 s floor; a scaled estimate scales the difference too.
    warm = {"estimated_s": 35.0, "search_kind": "jax.jit (warm cache)",
            "model": {"preparation_s": 3.0, "search_s": 3.0, "steps_s": 1.0}}
    assert plan_vs_actual.as_found(warm, "hit") == pytest.approx(35.0 + (4.5 - 3.0) * 5.0)
    assert plan_vs_actual.as_found(warm, "miss") == pytest.approx(35.0 + (12.0 - 3.0) * 5.0)
    # A plan that says it (cold_compile_s): a hit is what the plan said, a miss the cold compile.
    said = {"estimated_s": 60.0, "search_kind": "torch.compile (warm cache)",
            "model": {"preparation_s": 9.0, "search_s": 10.0, "steps_s": 1.0, "cold_compile_s": 40.0}}
    assert plan_vs_actual.as_found(said, "hit") == pytest.approx(60.0)
    assert plan_vs_actual.as_found(said, "miss") == pytest.approx(60.0 + (40.0 - 10.0) * 3.0)
    assert plan_vs_actual.warm_compile_seconds(8.0) == 4.5 and plan_vs_actual.warm_compile_seconds(2.0) == 2.0
    # A native engine's search is no compile: unchanged.
    native = {"estimated_s": 20.0, "search_kind": "exhaustive search", "model": {"search_s": 19.0}}
    assert plan_vs_actual.as_found(native, "hit") == 20.0
    # A later batch of a torch.compile series (plans from 2026-12-04 on): the plan expected another batch's
    # kernels in the cache; a miss is that estimate, a hit the warm compile of the cold one.
    series = {"estimated_s": 40.0, "search_kind": "torch.compile (another batch cached)",
              "model": {"preparation_s": 9.0, "search_s": 30.0, "steps_s": 1.0, "cold_compile_s": 50.0}}
    assert plan_vs_actual.as_found(series, "miss") == pytest.approx(40.0)
    assert plan_vs_actual.as_found(series, "hit") == pytest.approx(9.0 + 12.5 + 1.0)
    assert plan_vs_actual.as_found(series, "") == 40.0


def test_held_out_leaves_out_recorded_estimates(tmp_path, run_crossbench):
    job = tmp_path / "job.ini"
    job.write_text(TINY_JOB)
    done = run_crossbench("run", "--job", job, "--output", tmp_path / "c.h5")
    assert done.returncode == 0, done.stderr
    planned = run_crossbench("plan", "--job", job, "--calibrate", tmp_path / "c.h5", "--json")
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    assert {c["estimate_source"] for c in plan["cells"]} == {"recorded"}
    rows, _ = plan_vs_actual.compare(plan, [tmp_path / "c.h5"])
    assert len(rows) == 2
    rows, missing = plan_vs_actual.compare(plan, [tmp_path / "c.h5"], held_out=True)
    assert rows == [] and missing == []
