"""Provenance, per-cell wall times, machine-readable output and merging cubes
of separate runs (issue 16), all on the CPU: every field is checked against
what this machine says about itself."""
import csv
import datetime
import json
import os
import pathlib
import platform
import re
import subprocess

import h5py
import numpy as np
import pytest

from crossbench_analysis import cube as cube_module
from conftest import TINY_JOB, as_text as text

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, crossbench_binary):
    """Two separate runs of the same job, as two loaner systems would be tested: different device tags."""
    tmp = tmp_path_factory.mktemp("runs")
    job = tmp / "job.ini"
    job.write_text(TINY_JOB)
    outputs = []
    for tag in ("power=300W", "power=700W"):
        output = tmp / f"{tag.replace('=', '')}.h5"
        jsonl = tmp / f"{tag.replace('=', '')}.jsonl"
        result = subprocess.run([str(crossbench_binary), "run", "--job", str(job), "--output", str(output),
                                 "--jsonl", str(jsonl)],
                                capture_output=True, text=True, timeout=300,
                                env=dict(os.environ, CROSSBENCH_DEVICE_TAG=tag))
        assert result.returncode == 0, result.stderr + result.stdout
        outputs.append((output, jsonl, result))
    return tmp, outputs


def test_cube_holds_the_system_description(two_runs):
    _, [(cube_path, _, _), _] = two_runs
    with h5py.File(cube_path, "r") as f:
        assert text(f.attrs["schema"]) == "crossbench-cube/4"
        ranks = f["ranks"]
        cpu_model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
        assert text(ranks["cpu_model"][0]) == cpu_model
        os_release = dict(line.rstrip("\n").split("=", 1) for line in open("/etc/os-release") if "=" in line)
        assert text(ranks["os"][0]) == os_release["PRETTY_NAME"].strip('"')
        uname = platform.uname()
        assert text(ranks["kernel"][0]) == f"{uname.system} {uname.release} {uname.machine}"
        expected_container = "docker" if os.path.exists("/.dockerenv") else None
        if expected_container and not os.environ.get("CROSSBENCH_CONTAINER_IMAGE"):
            assert text(ranks["container"][0]) == expected_container
        for column in ("application_sm_clock_mhz", "application_memory_clock_mhz", "clock_policy", "ecc"):
            assert column in ranks  # GPU facts: empty / 0 on a CPU rank
        assert text(ranks["device_key"][0]).endswith("[power=300W]")
        # The git revision stamped at build time: this checkout's commit, -dirty when it differs.
        revision = text(f.attrs["git_revision"])
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
        assert re.fullmatch(r"[0-9a-f]{12}(-dirty)?", revision), revision
        if head:
            assert revision.split("-")[0] == head or revision.endswith("-dirty"), (revision, head)
        # Every recorded setting, under its schema name.
        assert text(f.attrs["measure_warmup_steps"]) == "1"
        assert text(f.attrs["measure_target_ci"]) == "0.5"
        assert text(f.attrs["engine_algorithm_policy"]) == "heuristic"
        assert text(f.attrs["device_tag"]) == "power=300W"


def test_every_cell_has_wall_times(two_runs):
    _, [(cube_path, _, _), _] = two_runs
    cube = cube_module.load(cube_path)
    measured = cube.measured
    assert len(measured) == 2
    for _, cell in measured.iterrows():
        start = datetime.datetime.strptime(cell["started_utc"], "%Y-%m-%dT%H:%M:%S.%fZ")
        end = datetime.datetime.strptime(cell["finished_utc"], "%Y-%m-%dT%H:%M:%S.%fZ")
        assert start <= end
        assert cell["preparation_s"] >= 0 and cell["timed_s"] > 0
        assert cell["preparation_s"] + cell["timed_s"] <= (end - start).total_seconds() + 0.01
        assert np.isnan(cell["search_s"])  # onednn does no measured search
    assert cube.missing_vars == []


def test_jsonl_has_one_record_per_cell_with_provenance(two_runs):
    _, [(cube_path, jsonl, _), _] = two_runs
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert sorted(r["phase"] for r in records) == ["inference", "training"]
    cube = cube_module.load(cube_path)
    for record in records:
        assert record["status"] == "ok" and record["device_key"].endswith("[power=300W]")
        provenance = record["provenance"]
        assert provenance["git_revision"] == cube.attrs["git_revision"]
        assert provenance["settings"]["measure.warmup"] == "1"
        assert provenance["device"]["os"] == cube.ranks["os"][0]
        row = cube.measured[cube.measured["phase"] == record["phase"]].iloc[0]
        assert record["median_ms"] == pytest.approx(row["median_ms"], rel=1e-12)
        assert record["started_utc"] == row["started_utc"]


def test_merge_of_separate_runs_reports_on_both_devices(two_runs, crossbench_binary, tmp_path):
    tmp, [(a, _, _), (b, _, _)] = two_runs
    merged = tmp_path / "all.h5"
    result = subprocess.run([str(crossbench_binary), "merge", str(a), str(b), "-o", str(merged)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"next: scripts/report report {merged}" in result.stderr
    cube = cube_module.load(merged)
    assert len(cube.devices) == 2 and {d.split("[")[-1] for d in cube.devices} == {"power=300W]", "power=700W]"}
    assert len(cube.measured) == 4
    assert [s["attrs"]["path"] for s in cube.sources] == [str(a), str(b)]
    assert [s["attrs"]["device_tag"] for s in cube.sources] == ["power=300W", "power=700W"]
    assert all(len(s["ranks"]) == 1 for s in cube.sources)
    for source, original in zip(cube.sources, (a, b)):
        assert source["attrs"]["created"] == cube_module.load(original).attrs["created"]
    # Each cell's numbers are those of its own run.
    for path in (a, b):
        one = cube_module.load(path).measured
        for _, row in one.iterrows():
            same = cube.measured[(cube.measured["device"] == row["device"]) & (cube.measured["phase"] == row["phase"])]
            assert same.iloc[0]["median_ms"] == row["median_ms"]

    env = dict(os.environ, PYTHONPATH=str(REPO / "analysis"))
    analysis = ["/usr/bin/python3", "-m", "crossbench_analysis"]
    report = subprocess.run([*analysis, "report", str(merged), "-o", str(tmp_path / "report")],
                            capture_output=True, text=True, env=env, timeout=300)
    assert report.returncode == 0, report.stdout + report.stderr
    text_of_report = (tmp_path / "report" / "report.md").read_text()
    assert "power=300W" in text_of_report and "power=700W" in text_of_report
    prices = tmp_path / "prices.csv"
    with prices.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["device", "price"])
        for price, device in zip((1000, 2000), cube.devices):
            writer.writerow([device, price])
    procurement = subprocess.run([*analysis, "procurement", str(merged), "--prices", str(prices),
                                  "-o", str(tmp_path / "procurement")], capture_output=True, text=True, env=env, timeout=300)
    assert procurement.returncode == 0, procurement.stdout + procurement.stderr
    compare = subprocess.run([*analysis, "compare", str(merged), str(merged)], capture_output=True, text=True,
                             env=env, timeout=300)
    assert compare.returncode == 0, compare.stdout + compare.stderr


def test_merge_refuses_a_cell_held_twice_unless_told(two_runs, crossbench_binary, tmp_path):
    _, [(a, _, _), _] = two_runs
    merged = tmp_path / "twice.h5"
    refused = subprocess.run([str(crossbench_binary), "merge", str(a), str(a), "-o", str(merged)],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--prefer" in refused.stderr and not merged.exists()
    accepted = subprocess.run([str(crossbench_binary), "merge", str(a), str(a), "-o", str(merged), "--prefer", "last"],
                              capture_output=True, text=True, timeout=60)
    assert accepted.returncode == 0, accepted.stderr
    assert len(cube_module.load(merged).measured) == 2


def test_merge_checks_the_schema(two_runs, crossbench_binary, tmp_path):
    _, [(a, _, _), _] = two_runs
    unknown = tmp_path / "future.h5"
    unknown.write_bytes(a.read_bytes())
    with h5py.File(unknown, "r+") as f:
        del f.attrs["schema"]
        f.attrs["schema"] = "crossbench-cube/99"
    result = subprocess.run([str(crossbench_binary), "merge", str(a), str(unknown), "-o", str(tmp_path / "m.h5")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "crossbench-cube/99" in result.stderr, result.stderr
    assert not (tmp_path / "m.h5").exists()


@pytest.mark.parametrize("command", ["run", "plan", "check", "merge", "list", "describe", "export-network"])
def test_every_command_has_help(command, run_crossbench):
    result = run_crossbench(command, "--help")
    assert result.returncode == 0, result.stderr
    assert f"usage: crossbench {command}" in result.stdout
    assert "Exit codes" in result.stdout and "Examples" in result.stdout


def test_run_help_lists_every_flag_with_its_default(run_crossbench):
    help_text = run_crossbench("run", "--help").stdout
    for flag, default in [("--replicas", "[1]"), ("--checkpoint-s", "[60]"), ("--filter", "[]"), ("--algo", "[heuristic]")]:
        assert re.search(re.escape(flag) + r".*\n.*" + re.escape(default), help_text), flag


@pytest.mark.parametrize("arguments,fragment", [
    (["run", "myjob.ini"], "did you mean --job myjob.ini"),
    (["run", "--set", "measure.warmup=1", "--set", "measure.warmup=2"], "set twice"),
    (["run", "--colour"], "unknown flag '--colour'"),
    (["plan", "--ranks", "2", "--ranks", "3"], "given twice"),
    (["plan", "--filter", "("], "not a regular expression"),
    (["run", "--first", "("], "--first '(' is not a regular expression"),
    (["run", "--algo", "exhaustive", "--algo-cache", "/nonexistent/dir/a.json"],
     "--algo-cache '/nonexistent/dir/a.json': directory '/nonexistent/dir' does not exist"),
    (["run", "--replicas", "abc"], "command line: --replicas 'abc' must be an integer"),
    (["plan", "--ranks=0"], "command line: --ranks '0' is out of range"),
    (["run", "--quiet=1"], "--quiet takes no value"),
    (["run", "--replicas"], "--replicas needs a value"),
    (["run", "--rep", "2"], "unknown flag '--rep'"),  # no abbreviations: a flag is spelt as the schema spells it
])
def test_bad_command_lines_exit_2(arguments, fragment, run_crossbench, tmp_path):
    result = run_crossbench(*arguments, cwd=tmp_path)
    assert result.returncode == 2 and fragment in result.stderr, result.stderr
    assert "[]" not in result.stderr, result.stderr
    assert list(tmp_path.iterdir()) == []


def test_plan_json_and_filter(run_crossbench, tmp_path):
    job = tmp_path / "job.ini"
    job.write_text(TINY_JOB)
    every = json.loads(run_crossbench("plan", "--job", job, "--ranks", "2", "--json").stdout)
    assert len(every["cells"]) == 2 and every["ranks"] == 2
    only = json.loads(run_crossbench("plan", "--job", job, "--ranks", "2", "--json", "--filter", "/training").stdout)
    assert [cell["name"] for cell in only["cells"]] == ["onednn/alexnet/fp32/b1/training/r0"]
    assert only["cells"][0]["estimated_s"] > 0 and only["makespan_s"] > 0


def test_first_takes_the_named_cells_first_in_the_plan_and_the_run(run_crossbench, tmp_path):
    """--first: the named cell runs first (the plan marks it), and the run's cube holds every cell."""
    job = tmp_path / "job.ini"
    job.write_text(TINY_JOB)
    plain = json.loads(run_crossbench("plan", "--job", job, "--json").stdout)
    last = plain["cells"][-1]["name"]
    named = json.loads(run_crossbench("plan", "--job", job, "--json", "--first", "/" + last.split("/")[4] + "/").stdout)
    assert [cell["name"] for cell in named["cells"]] == [last] + [cell["name"] for cell in plain["cells"][:-1]]
    assert [cell["first"] for cell in named["cells"]] == [True] + [False] * (len(plain["cells"]) - 1)
    run = run_crossbench("run", "--job", job, "--first", "/" + last.split("/")[4] + "/", "-o", tmp_path / "first.h5")
    assert run.returncode == 0, run.stderr
    progress = [line for line in run.stdout.splitlines() + run.stderr.splitlines() if line.startswith("[1/")]
    assert progress and last.split("/")[4] in progress[0], progress


def test_filter_matching_no_cell_is_exit_2(run_crossbench, tmp_path):
    """run, plan and check with a --filter (run and plan: a --first) that names nothing: exit 2 naming it, no cube."""
    job = tmp_path / "job.ini"
    job.write_text(TINY_JOB)
    cube = tmp_path / "out.h5"
    for command in (["run", "--output", cube, "--quiet"], ["plan", "--ranks", "2"], ["check"]):
        done = run_crossbench(*command, "--job", job, "--filter", "zzz")
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "--filter 'zzz' matches no cell" in done.stderr, (command, done.stderr)
    for command in (["run", "--output", cube, "--quiet"], ["plan", "--ranks", "2"]):  # --first orders run and plan
        done = run_crossbench(*command, "--job", job, "--first", "zzz")
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "--first 'zzz' matches no cell of the matrix" in done.stderr, (command, done.stderr)
    assert not cube.exists() and not pathlib.Path(str(cube) + ".journal").exists()


def test_list_json(run_crossbench):
    networks = json.loads(run_crossbench("list", "networks", "--json").stdout)
    assert "resnet50" in [n["name"] for n in networks]
    options = json.loads(run_crossbench("list", "options", "--json").stdout)
    warmup = next(o for o in options if o["key"] == "measure.warmup")
    assert warmup["default"] == "10" and warmup["changes_numbers"] and warmup["recorded_as"] == "measure_warmup_steps"


def test_quiet_keeps_the_table(run_crossbench, tmp_path):
    job = tmp_path / "job.ini"
    job.write_text(TINY_JOB)
    result = run_crossbench("run", "--job", job, "--output", tmp_path / "q.h5", "--quiet")
    assert result.returncode == 0, result.stderr
    assert "[1/2]" not in result.stderr and "[1/2]" not in result.stdout
    assert "median_ms" in result.stdout and result.stdout.startswith("D0 = ")
