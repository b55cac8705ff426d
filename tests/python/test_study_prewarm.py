"""bench/study_prewarm.py: the study's next framework cells compiled ahead, side by side, into the run's
compile cache, so that the timed run that follows compiles them warm. Here on the CPU with the JAX
worker (jax 0.4.38 in the CI's venv): the prewarm compiles the cells the journal has not measured,
and the run after it records the cache warm; the matrix arguments the prewarm replaces are dropped;
its filter matches exactly its cells."""
import json
import pathlib
import re
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "analysis"))
from crossbench_analysis import cube_extras  # noqa: E402
from crossbench_analysis.cube import CELL_DIMS, load  # noqa: E402
sys.path.insert(0, str(REPO / "bench"))
import study_prewarm  # noqa: E402
from test_jax_worker import jax_interpreter, jax_worker_setting  # noqa: E402,F401  (the fixture)

MATRIX = ["--job", "jobs/seed2017.ini", "--set", "matrix.engines=jax,cudnn", "--set", "matrix.networks=alexnet",
          "--set", "matrix.precisions=fp32", "--set", "matrix.batches=1,2",
          "--set", "matrix.phases=inference"]


def test_the_prewarm_replaces_output_resume_caches_and_measure_settings():
    run_arguments = ["--job", "jobs/seed2017.ini", "--set", "measure.min_steps=100", "--set", "matrix.batches=64",
                     "--algo-cache", "a.json", "--compile-cache", "c", "--stop-grace-s", "60", "--resume",
                     "--allow-build-change", "--allow-setting-change", "--output", "study.h5", "--filter", "x",
                     "--set", "measure.target_ci=0.02"]
    assert study_prewarm.matrix_arguments(run_arguments) == ["--job", "jobs/seed2017.ini", "--set", "matrix.batches=64"]


def test_the_filter_matches_exactly_its_cells():
    keys = [("pytorch-compile", "resnet50", "bf16", 64, "training"), ("jax", "vgg11", "amp-bf16", 64, "inference")]
    pattern = re.compile(study_prewarm.cell_filter(keys))
    assert pattern.search("pytorch-compile/resnet50/bf16/b64/training/g1")
    assert pattern.search("jax/vgg11/amp-bf16/b64/inference/g1")
    for other in ("pytorch-compile/resnet50/bf16/b64/inference/g1", "pytorch-compile/resnet50/bf16/b640/training/g1",
                  "jax/vgg11/bf16/b64/inference/g1", "xpytorch-compile/resnet50/bf16/b64/training/g1"):
        assert not pattern.search(other), other


def run(crossbench, *arguments):
    return subprocess.run([str(crossbench), *arguments], cwd=REPO, capture_output=True, text=True, timeout=900)


def decisions_of(cube):
    """(engine, batch, decisions) of the cube's cells that ran (status ok)."""
    loaded = load(cube)
    cells = loaded.cells.merge(cube_extras.decisions(loaded), on=[c for c in CELL_DIMS])
    ran = cells[cells["status"] == "ok"]
    return [(e, int(b), d) for e, b, d in zip(ran["engine"], ran["batch"], ran["decisions"])]


def test_the_prewarm_compiles_what_the_journal_has_not_measured_and_the_run_finds_it_warm(
        tmp_path, crossbench_binary, jax_interpreter):
    worker = ["--set", jax_worker_setting(jax_interpreter)]
    cube, cache = tmp_path / "study.h5", tmp_path / "cache"
    # The study so far: batch 1's cells measured (the journal holds them), batch 2's not.
    first = run(crossbench_binary, "run", *MATRIX, *worker, "--filter", "/b1/", "--set", "measure.min_steps=2",
                "--set", "measure.max_steps=2", "--set", "measure.warmup=1", "--compile-cache", str(cache / "first"),
                "--quiet", "--output", str(cube))
    assert first.returncode == 0, first.stdout + first.stderr
    assert study_prewarm.finished_cells(f"{cube}.journal") == {("jax", "alexnet", "fp32", 1, "inference"),
                                                              ("cudnn", "alexnet", "fp32", 1, "inference")}
    prewarm = subprocess.run(
        [sys.executable, str(REPO / "bench" / "study_prewarm.py"), "--journal", f"{cube}.journal", "--cache",
         str(cache / "study"), "--out", str(tmp_path / "prewarm"), "--processes", "2", "--budget-s", "600",
         "--ready-file", str(tmp_path / "ready.filter"), "--",
         str(crossbench_binary), "run", *MATRIX, *worker, "--set", "measure.min_steps=100", "--resume",
         "--output", str(cube)],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    assert prewarm.returncode == 0, prewarm.stdout + prewarm.stderr
    assert "prewarm: 1 compiling cells left; 1 processes" in prewarm.stdout, prewarm.stdout
    assert "prewarm: 1 cells compiled ahead" in prewarm.stdout, prewarm.stdout
    cubes = sorted((tmp_path / "prewarm").glob("prewarm_*.h5"))
    assert [c.name for c in cubes] == ["prewarm_0.h5"]
    # Its processes' JAX workers allocate on demand: a GPU job beside the prewarm keeps its memory.
    assert "environment: XLA_PYTHON_CLIENT_PREALLOCATE=false" in (tmp_path / "prewarm" / "prewarm_0.log").read_text()
    (engine, batch, decisions), = decisions_of(cubes[0])  # the jax cell at batch 2 alone, not cudnn's
    assert (engine, batch) == ("jax", 2) and "cold: empty before" in decisions, decisions
    # The cell it compiled whole, for the timed run's --first.
    ready = (tmp_path / "ready.filter").read_text()
    assert ready == study_prewarm.cell_filter([("jax", "alexnet", "fp32", 2, "inference")]), ready
    # The timed run that follows takes it first, and its one new jax cell compiles warm from what the prewarm left.
    timed = run(crossbench_binary, "run", *MATRIX, *worker, "--set", "measure.min_steps=2", "--set",
                "measure.max_steps=2", "--set", "measure.warmup=1", "--compile-cache", str(cache / "study"),
                "--resume", "--first", ready, "--output", str(cube))
    assert timed.returncode == 0, timed.stdout + timed.stderr
    progress = [line for line in (timed.stdout + timed.stderr).splitlines() if line.startswith("[1/")]
    assert progress and " jax " in progress[0] and " 2 " in progress[0], timed.stdout + timed.stderr
    new = [d for e, b, d in decisions_of(cube) if e == "jax" and b == 2]
    assert len(new) == 1 and "(warm:" in new[0], new
    # Nothing of the prewarm is left running.
    leftover = subprocess.run(["pgrep", "-f", str(tmp_path / "prewarm")], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", leftover.stdout


def test_no_cell_left_compiles_nothing(tmp_path, crossbench_binary):
    journal = tmp_path / "study.h5.journal"
    done = run(crossbench_binary, "run", "--job", "jobs/seed2017.ini", "--set", "matrix.engines=cudnn",
               "--set", "matrix.networks=alexnet", "--set", "matrix.precisions=fp32", "--set", "matrix.batches=1",
               "--set", "matrix.phases=inference", "--quiet", "--output", str(tmp_path / "study.h5"))
    assert done.returncode == 0, done.stdout + done.stderr
    prewarm = subprocess.run(
        [sys.executable, str(REPO / "bench" / "study_prewarm.py"), "--journal", str(journal), "--cache",
         str(tmp_path / "cache"), "--out", str(tmp_path / "prewarm"), "--", str(crossbench_binary), "run",
         "--job", "jobs/seed2017.ini", "--set", "matrix.engines=cudnn", "--set", "matrix.networks=alexnet"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert prewarm.returncode == 0, prewarm.stdout + prewarm.stderr
    assert "prewarm: no compiling cell left to measure" in prewarm.stdout, prewarm.stdout
    assert not (tmp_path / "prewarm").exists()
    json.loads(journal.read_text().splitlines()[1].split(" ", 1)[1])  # a real journal was read


def test_the_ready_cells_are_those_a_process_ran_ok_in_the_runs_order(tmp_path):
    """--ready-file's cells: of the chosen ones, in their order, those a prewarm journal holds `ok`; a cell
    a process was stopped in (not_run) or that failed was not compiled whole."""
    def journal(path, results):
        lines = ["header"] + [f"x {json.dumps({'result': r})}" for r in results]
        path.write_text("\n".join(lines) + "\n")
        return path

    def result(network, status):
        return {"engine": "pytorch-compile", "network": network, "precision": "bf16", "batch": 64,
                "phase": "training", "status": status}

    chosen = [("pytorch-compile", n, "bf16", 64, "training") for n in ("googlenet", "vgg11", "resnet50", "alexnet")]
    journals = [journal(tmp_path / "prewarm_0.h5.journal", [result("googlenet", "not_run")]),
                journal(tmp_path / "prewarm_1.h5.journal", [result("alexnet", "ok"), result("vgg11", "ok")]),
                journal(tmp_path / "prewarm_2.h5.journal", [result("resnet50", "failed")]),
                tmp_path / "prewarm_3.h5.journal"]  # a process that never wrote one
    assert study_prewarm.ready_cells(chosen, journals) == [chosen[1], chosen[3]]


def plan_cell(engine, network, estimate, search_s=0.0, unsupported=""):
    return {"engine": engine, "network": network, "precision": "bf16", "batch": 64, "phase": "training",
            "estimated_s": estimate, "model": {"search_s": search_s}, "unsupported": unsupported}


def test_the_run_s_reach_keeps_the_compiling_cells_the_timed_run_starts():
    # In the scheduler's order (longest estimate first, every engine): jax a starts at 0 s, cudnn b at
    # 100 - 80 x 0.75 = 40 s, pytorch-compile c at 40 + 50 = 90 s, jax d at 90 + 40 - 0.75 x 20 = 115 s,
    # jax e at 115 + 30 = 145 s. With run_s 80 (reach 1.5 x 80 = 120 s), e is out of reach.
    plan = {"cells": [plan_cell("jax", "a", 100.0, 80.0), plan_cell("cudnn", "b", 50.0),
                      plan_cell("pytorch-compile", "c", 40.0, 20.0), plan_cell("jax", "d", 30.0),
                      plan_cell("jax", "e", 20.0), plan_cell("jax", "done", 10.0),
                      plan_cell("cudnn", "f", 1000.0, unsupported="amp-bf16: framework workers only")]}
    finished = {("jax", "done", "bf16", 64, "training")}
    assert study_prewarm.WARM_COMPILE_FRACTION == 0.25 and study_prewarm.REACH == 1.5
    everything = [("jax", "a", "bf16", 64, "training"), ("pytorch-compile", "c", "bf16", 64, "training"),
                  ("jax", "d", "bf16", 64, "training"), ("jax", "e", "bf16", 64, "training")]
    assert study_prewarm.select_cells(plan, finished) == everything
    assert study_prewarm.select_cells(plan, finished, run_s=80.0) == everything[:3]
    assert study_prewarm.select_cells(plan, finished, run_s=1.0) == everything[:1]  # the first always starts


def test_the_cells_come_in_the_plans_order_which_is_the_runs():
    # measure.oom_boundary = stop: the plan runs a series smallest batch first although its larger
    # batches have the longer estimates; the prewarm compiles what the run reaches first, first.
    plan = {"cells": [dict(plan_cell("pytorch-compile", "resnet50", 20.0, 10.0), batch=1),
                      dict(plan_cell("pytorch-compile", "resnet50", 60.0, 30.0), batch=256),
                      dict(plan_cell("pytorch-compile", "resnet50", 90.0, 40.0), batch=8192)]}
    assert [key[3] for key in study_prewarm.select_cells(plan, set())] == [1, 256, 8192]
    assert [key[3] for key in study_prewarm.select_cells(plan, set(), run_s=20.0)] == [1, 256]


def test_the_prewarm_workers_allocate_on_demand_unless_the_caller_chose(monkeypatch):
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)
    assert study_prewarm.prewarm_environment()["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "true")
    assert study_prewarm.prewarm_environment()["XLA_PYTHON_CLIENT_PREALLOCATE"] == "true"
    monkeypatch.setenv("PATH", "/a/b")
    assert study_prewarm.prewarm_environment()["PATH"] == "/a/b"


def test_a_resumed_study_is_planned_as_the_run_plans_it(tmp_path, crossbench_binary):
    # The sweep's shape: a series smallest batch first (measure.oom_boundary = stop), some batches done. The
    # run plans only the cells its journal lacks, and orders a half-done series among them; the prewarm
    # plans those cells again with --filter (the C++ side: Plan.AResumedRunOrdersItsCellsAsAFilterOfThe
    # RemainingCellsWould), not the full matrix less the done cells.
    matrix = ["--job", "jobs/batch-sweep.ini", "--set", "matrix.engines=pytorch-compile", "--set",
              "matrix.networks=resnet50,vgg11,alexnet", "--set", "matrix.precisions=tf32,bf16", "--set",
              "matrix.batches=1,2,4,8,16,32,64", "--set", "matrix.phases=inference,training", "--ranks", "1"]
    command = [str(crossbench_binary)]
    full = study_prewarm.plan_of(command, matrix)
    keys = study_prewarm.plan_keys(full)
    assert len(keys) == 84
    done = {key for i, key in enumerate(keys) if i % 3 == 0 or key[3] <= 2}
    journal = tmp_path / "sweep.h5.journal"
    lines = ["crossbench journal (header: not read by the prewarm)"]
    for n, (engine, network, precision, batch, phase) in enumerate(sorted(done)):
        lines.append(f"{n} " + json.dumps({"result": {"engine": engine, "network": network, "precision": precision,
                                                       "batch": batch, "phase": phase, "status": "ok"}}))
    journal.write_text("\n".join(lines) + "\n")
    assert study_prewarm.finished_cells(journal) == done
    chosen = study_prewarm.remaining_cells(command, matrix, journal)
    remaining = [key for key in keys if key not in done]
    as_the_run = study_prewarm.plan_keys(study_prewarm.plan_of(command, matrix + ["--filter",
                                                                                 study_prewarm.cell_filter(remaining)]))
    assert chosen == as_the_run and sorted(chosen) == sorted(remaining)
    assert chosen != remaining, "the matrix no longer shows why the prewarm plans again"
    everything_done = tmp_path / "done.h5.journal"
    everything_done.write_text("\n".join(["header"] + [f"{n} " + json.dumps({"result": dict(
        zip(("engine", "network", "precision", "batch", "phase"), key), status="ok")}) for n, key in enumerate(keys)]))
    assert study_prewarm.remaining_cells(command, matrix, everything_done) == []


def test_a_cell_whose_compile_outlasts_the_prewarm_is_named(tmp_path, crossbench_binary):
    # Call 64: GoogLeNet max-autotune inference (349 s cold alone in the plan's model) in a 230 s prewarm,
    # four side by side; the timed run took it first and measured nothing. OverFeat's (64 s) fits.
    matrix = ["--job", "jobs/seed2017.ini", "--set", "matrix.engines=pytorch-compile", "--set",
              "matrix.networks=overfeat,googlenet", "--set", "matrix.precisions=bf16", "--set", "matrix.batches=64",
              "--set", "matrix.phases=inference", "--set", "engine.compile_mode=max-autotune", "--ranks", "1"]
    plan, finished = study_prewarm.planned_remaining([str(crossbench_binary)], matrix, tmp_path / "none.journal")
    assert finished == set()
    cells = study_prewarm.select_cells(plan, finished)
    assert cells == [("pytorch-compile", "googlenet", "bf16", 64, "inference"),
                     ("pytorch-compile", "overfeat", "bf16", 64, "inference")]
    past = study_prewarm.compiles_past_the_budget(plan, cells, 230.0)
    assert [key for key, _ in past] == [("pytorch-compile", "googlenet", "bf16", 64, "inference")]
    assert past[0][1] > 346  # not compiled after 346 s alone on the H200 (2026-12-09 call65)
    assert study_prewarm.compiles_past_the_budget(plan, cells, 600.0) == []
