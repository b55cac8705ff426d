"""The framework workers' persistent compile caches (options schema `engine.compile_cache`,
src/workers/common/compile_cache.py): JAX's persistent compilation cache found warm by a second worker
process, every cell's decisions saying cold or warm, compile time staying untimed; a cache directory
that cannot be made failing the cell by name; torch.compile's cache settings degrading with a clear
text on a torch without Inductor (Debian's 1.13 here; the GPU machine runs torch 2.11); and `crossbench
run` resolving the default `<output>.cache` next to the cube and recording it."""
import os
import pathlib
import re
import subprocess
import sys

import h5py
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
if str(REPO / "src" / "workers") not in sys.path:
    sys.path.insert(0, str(REPO / "src" / "workers"))

from common import compile_cache  # noqa: E402
from common.protocol import WorkerError  # noqa: E402
from test_jax_worker import JAX_WORKER, converse, jax_worker_setting  # noqa: E402,F401
from test_jax_worker import jax_interpreter  # noqa: E402,F401  (the fixture)
from test_worker_protocol import small_graph  # noqa: E402

PYTHON = "/usr/bin/python3"


def cache_text(decisions):
    found = re.search(r"compile_cache=(\S+) \(([^)]*)\)", decisions)
    assert found, decisions
    return found.group(1), found.group(2)


def test_count_entries_and_the_texts(tmp_path):
    assert compile_cache.count_entries(tmp_path / "absent") == 0
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "one").write_text("x")
    (tmp_path / "a" / "b" / "two").write_text("y")
    assert compile_cache.count_entries(tmp_path) == 2
    assert compile_cache.describe("/c", 0, 5) == "compile_cache=/c (cold: empty before, 5 entries after)"
    assert compile_cache.describe("/c", 5, 7, "hits=1") == "compile_cache=/c (warm: 5 entries before, 7 after; hits=1)"


def test_a_directory_that_cannot_be_made_fails_naming_the_setting(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(WorkerError) as raised:
        compile_cache.framework_directory(str(blocker), "jax")
    assert raised.value.status == "failed"
    assert "engine.compile_cache" in raised.value.message and str(blocker / "jax") in raised.value.message


def test_jax_second_process_finds_the_cache_warm(tmp_path, jax_interpreter):
    cache = tmp_path / "cache"
    graph = small_graph()
    first = converse(jax_interpreter, JAX_WORKER, graph, compile_cache=str(cache))
    assert first["prepared"]["status"] == "ok", first["prepared"]
    directory, state = cache_text(first["stepped"]["decisions"])
    assert directory == str(cache)
    assert state.startswith("cold: empty before"), state
    assert "persistent cache hits=0 of" in state, state
    written = compile_cache.count_entries(cache / "jax")
    assert written > 0  # every compile kept, however fast (min compile time 0, no size floor)
    # A fresh worker process: the step's compile comes from the cache.
    second = converse(jax_interpreter, JAX_WORKER, graph, compile_cache=str(cache))
    _, state = cache_text(second["stepped"]["decisions"])
    assert state.startswith(f"warm: {written} entries before"), state
    hits = int(re.search(r"persistent cache hits=(\d+) of (\d+) compiles", state).group(1))
    assert hits >= 1, state
    # Compile time is preparation, reported apart; the timed steps are the ones asked for.
    assert re.search(r"compile=\d+\.\d+s\(untimed\)", second["stepped"]["decisions"])
    assert len(second["stepped"]["samples_ms"]) == 2
    # The same numbers either way: the cached executable is the compiled one.
    assert second["checked"]["loss"] == pytest.approx(first["checked"]["loss"], rel=1e-6)


def test_jax_without_a_cache_says_every_compile_is_cold(tmp_path, jax_interpreter):
    replies = converse(jax_interpreter, JAX_WORKER, small_graph(), compile_cache="none")
    assert "compile_cache=none(jax's persistent compilation cache off: every compile cold)" in \
        replies["stepped"]["decisions"]


def torch_version():
    result = subprocess.run([PYTHON, "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else None


needs_torch = pytest.mark.skipif(torch_version() is None, reason="Debian's python3-torch is not installed")


@needs_torch
def test_inductor_cache_points_every_cache_at_the_directory(tmp_path, monkeypatch):
    """On a torch without Inductor (1.13) each missing cache flag is named; on torch 2.x the flags are
    set. Either way Inductor and Triton are pointed at the cell's directory before the compile."""
    import torch
    from pytorch.worker import CACHE_FLAGS, InductorCache

    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    cache = InductorCache(torch, str(tmp_path))
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor")
    assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "triton")
    cache.compiled()
    text = cache.describe()
    assert text.startswith(f"compile_cache={tmp_path} (cold: empty before, 0 entries after")
    for module_name, flag, since in CACHE_FLAGS:
        try:
            module = __import__(module_name, fromlist=[flag])
        except ImportError:
            module = None
        if module is not None and hasattr(module, flag):
            assert getattr(module, flag) is True
        else:
            assert f"{flag}: not in torch {torch.__version__} (since {since})" in text


@needs_torch
def test_eager_cells_say_nothing_is_compiled():
    import torch
    from pytorch import worker as pt_worker
    from test_worker_protocol import prepare_request

    session = pt_worker.PytorchSession(torch, prepare_request(), compile_model=False)
    assert "compile_cache=unused(eager: nothing is compiled)" in session.decisions()
    session.release()


def run_jax_cell(run_crossbench, python, output, *extra):
    return run_crossbench("run", "--set", "matrix.engines=jax", "--set", "matrix.networks=alexnet",
                          "--set", "matrix.precisions=fp32", "--set", "matrix.batches=1",
                          "--set", "matrix.phases=inference", "--set", "measure.warmup=1",
                          "--set", "measure.min_steps=2", "--set", "measure.max_steps=2",
                          "--set", jax_worker_setting(python), "--quiet", *extra, "--output", output)


def cell_decisions(cube):
    with h5py.File(cube, "r") as f:
        attribute = f.attrs["engine_compile_cache"]
        decisions = f["decisions"][...].ravel()[0]
    as_text = lambda v: v.decode() if isinstance(v, bytes) else str(v)  # noqa: E731
    return as_text(attribute), as_text(decisions)


def test_a_run_keeps_the_cache_next_to_its_cube_and_records_it(run_crossbench, tmp_path, jax_interpreter):
    output = tmp_path / "runs" / "jax.h5"
    output.parent.mkdir()
    first = run_jax_cell(run_crossbench, jax_interpreter, output)
    assert first.returncode == 0, first.stdout + first.stderr
    attribute, decisions = cell_decisions(output)
    assert attribute == f"{output}.cache"  # the default, <output>.cache, named absolutely
    assert cache_text(decisions)[1].startswith("cold: empty before"), decisions
    second = run_jax_cell(run_crossbench, jax_interpreter, output, "--overwrite")
    assert second.returncode == 0, second.stdout + second.stderr
    _, decisions = cell_decisions(output)
    assert cache_text(decisions)[1].startswith("warm:"), decisions
    # none: no directory is made or named.
    third = run_jax_cell(run_crossbench, jax_interpreter, tmp_path / "none.h5", "--compile-cache", "none")
    assert third.returncode == 0, third.stdout + third.stderr
    attribute, decisions = cell_decisions(tmp_path / "none.h5")
    assert attribute == "none" and "compile_cache=none(" in decisions
    assert not (tmp_path / "none.h5.cache").exists()
