"""`crossbench plan --calibrate CUBE.h5`: a planned cell that an earlier run recorded `ok` on the
same device key takes that run's wall seconds (its start to its end); the other cells of
its engine and device key take the cost model scaled by the matched cells; nothing matched, the
model as it is. Every cell says which. All on the CPU with a real onednn run."""
import datetime
import json
import math

import h5py
import pytest

JOB = """
[matrix]
networks = alexnet
engines = onednn
precisions = fp32
batches = 1, 2
phases = inference

[measure]
warmup = 1
min_steps = 3
max_steps = 3
cell_time_limit_s = 60
"""


@pytest.fixture
def recorded(run_crossbench, tmp_path):
    """A cube of one real cell (alexnet batch 1), and its recorded wall seconds."""
    job = tmp_path / "job.ini"
    job.write_text(JOB)
    cube = tmp_path / "earlier.h5"
    result = run_crossbench("run", "--job", job, "--output", cube, "--quiet", "--filter", "/b1/")
    assert result.returncode == 0, result.stderr
    with h5py.File(cube, "r") as f:
        at = (0, 0, 0, 0, 0, 0, 0, 0)
        names = {v: k for k, v in h5py.check_enum_dtype(f["status"].dtype).items()}
        if names[f["status"][at]] != "ok":
            pytest.skip(f"onednn did not run here: {f['message'][at].decode()}")
        utc = lambda name: datetime.datetime.fromisoformat(f[name][at].decode().replace("Z", "+00:00"))  # noqa: E731
        seconds = (utc("finished_utc") - utc("started_utc")).total_seconds()
        search = float(f["search_s"][at])
        parts = float(f["preparation_s"][at]) + (search if math.isfinite(search) else 0) + float(f["timed_s"][at])
    assert seconds >= parts  # the wall holds the parts, and the warm-up, check and end besides
    return job, cube, seconds


def test_calibrate_uses_the_recorded_seconds_and_scales_the_rest(run_crossbench, recorded):
    job, cube, seconds = recorded
    result = run_crossbench("plan", "--job", job, "--ranks", "1", "--json", "--calibrate", cube)
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    cells = {cell["name"]: cell for cell in plan["cells"]}
    b1, b2 = cells["onednn/alexnet/fp32/b1/inference/r0"], cells["onednn/alexnet/fp32/b2/inference/r0"]
    assert b1["estimate_source"] == "recorded"
    assert b1["estimated_s"] == pytest.approx(seconds, rel=1e-9)
    [fit] = plan["calibration"]["fits"]
    assert fit["engine"] == "onednn" and fit["matched_cells"] == 1
    model_total = lambda cell: sum(cell["model"].values())  # noqa: E731
    assert fit["factor"] == pytest.approx(seconds / model_total(b1))
    # b2 is the same engine, network and phase at another batch: b1's recorded preparation + the
    # model's steps scaled as b1's timed steps were (a framework's compile is most of its preparation).
    with h5py.File(cube, "r") as f:
        timed = float(f["timed_s"][(0, 0, 0, 0, 0, 0, 0, 0)])
    assert fit["steps_factor"] == pytest.approx(timed / b1["model"]["steps_s"])
    assert fit["recorded_preparations"] == 1
    assert b2["estimate_source"] == "recorded preparation"
    assert b2["estimated_s"] == pytest.approx(min(seconds - timed + b2["model"]["steps_s"] * fit["steps_factor"], 60))
    assert plan["calibration"]["cubes"] == [str(cube)]
    assert plan["total_s"] == pytest.approx(b1["estimated_s"] + b2["estimated_s"])
    # The text output says the same per cell, and what was calibrated from what.
    text = run_crossbench("plan", "--job", job, "--ranks", "1", "--calibrate", cube).stdout
    assert "recorded" in text and "scaled model" in text and f"calibrated from {cube}" in text
    assert "onednn on " in text and "1 recorded cell(s)" in text and "1 from a recorded preparation" in text
    assert "recorded preparation  [model: preparation" in text


def test_without_a_match_the_model_stands_and_says_so(run_crossbench, recorded):
    job, cube, _ = recorded
    # Another device key (a tag): no recorded cell matches.
    result = run_crossbench("plan", "--job", job, "--ranks", "1", "--json", "--device-tag", "site=elsewhere",
                            "--calibrate", cube)
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert {cell["estimate_source"] for cell in plan["cells"]} == {"model"}
    [fit] = plan["calibration"]["fits"]
    assert fit["matched_cells"] == 0 and fit["factor"] is None
    text = run_crossbench("plan", "--job", job, "--ranks", "1", "--device-tag", "site=elsewhere",
                          "--calibrate", cube).stdout
    assert "no recorded cell matched; the model as it is" in text


def test_the_model_states_preparation_and_search(run_crossbench, tmp_path):
    job = tmp_path / "job.ini"
    job.write_text(JOB)
    plan = json.loads(run_crossbench("plan", "--job", job, "--ranks", "1", "--json").stdout)
    assert "calibration" not in plan
    for cell in plan["cells"]:
        assert cell["estimate_source"] == "model"
        assert set(cell["model"]) == {"preparation_s", "search_s", "steps_s", "finish_s", "cold_compile_s"}
        assert cell["model"]["preparation_s"] > 0 and cell["model"]["finish_s"] > 0
        assert cell["estimated_s"] == pytest.approx(
            sum(cell["model"][k] for k in ("preparation_s", "search_s", "steps_s", "finish_s")))
    text = run_crossbench("plan", "--job", job, "--ranks", "1").stdout
    assert "estimates: model = preparation + search" in text


@pytest.mark.parametrize("make_bad, fragment", [
    (lambda d: d / "missing.h5", "does not exist"),
    (lambda d: (d / "notes.h5").write_text("not a cube") and d / "notes.h5", "not a crossbench cube"),
])
def test_a_missing_or_unreadable_cube_exits_2_naming_it(run_crossbench, tmp_path, make_bad, fragment):
    job = tmp_path / "job.ini"
    job.write_text(JOB)
    bad = make_bad(tmp_path)
    result = run_crossbench("plan", "--job", job, "--ranks", "1", "--calibrate", bad)
    assert result.returncode == 2, result.stderr
    assert f"--calibrate '{bad}'" in result.stderr and fragment in result.stderr, result.stderr
    assert result.stdout == ""


def test_an_empty_entry_is_refused(run_crossbench, tmp_path):
    job = tmp_path / "job.ini"
    job.write_text(JOB)
    result = run_crossbench("plan", "--job", job, "--ranks", "1", "--calibrate", "a.h5,,b.h5")
    assert result.returncode == 2 and "empty entry" in result.stderr, result.stderr
