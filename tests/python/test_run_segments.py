"""Run segments (issue 26): every cell names the run, the build and the device that
measured it; resume keeps every segment, refuses another build unless allowed,
accepts another physical device of the same key and records it; merge keeps each
input and warns about what differs; the console shows each median's CI. All on
this machine's CPU."""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import zlib

import h5py
import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "analysis"))
from crossbench_analysis import cube as cube_module  # noqa: E402
from conftest import TINY_JOB as JOB, as_text as text  # noqa: E402


def report(*arguments):
    return subprocess.run([str(REPO / "scripts" / "report"), *map(str, arguments)], capture_output=True, text=True,
                          timeout=600, cwd=REPO)


def rewrite_journal(path, edit):
    """Applies `edit(record) -> record` to every record of a journal, with fresh checksums
    (the journal's line format: `<crc32 as 8 hex digits> <JSON>`)."""
    lines = []
    for line in pathlib.Path(path).read_text().splitlines():
        record = edit(json.loads(line[9:]))
        payload = json.dumps(record, separators=(",", ":"))
        lines.append(f"{zlib.crc32(payload.encode()):08x} {payload}")
    pathlib.Path(path).write_text("\n".join(lines) + "\n")


def first_segment_edit(change):
    def edit(record):
        if record.get("type") == "segment" and record["segment"] == 0:
            change(record)
        return record
    return edit


@pytest.fixture
def half_run(tmp_path, run_crossbench):
    """A run of the job's inference cell only: its journal is resumed for the training cell."""
    job = tmp_path / "job.ini"
    job.write_text(JOB)
    cube = tmp_path / "cube.h5"
    done = run_crossbench("run", "--job", job, "--output", cube, "--filter", "inference")
    assert done.returncode == 0, done.stderr
    return job, cube


def test_a_resumed_cube_keeps_every_segment(half_run, run_crossbench, tmp_path):
    job, cube = half_run
    done = run_crossbench("run", "--job", job, "--output", cube, "--resume")
    assert done.returncode == 0, done.stderr
    with h5py.File(cube, "r") as f:
        assert text(f.attrs["schema"]) == "crossbench-cube/4"
        assert text(f.attrs["segments"]) == "2" and text(f.attrs["segments_differ"]) == ""
        segments = [dict(f["segments"][f"segment_{i}"].attrs) for i in range(2)]
        assert "--filter inference" in text(segments[0]["command_line"])
        assert "--resume" in text(segments[1]["command_line"])
        for segment in segments:
            assert text(segment["run_state"]) == "complete"
            assert text(segment["started"]) <= text(segment["ended"])
            assert text(segment["git_revision"]) == text(f.attrs["git_revision"])
        assert text(segments[0]["ended"]) <= text(segments[1]["started"])
        phase = [text(p) for p in f["phase"][()]]
        by_phase = dict(zip(phase, np.asarray(f["segment"][()]).reshape(-1)))
        assert by_phase == {"inference": 0, "training": 1}
        # Every segment's ranks: /ranks holds one row per (segment, rank).
        assert list(f["ranks/segment"][()]) == [0, 1] and list(f["ranks/rank"][()]) == [0, 0]
        assert list(np.asarray(f["source"][()]).reshape(-1)) == [-1, -1]
    loaded = cube_module.load(cube)
    assert len(loaded.segments) == 2 and loaded.mixed_runs() == []
    origins = loaded.origins(loaded.measured)
    assert sorted(origins["segment"]) == [0, 1]
    out = tmp_path / "report"
    r = report("report", cube, "-o", out)
    assert r.returncode == 0, r.stderr
    md = (out / "report.md").read_text()
    assert "2 run segment(s)" in md and "Mixed runs" not in md


def test_resume_with_another_build_is_refused_unless_allowed(half_run, run_crossbench, tmp_path):
    job, cube = half_run
    journal = pathlib.Path(str(cube) + ".journal")
    rewrite_journal(journal, first_segment_edit(lambda r: r["attributes"].update(git_revision="0000000dead0")))
    refused = run_crossbench("run", "--job", job, "--output", cube, "--resume")
    assert refused.returncode == 2, refused.stderr
    assert "git_revision is '0000000dead0' in segment 0" in refused.stderr and "--allow-build-change" in refused.stderr
    assert run_crossbench("run", "--job", job, "--output", tmp_path / "x.h5", "--allow-build-change").returncode == 2
    done = run_crossbench("run", "--job", job, "--output", cube, "--resume", "--allow-build-change")
    assert done.returncode == 0, done.stderr
    assert "--allow-build-change: git_revision" in done.stderr
    with h5py.File(cube, "r") as f:
        assert "git_revision" in text(f.attrs["segments_differ"])
        assert "0000000dead0" in text(f.attrs["allowed_build_change"])
        assert "0000000dead0" in text(f["segments/segment_1"].attrs["allowed_build_change"])
    loaded = cube_module.load(cube)
    origins = loaded.origins(loaded.measured)
    assert set(origins["git_revision"]) == {"0000000dead0", loaded.attrs["git_revision"]}
    out = tmp_path / "report"
    r = report("report", cube, "-o", out)
    assert r.returncode == 0, r.stderr
    md = (out / "report.md").read_text()
    assert "**Mixed runs:**" in md and "--allow-build-change" in md and "several: " in md


def test_resume_on_another_physical_device_is_recorded(half_run, run_crossbench):
    """A Slurm requeue lands on another node: the same device key, another machine; allowed and recorded."""
    job, cube = half_run
    journal = pathlib.Path(str(cube) + ".journal")
    rewrite_journal(journal, first_segment_edit(lambda r: r["devices"][0].update(host="othernode")))
    done = run_crossbench("run", "--job", job, "--output", cube, "--resume")
    assert done.returncode == 0, done.stderr
    with h5py.File(cube, "r") as f:
        assert "physical devices of" in text(f.attrs["segments_differ"])
        assert [text(h) for h in f["ranks/host"][()]][0] == "othernode"
    loaded = cube_module.load(cube)
    hosts = loaded.origins(loaded.measured)["host"]
    assert set(hosts) == {"othernode", loaded.ranks["host"].iloc[-1]}


def test_merge_keeps_sources_and_warns_about_what_differs(run_crossbench, tmp_path, crossbench_binary):
    job = tmp_path / "job.ini"
    job.write_text(JOB)
    cubes = []
    for tag, warmup in (("a", "1"), ("b", "2")):
        cubes.append(tmp_path / f"{tag}.h5")
        done = subprocess.run([str(crossbench_binary), "run", "--job", str(job), "--output", str(cubes[-1]),
                               "--filter", "inference", "--set", f"measure.warmup={warmup}"],
                              capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, CROSSBENCH_DEVICE_TAG=f"loaner={tag}"))
        assert done.returncode == 0, done.stderr
    incomplete = tmp_path / "c.h5"
    shutil.copy(cubes[1], incomplete)
    with h5py.File(incomplete, "r+") as f:
        f.attrs["run_state"] = "incomplete: stopped by signal 15 with 1 cells not run; resume with --resume"
    merged = tmp_path / "all.h5"
    strict = run_crossbench("merge", cubes[0], incomplete, "-o", merged, "--strict")
    assert strict.returncode == 2 and not merged.exists()
    assert "c.h5 is incomplete" in strict.stderr and "measure_warmup_steps ('1', '2')" in strict.stderr
    done = run_crossbench("merge", cubes[0], incomplete, "-o", merged)
    assert done.returncode == 0, done.stderr
    assert "warning: merge:" in done.stderr and "measure_warmup_steps" in done.stderr
    with h5py.File(merged, "r") as f:
        assert text(f.attrs["schema"]) == "crossbench-cube/4"
        sources = np.asarray(f["source"][()]).reshape(-1)
        devices = [text(d) for d in f["device"][()]]
        status = np.asarray(f["status"][()]).reshape(len(devices), -1)
        for i, device in enumerate(devices):
            ran = np.asarray(f["source"][()]).reshape(len(devices), -1)[i][status[i] != 0]
            assert set(ran) == {0 if "loaner=a" in device else 1}
        assert set(sources) >= {0, 1}
        assert text(f["sources/source_1"].attrs["run_state"]).startswith("incomplete")
        assert text(f["sources/source_0"].attrs["measure_warmup_steps"]) == "1"
        assert [text(f[f"segments/segment_{i}"].attrs["source"]) for i in range(2)] == ["0", "1"]
        assert list(f["ranks/source"][()]) == [0, 1] and list(f["ranks/segment"][()]) == [0, 1]
    loaded = cube_module.load(merged)
    notes = " ".join(loaded.mixed_runs())
    assert "incomplete" in notes and "measure_warmup_steps" in notes


def test_console_shows_the_ci_and_marks_cells_that_missed_target_ci(run_crossbench, tmp_path):
    job = tmp_path / "job.ini"
    # A target no run of 3-5 steps meets (1e-9 of the median: 13 fs of a 13 ms step). 0.0001 was met
    # now and then: on a core left to itself by a neighbouring compile, three steps came within
    # 0.02% of each other, the cell stopped at ci_target and printed "0.0" unmarked (issue 26's flake).
    job.write_text(JOB.replace("target_ci = 0.5", "target_ci = 0.000000001"))
    done = run_crossbench("run", "--job", job, "--output", tmp_path / "c.h5", "--filter", "inference")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("device"))
    assert "±ci%" in header
    row = next(line for line in lines if " inference " in line and " ok " in line)
    ci = row.split()[header.split().index("±ci%")]
    assert ci.endswith("*"), row
    with h5py.File(tmp_path / "c.h5", "r") as f:
        median = float(np.nanmax(f["median_ms"][()]))
        half = float(np.nanmax(f["ci_high_ms"][()]) - np.nanmax(f["ci_low_ms"][()])) / 2
    assert abs(float(ci.rstrip("*")) - 100 * half / median) < 0.051
    assert "missed measure.target_ci = 1e-07%" in done.stdout


def test_number_settings_follow_the_options_schema(run_crossbench):
    """The analysis's list of settings that change the numbers is the options schema's."""
    options = json.loads(run_crossbench("list", "options", "--json").stdout)
    schema = {o["recorded_as"] for o in options if o["changes_numbers"] and o["recorded_as"]}
    analysis = set(cube_module.NUMBER_SETTINGS) | {k for k in schema if k.startswith("measure_")}
    assert schema == analysis


def cpu_list(cpus):
    """Linux (and hwloc) list syntax of a set of CPUs: {0, 1, 2, 5} -> "0-2,5"."""
    out, cpus = [], sorted(cpus)
    start = prev = cpus[0]
    for c in cpus[1:] + [None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if c is not None:
            start = prev = c
    return ",".join(out)


def test_ranks_record_their_cpu_set_on_this_topology(tmp_path, crossbench_binary):
    """hwloc's view of the rank's binding is what /ranks records: the whole affinity of the
    test, then one CPU under taskset; a CPU rank has no GPU NUMA node, and --bind-near-gpu
    leaves it where it is (and is recorded)."""
    job = tmp_path / "job.ini"
    job.write_text(JOB)
    allowed = sorted(os.sched_getaffinity(0))
    cases = [([], cpu_list(allowed), "false"),
             (["taskset", "-c", str(allowed[-1])], str(allowed[-1]), "false"),
             (["taskset", "-c", str(allowed[0])], str(allowed[0]), "true")]
    for i, (prefix, expected, bound) in enumerate(cases):
        cube = tmp_path / f"c{i}.h5"
        command = prefix + [str(crossbench_binary), "run", "--job", str(job), "--output", str(cube), "--filter",
                            "inference"] + (["--bind-near-gpu"] if bound == "true" else [])
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        with h5py.File(cube, "r") as f:
            assert text(f["ranks/cpu_set"][0]) == expected
            assert int(f["ranks/numa_node"][0]) == -1  # a CPU rank: no GPU
            assert text(f.attrs["bind_near_gpu"]) == bound


def test_repetitions_keep_every_median_and_the_median_one_is_the_headline(run_crossbench, tmp_path):
    """--repetitions 3: three fresh sessions of the cell; the cube keeps the three medians, the
    headline is the repetition of the median median, and the analysis judges stability."""
    job = tmp_path / "job.ini"
    job.write_text(JOB)
    cube = tmp_path / "r.h5"
    done = run_crossbench("run", "--job", job, "--output", cube, "--filter", "inference", "--repetitions", "3")
    assert done.returncode == 0, done.stderr
    with h5py.File(cube, "r") as f:
        assert text(f.attrs["measure_repetitions"]) == "3"
        medians = np.asarray(f["repetition_median_ms"][()]).reshape(-1, 3)
        ok = np.asarray(f["status"][()]).reshape(-1) == 1
        row = medians[ok][0]
        assert np.isfinite(row).all() and len(set(row)) >= 2  # three sessions, not one copied
        headline = float(np.asarray(f["median_ms"][()]).reshape(-1)[ok][0])
        assert headline == sorted(row)[1]
        chosen = list(row).index(headline) + 1
        assert f"repetition {chosen} of 3" in text(np.asarray(f["message"][()]).reshape(-1)[ok][0])
    loaded = cube_module.load(cube)
    stability = loaded.stability()
    assert len(stability) == 1 and stability["repetitions"].iloc[0] == 3
    spread = (row.max() - row.min()) / np.median(row)
    assert abs(stability["spread"].iloc[0] - spread) < 1e-12
    assert bool(stability["unstable"].iloc[0]) == (spread > cube_module.STABILITY_THRESHOLD)
    out = tmp_path / "report"
    r = report("report", cube, "-o", out)
    assert r.returncode == 0, r.stderr
    assert "Stability check" in (out / "report.md").read_text()
