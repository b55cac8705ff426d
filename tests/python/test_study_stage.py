"""Issue 29's study stages of bench/gpu_session.sh (`study`, `studysweep`), run here on the CPU build:
the cube, journal and log kept in a folder the working tree carries, each later call continuing it with
--resume --allow-build-change --allow-setting-change (one run segment per call), and a call stopped at its time limit ending
cleanly (exit 3, the running cell not_run) so that the next call measures the rest, no cell twice."""
import json
import os
import pathlib
import re
import subprocess
import sys

import h5py

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "analysis"))
from crossbench_analysis.cube import load  # noqa: E402
from test_jax_worker import jax_interpreter  # noqa: E402,F401  (the fixture)


def stage(tmp_path, crossbench_binary, study_dir, name="study", **environment):
    env = dict(os.environ, OUT=str(tmp_path / "out"), CB=str(crossbench_binary), STUDY_DIR=str(study_dir),
               TLIMIT="240", PYTHONPATH=str(REPO / "analysis"), **environment)
    return subprocess.run(["bash", str(REPO / "bench" / "gpu_session.sh"), name], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


def segments(journal):
    """The journal's run-segment records (one per call), each with how it ended where it did."""
    records = []
    for line in journal.read_text().splitlines()[1:]:
        record = json.loads(line.split(" ", 1)[1])  # "<checksum> <record>"
        if record.get("type") in ("segment", "segment_end"):
            records.append(record["type"])
    return records


def test_each_call_continues_the_cube_with_a_segment_of_its_own(tmp_path, crossbench_binary):
    study = tmp_path / "tree" / "study"
    cudnn_only = dict(STUDY_ENGINES="cudnn", STUDY_NETWORKS="alexnet")  # every cell unsupported here: fast
    first = stage(tmp_path, crossbench_binary, study, **cudnn_only)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "study: complete" in first.stdout and "continuing" not in first.stdout
    for name in ("study.h5", "study.h5.journal", "study.log"):  # what comes back from the device call
        assert (tmp_path / "out" / "study" / name).exists(), name
    entries = len((study / "study.h5.journal").read_text().splitlines())
    second = stage(tmp_path, crossbench_binary, study, **cudnn_only)
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"study: continuing {study}/study.h5 ({entries - 1} journal entries)" in second.stdout
    assert "study: complete" in second.stdout
    log = (study / "study.log").read_text()
    assert log.count("study wall_s") == 2 and "exit 0" in log
    assert segments(study / "study.h5.journal") == ["segment", "segment_end"] * 2
    cells = load(study / "study.h5").cells
    # alexnet x fp32, tf32, bf16, amp-bf16 x both phases, batch 64
    assert len(cells) == 8 and set(cells["status"]) == {"unsupported"}
    assert set(cells["precision"]) == {"fp32", "tf32", "bf16", "amp-bf16"}


def test_a_call_stopped_at_its_limit_ends_cleanly_and_the_next_measures_the_rest(tmp_path, crossbench_binary):
    """Eager PyTorch on the CPU (20 steps, a few seconds a cell with the worker's start): the first
    call's limit (4 s) stops it inside its first cells, the second measures what is left."""
    if subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode != 0:
        import pytest
        pytest.skip("Debian's python3-torch is not installed")
    study = tmp_path / "tree" / "study"
    cells = dict(STUDY_ENGINES="pytorch", STUDY_NETWORKS="alexnet", STUDY_PRECISIONS="fp32", STUDY_BATCHES="2",
                 STUDY_GRACE="1", STUDY_PYTORCH_WORKER="/usr/bin/python3 -u {workers}/pytorch/worker.py",
                 STUDY_STEPS="20", STUDY_ARGS="--set measure.max_steps=20 --set measure.warmup=1")
    first = stage(tmp_path, crossbench_binary, study, TLIMIT_study="4", **cells)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "study: stopped cleanly at the stage limit (exit 3)" in first.stdout, first.stdout
    done_first = load(study / "study.h5").cells
    assert (done_first["status"] != "ok").any()  # the limit came before the end
    second = stage(tmp_path, crossbench_binary, study, **cells)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "study: continuing" in second.stdout and "study: complete" in second.stdout, second.stdout
    done = load(study / "study.h5").cells
    assert len(done) == 2 and set(done["status"]) == {"ok"}
    assert set(done["phase"]) == {"inference", "training"}
    # Each ok cell once in the journal: none measured twice.
    records = [json.loads(line.split(" ", 1)[1]) for line in (study / "study.h5.journal").read_text().splitlines()[1:]]
    results = [r["result"] for r in records if "result" in r]
    ok = [(r["network"], r["phase"]) for r in results if r["status"] == "ok"]
    assert sorted(ok) == [("alexnet", "inference"), ("alexnet", "training")]
    assert segments(study / "study.h5.journal").count("segment") == 2


def test_the_sweep_stage_is_its_own_cube_beside_the_study(tmp_path, crossbench_binary):
    study = tmp_path / "tree" / "study"
    result = stage(tmp_path, crossbench_binary, study, name="studysweep", STUDY_ENGINES="cudnn",
                   SWEEP_NETWORKS="alexnet", SWEEP_BATCHES="1,2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "sweep: complete" in result.stdout
    cells = load(study / "sweep.h5").cells
    assert sorted(set(cells["batch"])) == [1, 2] and set(cells["precision"]) == {"tf32", "bf16"}
    assert len(cells) == 8
    # Past a series' first oom, no larger batch runs (measure.oom_boundary = stop, recorded).
    with h5py.File(study / "sweep.h5", "r") as f:
        assert f.attrs["measure_oom_boundary"] in (b"stop", "stop")


def test_the_default_folder_is_carried_by_the_working_tree():
    """Untracked and not ignored: the device call's copy of the tree carries it (bench/README.md)."""
    ignored = subprocess.run(["git", "check-ignore", "-q", "bench/results/2026-12-02/study/study.h5.journal"],
                             cwd=REPO).returncode
    assert ignored == 1  # 1: not ignored
    assert "bench/results/2026-12-02/study" in (REPO / "bench" / "gpu_session.sh").read_text()


def test_each_call_measures_cudnn_beside_the_framework_cells_it_finished(tmp_path, crossbench_binary):
    """Issue 24: a framework cell is compared with cudnn measured on the same GPU in the same call, so
    after its segment the stage runs the cudnn cells of the framework cells that segment finished
    (beside_s<segment>.h5; on the CPU they are `unsupported`, on the GPU measured)."""
    if subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode != 0:
        import pytest
        pytest.skip("Debian's python3-torch is not installed")
    study = tmp_path / "tree" / "study"
    cells = dict(STUDY_ENGINES="cudnn,pytorch", STUDY_NETWORKS="alexnet", STUDY_PRECISIONS="fp32",
                 STUDY_BATCHES="2", STUDY_PYTORCH_WORKER="/usr/bin/python3 -u {workers}/pytorch/worker.py",
                 STUDY_STEPS="5", STUDY_ARGS="--set measure.max_steps=5 --set measure.warmup=1")
    done = stage(tmp_path, crossbench_binary, study, **cells)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"study: cudnn beside segment 0's framework cells: exit 0 ({study}/beside_s0.h5)" in done.stdout, done.stdout
    assert (tmp_path / "out" / "study" / "beside_s0.h5").exists()
    beside = load(study / "beside_s0.h5").cells
    assert set(beside["engine"]) == {"cudnn"} and len(beside) == 2
    assert set(beside["phase"]) == {"inference", "training"} and set(beside["batch"]) == {2}


def test_study_name_names_the_cube_and_log(tmp_path, crossbench_binary):
    """STUDY_NAME=autotune (e.g. the max-autotune cells): its own cube, journal and log beside the
    study's, which it leaves alone."""
    study = tmp_path / "tree" / "study"
    done = stage(tmp_path, crossbench_binary, study, STUDY_NAME="autotune", STUDY_ENGINES="cudnn",
                 STUDY_NETWORKS="alexnet", STUDY_PRECISIONS="fp32")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "autotune: complete" in done.stdout, done.stdout
    for name in ("autotune.h5", "autotune.h5.journal", "autotune.log"):
        assert (study / name).exists() and (tmp_path / "out" / "autotune" / name).exists(), name
    assert not (study / "study.h5").exists()
    assert len(load(study / "autotune.h5").cells) == 2  # alexnet fp32, both phases


def test_the_prewarm_compiles_the_next_cells_and_the_timed_run_finds_them_warm(tmp_path, crossbench_binary,
                                                                               jax_interpreter):
    """STUDY_PREWARM_S: bench/study_prewarm.py first compiles the study's framework cells side by side into
    the call's compile cache; the timed run then records each of them warm (the JAX worker on the CPU)."""
    from crossbench_analysis import cube_extras
    from crossbench_analysis.cube import CELL_DIMS

    study = tmp_path / "tree" / "study"
    cells = dict(STUDY_ENGINES="jax", STUDY_NETWORKS="alexnet", STUDY_PRECISIONS="fp32", STUDY_BATCHES="1",
                 STUDY_GRACE="1", STUDY_JAX_WORKER=f"{jax_interpreter} -u {{workers}}/jax/worker.py",
                 STUDY_STEPS="2", STUDY_ARGS="--set measure.max_steps=2 --set measure.warmup=1",
                 STUDY_PREWARM_S="300", STUDY_PREWARM_PROCS="2", STUDY_COMPILE_CACHE=str(tmp_path / "cache"))
    done = stage(tmp_path, crossbench_binary, study, **cells)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "prewarm: 2 compiling cells left; 2 processes" in done.stdout, done.stdout
    assert "prewarm: 2 cells compiled ahead" in done.stdout, done.stdout
    assert "prewarm: the timed run takes first the 2 cells compiled whole" in done.stdout, done.stdout
    assert "study: complete" in done.stdout, done.stdout
    # The timed run took them with --first (its segment's command line records it).
    ready = (tmp_path / "out" / "study" / "prewarm" / "ready.filter").read_text()
    for phase in ("inference", "training"):
        assert re.search(ready, f"jax/alexnet/fp32/b1/{phase}/r0"), ready
    segments = [json.loads(line.split(" ", 1)[1]) for line in (study / "study.h5.journal").read_text().splitlines()[1:]]
    command_line = next(r for r in segments if r.get("type") == "segment")["attributes"]["command_line"]
    assert "--first" in command_line, command_line
    assert sorted(p.name for p in (tmp_path / "out" / "study" / "prewarm").glob("*.h5")) == [
        "prewarm_0.h5", "prewarm_1.h5"]
    loaded = load(study / "study.h5")
    table = loaded.cells.merge(cube_extras.decisions(loaded), on=list(CELL_DIMS))
    assert len(table) == 2 and set(table["status"]) == {"ok"}
    for decisions in table["decisions"]:
        assert "compile_cache=" in decisions and "(warm:" in decisions, decisions


def test_the_timed_run_waits_for_the_job_beside_the_prewarm(tmp_path, crossbench_binary):
    """STUDY_WAIT_FILE: a GPU job that is not timed runs beside the prewarm; the timed run
    starts only once that job has created the file, so no timed cell shares the GPU with it."""
    import time
    study = tmp_path / "tree" / "study"
    flag = tmp_path / "tests.done"
    beside = subprocess.Popen(["bash", "-c", f"sleep 4; date +%s.%N > {flag}"])
    started = time.time()
    done = stage(tmp_path, crossbench_binary, study, STUDY_ENGINES="cudnn", STUDY_NETWORKS="alexnet",
                 STUDY_PRECISIONS="fp32", STUDY_WAIT_FILE=str(flag))
    beside.wait()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "study: waited" in done.stdout and f"for {flag}" in done.stdout, done.stdout
    assert "study: complete" in done.stdout, done.stdout
    created = float(flag.read_text())
    journal = (study / "study.h5.journal").read_text().splitlines()
    segment = next(json.loads(line.split(" ", 1)[1]) for line in journal[1:]
                   if json.loads(line.split(" ", 1)[1]).get("type") == "segment")
    assert created >= started + 3
    # The run segment began after the job beside the prewarm had finished.
    from datetime import datetime
    began = datetime.fromisoformat(segment["attributes"]["started"].replace("Z", "+00:00")).timestamp()
    assert began >= created - 0.5, (began, created)


def test_the_compile_cache_travels_packed_and_the_next_call_compiles_warm(tmp_path, crossbench_binary,
                                                                          jax_interpreter):
    """The cache stays out of what a call carries (STUDY_DIR/compile-cache is git-ignored) and comes back
    packed (compile-cache.tar.xz): carried into STUDY_DIR, the next call unpacks it and compiles warm
    (the JAX worker on the CPU; a second cube of the same cells, STUDY_NAME=again)."""
    import shutil
    from crossbench_analysis import cube_extras
    from crossbench_analysis.cube import CELL_DIMS

    study = tmp_path / "tree" / "study"
    cells = dict(STUDY_ENGINES="jax", STUDY_NETWORKS="alexnet", STUDY_PRECISIONS="fp32", STUDY_BATCHES="1",
                 STUDY_GRACE="1", STUDY_JAX_WORKER=f"{jax_interpreter} -u {{workers}}/jax/worker.py",
                 STUDY_STEPS="2", STUDY_ARGS="--set measure.max_steps=2 --set measure.warmup=1")
    first = stage(tmp_path, crossbench_binary, study, **cells)
    assert first.returncode == 0, first.stdout + first.stderr
    pack = tmp_path / "out" / "study" / "compile-cache.tar.xz"
    assert f"back in {tmp_path / 'out'}/study/compile-cache.tar.xz" in first.stdout, first.stdout
    ignored = subprocess.run(["git", "check-ignore", "-q", "bench/results/x/compile-cache/f"], cwd=REPO)
    assert ignored.returncode == 0, "the unpacked cache must not travel with the working tree"
    # The next call: a fresh machine has no unpacked cache, only what the tree carried.
    shutil.rmtree(study / "compile-cache")
    shutil.copy(pack, study / "compile-cache.tar.xz")
    second = stage(tmp_path, crossbench_binary, study, STUDY_NAME="again", **cells)
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"again: unpacked {study}/compile-cache.tar.xz" in second.stdout, second.stdout
    hits = {}
    for name in ("study", "again"):
        loaded = load(study / f"{name}.h5")
        table = loaded.cells.merge(cube_extras.decisions(loaded), on=list(CELL_DIMS))
        assert len(table) == 2 and set(table["status"]) == {"ok"}
        found = [re.search(r"persistent cache hits=(\d+) of (\d+) compiles", d) for d in table["decisions"]]
        assert all(found), list(table["decisions"])
        hits[name] = [(int(m.group(1)), int(m.group(2))) for m in found]
    assert sum(h for h, _ in hits["study"]) == 0, hits  # the first call compiled everything
    assert all(h == n and n > 0 for h, n in hits["again"]), hits  # the next one, from the carried pack


def test_a_cache_too_large_to_come_back_comes_back_without_tritons_compiled_kernels(tmp_path, crossbench_binary):
    """max-autotune's caches (1.0-1.6 GiB, 47-73 MiB packed on the H200: bench/results/2026-12-08) are mostly
    Triton's compiled candidates; without triton/ the pack keeps Inductor's directory (the autotuning's
    choices, the kernels' sources, the FX graph entries), so a compile longer than a call goes on in the
    next. Incompressible bytes stand in for the cubins here; the cells are cudnn's (unsupported: fast)."""
    import tarfile

    study = tmp_path / "tree" / "study"
    inductor = study / "compile-cache" / "inductor" / "ab"
    triton = study / "compile-cache" / "triton" / "cd"
    inductor.mkdir(parents=True)
    triton.mkdir(parents=True)
    (inductor / "cabcdef.py").write_text("# a kernel's source\n" * 100)
    (inductor / "cabcdef.best_config").write_text('{"XBLOCK": 1024, "num_warps": 4}')
    (triton / "kernel.cubin").write_bytes(os.urandom(3 * 1024 * 1024))
    cudnn_only = dict(STUDY_ENGINES="cudnn", STUDY_NETWORKS="alexnet", STUDY_PRECISIONS="fp32")
    lean = stage(tmp_path, crossbench_binary, study, STUDY_CACHE_MAX_MB="1", **cudnn_only)
    assert lean.returncode == 0, lean.stdout + lean.stderr
    pack = tmp_path / "out" / "study" / "compile-cache.tar.xz"
    assert re.search(r"study: compile cache \d+ MiB, packed 3 MiB: too large \(STUDY_CACHE_MAX_MB=1\); without "
                     r"Triton's compiled kernels \(triton/\) packed 0 MiB: back in \S+compile-cache.tar.xz",
                     lean.stdout), lean.stdout
    with tarfile.open(pack) as packed:
        names = set(packed.getnames())
    assert "compile-cache/inductor/ab/cabcdef.best_config" in names and "compile-cache/inductor/ab/cabcdef.py" in names
    assert not any(name.startswith("compile-cache/triton/") for name in names), names
    # Neither fits: nothing comes back, and the log says the next call compiles cold.
    (inductor / "big.py").write_bytes(os.urandom(2 * 1024 * 1024))
    cold = stage(tmp_path, crossbench_binary, study, STUDY_CACHE_MAX_MB="1", **cudnn_only)
    assert cold.returncode == 0, cold.stdout + cold.stderr
    assert "MiB without triton/: too large to come back (STUDY_CACHE_MAX_MB=1); the next call compiles cold" \
        in cold.stdout, cold.stdout
    assert not pack.exists()


def test_a_pack_larger_than_a_returned_file_comes_back_in_parts_that_the_next_call_joins(tmp_path, crossbench_binary):
    """A call returns files of 16 MiB at most: a pack over 15 MiB (within STUDY_CACHE_MAX_MB) comes back in parts
    of 15 MiB (ResNet-50's max-autotune cache packed to 55 MiB, 2026-12-08 call 61), and the next call, given the
    parts, joins and unpacks them. Incompressible bytes stand in for the cache; the cells are cudnn's (fast)."""
    import hashlib
    import shutil

    study = tmp_path / "tree" / "study"
    inductor = study / "compile-cache" / "inductor" / "ab"
    inductor.mkdir(parents=True)
    (inductor / "autotune.bin").write_bytes(os.urandom(20 * 1024 * 1024))
    original = hashlib.sha256((inductor / "autotune.bin").read_bytes()).hexdigest()
    cudnn_only = dict(STUDY_ENGINES="cudnn", STUDY_NETWORKS="alexnet", STUDY_PRECISIONS="fp32")
    first = stage(tmp_path, crossbench_binary, study, STUDY_CACHE_MAX_MB="40", **cudnn_only)
    assert first.returncode == 0, first.stdout + first.stderr
    out = tmp_path / "out" / "study"
    parts = sorted(out.glob("compile-cache.tar.xz.*"))
    assert [p.name for p in parts] == ["compile-cache.tar.xz.00", "compile-cache.tar.xz.01"], first.stdout
    assert all(p.stat().st_size <= 15 * 1024 * 1024 for p in parts)
    assert not (out / "compile-cache.tar.xz").exists()
    assert "back in 2 parts" in first.stdout, first.stdout
    # The next call: the tree carries the parts, not the unpacked cache.
    shutil.rmtree(study / "compile-cache")
    for part in parts:
        shutil.copy(part, study / part.name)
    second = stage(tmp_path, crossbench_binary, study, STUDY_NAME="again", STUDY_CACHE_MAX_MB="40", **cudnn_only)
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"again: unpacked {study}/compile-cache.tar.xz from 2 parts" in second.stdout, second.stdout
    assert hashlib.sha256((inductor / "autotune.bin").read_bytes()).hexdigest() == original
