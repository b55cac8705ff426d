"""bench/gpu_framework_overhead.py's standalone loops compile from the compile cache crossbench's
workers use (the workers' own JaxCache / InductorCache), so a loop whose graph the cache holds loads it
instead of compiling again, and each row says which cache and what it found. The JAX loop, on this
machine's CPU: a first process compiles cold into the cache, a second loads every compile from it."""
import json
import pathlib
import re
import subprocess
import sys

import pytest

from test_jax_worker import jax_interpreter  # noqa: F401  (the fixture)

REPO = pathlib.Path(__file__).resolve().parents[2]


def standalone_jax_row(python, graphs, cache):
    command = [python, str(REPO / "bench" / "gpu_framework_overhead.py"), "--standalone", "jax", "--networks", "alexnet",
               "--precisions", "fp32", "--phases", "inference", "--batch", "1", "--warmup", "1", "--steps", "2",
               "--graphs-dir", str(graphs), "--compile-cache", str(cache)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO,
                          env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line[len("STANDALONE "):]) for line in done.stdout.splitlines() if line.startswith("STANDALONE ")]
    assert len(rows) == 1, done.stdout
    return rows[0]


def test_the_standalone_jax_loop_compiles_from_the_shared_cache(tmp_path, jax_interpreter, crossbench_binary):
    graphs = tmp_path / "graphs"
    graphs.mkdir()
    exported = subprocess.run([str(crossbench_binary), "export-network", "alexnet", "--output", str(graphs / "alexnet.json")],
                              capture_output=True, text=True, timeout=120)
    assert exported.returncode == 0, exported.stderr
    cache = tmp_path / "cache"
    first = standalone_jax_row(jax_interpreter, graphs, cache)
    assert first["status"] == "ok", first
    # The steps are timed queued back to back, as a loop at its best runs them, one sample per step.
    assert first["timing"].startswith("pipelined(3 steps queued ahead"), first
    assert first["samples"] == 2, first
    assert first["compile_cache"].startswith(f"compile_cache={cache} (cold: empty before"), first["compile_cache"]
    assert any((cache / "jax").iterdir())  # the compile was kept
    second = standalone_jax_row(jax_interpreter, graphs, cache)
    assert second["status"] == "ok", second
    assert second["compile_cache"].startswith(f"compile_cache={cache} (warm:"), second["compile_cache"]
    hits, compiles = map(int, re.search(r"persistent cache hits=(\d+) of (\d+) compiles", second["compile_cache"]).groups())
    assert compiles >= 1 and hits == compiles, second["compile_cache"]
    # Off: every compile cold, and the row says so.
    off = standalone_jax_row(jax_interpreter, graphs, "none")
    assert off["status"] == "ok" and "compile_cache=none" in off["compile_cache"], off["compile_cache"]


def test_each_cell_is_paired_and_written_before_the_next_so_a_stage_cut_short_keeps_it(
        tmp_path, jax_interpreter, crossbench_binary):
    """The orchestrator runs cell by cell, crossbench then its standalone loop, and rewrites --out after each
    pair: killed in its second cell (as a device stage's time limit does), it has kept the first pair."""
    import os
    import signal
    import time

    out = tmp_path / "frameworks.json"
    command = [jax_interpreter, "-u", str(REPO / "bench" / "gpu_framework_overhead.py"), "--variants", "jax",
               "--networks", "alexnet", "--precisions", "fp32", "--phases", "inference,training", "--batch", "1",
               "--warmup", "1", "--steps", "2", "--crossbench", str(crossbench_binary), "--python", jax_interpreter,
               "--graphs-dir", str(tmp_path / "graphs"), "--work-dir", str(tmp_path / "work"), "--out", str(out)]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    with subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          start_new_session=True) as orchestrator:
        deadline = time.time() + 400
        rows = []
        while time.time() < deadline and orchestrator.poll() is None:
            if out.exists():
                rows = json.loads(out.read_text())
                if rows:
                    break
            time.sleep(0.2)
        os.killpg(orchestrator.pid, signal.SIGKILL)
        log = orchestrator.stdout.read()
    assert len(rows) == 1, log
    row = rows[0]
    assert (row["network"], row["precision"], row["phase"], row["variant"]) == ("alexnet", "fp32", "inference", "jax")
    assert row["standalone_status"] == "ok" and row["standalone_ms"] > 0, row
    assert row["crossbench_ms"] > 0, (row, log)  # a number, not NaN: the pair is complete
    # The first cell's crossbench cube is its own (the evidence the stage brings back).
    assert (tmp_path / "work" / "crossbench-jax-alexnet-fp32-inference.h5").exists(), log


def test_repeats_run_each_pair_again_in_fresh_processes_and_report_the_median_ratio(
        tmp_path, jax_interpreter, crossbench_binary):
    """--repeats 2: the cell's pair twice, two crossbench cubes (the second `-r1`), two rows numbered by repeat,
    and the table's median ratio over them."""
    import os

    out = tmp_path / "frameworks.json"
    command = [jax_interpreter, "-u", str(REPO / "bench" / "gpu_framework_overhead.py"), "--variants", "jax",
               "--networks", "alexnet", "--precisions", "fp32", "--phases", "inference", "--batch", "1",
               "--warmup", "1", "--steps", "2", "--repeats", "2", "--crossbench", str(crossbench_binary),
               "--python", jax_interpreter, "--graphs-dir", str(tmp_path / "graphs"),
               "--work-dir", str(tmp_path / "work"), "--out", str(out)]
    done = subprocess.run(command, cwd=REPO, env=dict(os.environ, JAX_PLATFORMS="cpu"), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads(out.read_text())
    assert [row["repeat"] for row in rows] == [0, 1], rows
    assert all(row["crossbench_ms"] > 0 and row["standalone_ms"] > 0 for row in rows), rows
    assert (tmp_path / "work" / "crossbench-jax-alexnet-fp32-inference.h5").exists()
    assert (tmp_path / "work" / "crossbench-jax-alexnet-fp32-inference-r1.h5").exists()
    ratios = sorted(row["crossbench_ms"] / row["standalone_ms"] for row in rows)
    line = re.search(r"alexnet\s+fp32\s+inference\s+jax\s+([\d.]+) \(([\d.]+)-([\d.]+), 2 repeats\)", done.stdout)
    assert line, done.stdout
    assert float(line.group(1)) == pytest.approx(sum(ratios) / 2, abs=1e-3)
    assert float(line.group(2)) == pytest.approx(ratios[0], abs=1e-3)


def test_repeats_below_one_is_refused_by_name():
    done = subprocess.run([sys.executable, str(REPO / "bench" / "gpu_framework_overhead.py"), "--repeats", "0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--repeats must be at least 1, not 0" in done.stderr, done.stderr


def test_a_pair_is_written_when_its_standalone_line_arrives_not_when_the_child_exits(
        tmp_path, jax_interpreter, crossbench_binary):
    """Call 90 lost a measured pair: the standalone child had printed its row, and the stage's time limit cut the
    orchestrator while the child was still shutting down, before the JSON was written. The child here prints its
    row and then does not exit (a launcher that sleeps after it, as a slow teardown does); the pair must be in
    --out all the same, and the orchestrator is then killed, as the stage's limit does."""
    import os
    import signal
    import time

    launcher = tmp_path / "slow_exit.sh"
    # crossbench's own runs go straight through; the standalone child's python sleeps after its loops
    launcher.write_text('case "$1" in *crossbench) exec "$@";; esac\n"$@"\nsleep 600\n')
    out = tmp_path / "frameworks.json"
    command = [jax_interpreter, "-u", str(REPO / "bench" / "gpu_framework_overhead.py"), "--variants", "jax",
               "--networks", "alexnet", "--precisions", "fp32", "--phases", "inference", "--batch", "1",
               "--warmup", "1", "--steps", "2", "--crossbench", f"bash {launcher} {crossbench_binary}",
               "--python", jax_interpreter, "--graphs-dir", str(tmp_path / "graphs"),
               "--work-dir", str(tmp_path / "work"), "--out", str(out)]
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    with subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          start_new_session=True) as orchestrator:
        deadline = time.time() + 400
        rows = []
        while time.time() < deadline and orchestrator.poll() is None:
            if out.exists():
                rows = json.loads(out.read_text())
                if rows:
                    break
            time.sleep(0.2)
        still_running = orchestrator.poll() is None  # the child sleeps: the orchestrator waits on it
        os.killpg(orchestrator.pid, signal.SIGKILL)
        log = orchestrator.stdout.read()
    assert still_running, log
    assert len(rows) == 1, log
    row = rows[0]
    assert (row["network"], row["precision"], row["phase"], row["variant"]) == ("alexnet", "fp32", "inference", "jax")
    assert row["standalone_status"] == "ok" and row["standalone_ms"] > 0, row
    assert row["crossbench_ms"] > 0, (row, log)
