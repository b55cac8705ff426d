"""bench/gpu_framework_overhead.py's standalone loops compile from the compile cache crossbench's
workers use (the workers' own JaxCache / InductorCache), so a loop whose graph the cache holds loads it
instead of compiling again, and each row says which cache and what it found. The JAX loop, on this
machine's CPU: a first process compiles cold into the cache, a second loads every compile from it."""
import json
import pathlib
import re
import subprocess

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
