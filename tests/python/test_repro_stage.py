"""The `repro` stage of bench/gpu_session.sh (issue 24's reproducibility: seed2017's cudnn row in several cold
processes), run here on the CPU build, where every cudnn cell is recorded unsupported at once: what the stage
hands each process. REPRO_SAME_PLANS=1 gives every run one algorithm cache file, which the first run measures
and the later ones replay, so that the runs differ in nothing the search chooses; without it each run searches
on its own, as before. Each run has its own empty CUDA JIT cache (the driver's on-disk cache of compiled kernels
is a cache the processes would otherwise share), removed after it; REPRO_JIT_CACHE=shared keeps the machine's."""
import os
import pathlib
import subprocess

import h5py

REPO = pathlib.Path(__file__).resolve().parents[2]


def repro(tmp_path, crossbench_binary, **environment):
    out = tmp_path / "out"
    env = dict(os.environ, OUT=str(out), CB=str(crossbench_binary), TLIMIT="120", STEPS="5", REPRO_RUNS="2",
               REPRO_PRECISIONS="fp32", REPRO_ARGS="--set matrix.networks=alexnet", **environment)
    result = subprocess.run(["bash", str(REPO / "bench" / "gpu_session.sh"), "repro"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def algorithm_cache_of(cube):
    with h5py.File(cube, "r") as f:
        value = f.attrs["engine_algo_cache"]
    return value.decode() if isinstance(value, bytes) else str(value)


def test_same_plans_gives_every_run_one_algorithm_cache(tmp_path, crossbench_binary):
    out = repro(tmp_path, crossbench_binary, REPRO_SAME_PLANS="1", REPRO_NAME="same")
    for run in (1, 2):
        assert algorithm_cache_of(out / f"same_{run}.h5") == str(out / "same_algorithms.json")


def test_without_it_each_run_searches_on_its_own(tmp_path, crossbench_binary):
    out = repro(tmp_path, crossbench_binary, REPRO_NAME="own")
    for run in (1, 2):
        assert algorithm_cache_of(out / f"own_{run}.h5") == ""
    assert not (out / "own_algorithms.json").exists()


def jit_cache_line(log):
    first = log.read_text().splitlines()[0]
    assert first.startswith("jit_cache "), first
    return first


def test_every_run_has_its_own_empty_jit_cache(tmp_path, crossbench_binary):
    out = repro(tmp_path, crossbench_binary, REPRO_NAME="fresh")
    paths = []
    for run in (1, 2):
        line = jit_cache_line(out / f"fresh_{run}.log")
        assert line.startswith("jit_cache fresh CUDA_CACHE_PATH=/tmp/cb_jit_cache."), line
        paths.append(line.split("=", 1)[1])
        assert not pathlib.Path(paths[-1]).exists(), "removed after its run"
        assert (out / f"fresh_{run}.h5").exists()
    assert paths[0] != paths[1]


def test_shared_keeps_the_machines_jit_cache(tmp_path, crossbench_binary):
    out = repro(tmp_path, crossbench_binary, REPRO_NAME="shared", REPRO_JIT_CACHE="shared",
                CUDA_CACHE_PATH=str(tmp_path / "machine_cache"))
    for run in (1, 2):
        assert jit_cache_line(out / f"shared_{run}.log") == f"jit_cache shared CUDA_CACHE_PATH={tmp_path / 'machine_cache'}"
