"""bench/repro_cubes.py on real cubes: two oneDNN runs of AlexNet at batch 1
(both phases) as two "processes"; max/min of the medians per cell read back
with h5py, the plan comparison that ignores measured times, the cache
hits/misses and the seed logs' wall times."""
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "repro_cubes.py"
sys.path.insert(0, str(REPO / "bench"))
from repro_cubes import plan_of  # noqa: E402
from test_bench_pytorch_ratio import JOB, medians  # noqa: E402  the same tiny oneDNN cube

def run_processes(directory, crossbench_binary, *options):
    """Two cubes of the tiny oneDNN job, each from its own crossbench process (run0.h5, run1.h5)."""
    job = directory / "job.ini"
    job.write_text(JOB)
    outputs = []
    for i in range(2):
        output = directory / f"run{i}.h5"
        subprocess.run([str(crossbench_binary), "run", "--job", str(job), *options, "--output", str(output),
                        "--quiet"], check=True, timeout=300)
        outputs.append(output)
    return outputs


@pytest.fixture(scope="module")
def cubes(tmp_path_factory, crossbench_binary):
    return run_processes(tmp_path_factory.mktemp("repro"), crossbench_binary)


def run_script(*arguments):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, arguments)], capture_output=True, text=True,
                          timeout=60)


def test_spread_is_max_over_min_of_each_cells_medians(cubes):
    a, b = medians(cubes[0]), medians(cubes[1])
    result = run_script(*cubes, "--engine", "onednn", "--limit", "1000")
    assert result.returncode == 0, result.stderr
    lines = {line.split()[2]: line.split() for line in result.stdout.splitlines() if line.startswith("alexnet")}
    assert sorted(lines) == ["inference", "training"]
    for phase, fields in lines.items():
        assert float(fields[4]) == pytest.approx(a[phase], abs=5e-4)
        assert float(fields[5]) == pytest.approx(b[phase], abs=5e-4)
        assert float(fields[6]) == pytest.approx(max(a[phase], b[phase]) / min(a[phase], b[phase]), abs=5e-4)
        assert float(fields[7]) == pytest.approx(b[phase] / a[phase], abs=5e-4)
        assert fields[8] == "same"  # the same engine and options: the same plan
    assert "2 cells in all 2 cubes" in result.stdout
    # A CPU cube records no SM clock, nor one of a search, nor a GPU temperature: the columns say so for
    # each cube, and nothing is marked throttled.
    assert "SM clock [MHz]" in result.stdout and "search SM clock [MHz]" in result.stdout
    assert result.stdout.splitlines()[0].endswith("search SM clock [MHz]  max temp [C]  sessions max/min")
    for fields in lines.values():
        # clock, search clock, temperature and (each cell measured once) sessions, for each of the two cubes
        assert fields[-8:] == ["-"] * 8


def test_the_clock_column_names_each_cubes_clock_and_throttle():
    sys.path.insert(0, str(REPO / "bench"))
    from repro_cubes import clock_text  # noqa: E402
    assert clock_text({"mean_sm_clock_mhz": 1932.4, "throttled": 1}) == "1932T"
    assert clock_text({"mean_sm_clock_mhz": 1980.0, "throttled": 0}) == "1980"
    assert clock_text({"mean_sm_clock_mhz": float("nan"), "throttled": -1}) == "-"


def test_the_temperature_column_names_each_cubes_hottest_temperature():
    sys.path.insert(0, str(REPO / "bench"))
    from repro_cubes import temperature_text  # noqa: E402
    assert temperature_text({"max_temperature_c": 57.4}) == "57"
    assert temperature_text({"max_temperature_c": 61.0}) == "61"
    assert temperature_text({"max_temperature_c": float("nan")}) == "-"  # not recorded (CPU, no NVML)
    assert temperature_text({}) == "-"


def test_the_table_reads_each_cubes_temperature_and_an_older_cube_shows_a_dash(tmp_path):
    # Two single-cell cubes by the h5py test writer: one with the temperature, one written before it
    # was recorded (no max_temperature_c dataset at all).
    h5py = pytest.importorskip("h5py")
    sys.path.insert(0, str(REPO / "analysis"))
    from crossbench_analysis.synthetic import ok_cell, write_cube  # noqa: E402
    axes = {"device": ["NVIDIA H200 (132 SMs, sm_9.0, 140.0 GiB)"], "engine": ["cudnn"], "network": ["alexnet"],
            "precision": ["fp32"], "batch": [64], "phase": ["inference"], "replica": [0]}
    coords = {d: v[0] for d, v in axes.items()}
    paths = []
    for i, (median, temperature) in enumerate(((1.0, 58.0), (1.01, 63.0))):
        cell = ok_cell(coords, [median] * 5, 64, mean_sm_clock_mhz=1980.0, max_temperature_c=temperature,
                       throttled=0)
        cell["decisions"] = "conv1:fwd=IMPLICIT_GEMM/tc"
        cell["message"] = "stopped by ci_target; loss 6.9"
        path = tmp_path / f"run{i}.h5"
        write_cube(path, axes, [cell], [])
        paths.append(path)
    with h5py.File(paths[1], "r+") as f:
        del f["max_temperature_c"]
    result = run_script(*paths, "--limit", "1.05")
    assert result.returncode == 0, result.stdout + result.stderr
    row = next(line.split() for line in result.stdout.splitlines() if line.startswith("alexnet"))
    assert row[-8:] == ["1980", "1980", "-", "-", "58", "-", "-", "-"]


def test_the_sessions_column_is_each_cubes_spread_of_its_repetitions():
    from repro_cubes import sessions_text  # noqa: E402
    assert sessions_text({"repetition_medians_ms": [2.098, 2.067, 2.090, 1.981]}) == f"{2.098 / 1.981:.3f}"
    assert sessions_text({"repetition_medians_ms": [1.5]}) == "-"  # one session: no spread to show
    assert sessions_text({}) == "-"  # a cube without repetitions


def test_the_sessions_column_reads_the_repetitions_each_cube_recorded(tmp_path, crossbench_binary):
    # Two real cubes, each cell measured in three fresh sessions (--repetitions 3): the column is each cube's
    # max/min of the medians it stored in repetition_median_ms.
    h5py = pytest.importorskip("h5py")
    paths = run_processes(tmp_path, crossbench_binary, "--repetitions", "3")
    result = run_script(*paths, "--engine", "onednn", "--limit", "1000")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {line.split()[2]: line.split() for line in result.stdout.splitlines() if line.startswith("alexnet")}
    assert sorted(rows) == ["inference", "training"]
    for i, path in enumerate(paths):
        with h5py.File(path, "r") as f:
            phases = [p.decode() if isinstance(p, bytes) else p for p in f["phase"][()]]
            stored = f["repetition_median_ms"][()]
            for phase, fields in rows.items():
                medians = [v for v in stored[(0, 0, 0, 0, 0, phases.index(phase), 0, 0)] if v == v]
                assert len(medians) == 3
                assert fields[-2 + i] == f"{max(medians) / min(medians):.3f}"


def test_a_spread_over_the_limit_fails(cubes):
    result = run_script(*cubes, "--engine", "onednn", "--limit", "1.0")
    a, b = medians(cubes[0]), medians(cubes[1])
    if all(a[p] == b[p] for p in a):
        pytest.skip("both runs measured identical medians")
    assert result.returncode == 1 and "over 1.0" in result.stdout


def test_the_search_clock_is_read_and_is_no_part_of_the_plan():
    sys.path.insert(0, str(REPO / "bench"))
    from repro_cubes import search_clock_text  # noqa: E402
    searched = ("algo=exhaustive algo_cache=memory(hits=0,misses=9) search_tie=0.001 search_sm_clock=1755..1961MHz"
                "(min..mean of 84 samples, throttled) graph_api_graphs=3(shared 1) "
                "graph_api_setup=create:0.41s,build:24/3.10s,runtime_compiled:8/2.05s; conv1:fwd=IMPLICIT_GEMM/tc")
    replayed = ("algo=exhaustive algo_cache=/c.json(hits=9,misses=0) search_tie=0.001 graph_api_graphs=3(shared 1) "
                "graph_api_setup=create:0.38s,build:3/0.52s,runtime_compiled:1/0.31s; conv1:fwd=IMPLICIT_GEMM/tc")
    assert search_clock_text(searched) == "1755..1961"
    assert search_clock_text(replayed) == "-"
    assert plan_of(searched) == plan_of(replayed) and "search_sm_clock" not in plan_of(searched)
    # The Graph API's set-up cost (a search builds every candidate, a replay its choices) is no part of it.
    assert "graph_api_setup" not in plan_of(searched) and "graph_api_graphs=3(shared 1)" in plan_of(replayed)


def test_plan_ignores_where_the_pool_lies():
    # call 69: the spacer arm's cubes read "DIFF" for six cells whose only difference was this token.
    first = "layout=nhwc graphs=on pool=321.42 MiB pool_spacer=2048MiB(session 2 of the cell) graph_api_graphs=13(shared 0); conv1:fwd=x"
    second = first.replace("pool_spacer=2048MiB(session 2", "pool_spacer=0MiB(session 0")
    assert plan_of(first) == plan_of(second)
    assert "pool_spacer" not in plan_of(first) and "graph_api_graphs=13(shared 0); conv1:fwd=x" in plan_of(first)


def test_plan_ignores_measured_times_and_cache_use():
    first = ("layout=nhwc algo=exhaustive workspace=12 MiB search_arena=1 GiB algo_cache=memory(hits=0,misses=9); "
             "conv1:fwd=IMPLICIT_GEMM/tc{IMPLICIT_GEMM/tc 0.1012, WINOGRAD/tc 0.1043}[im2col_gemm 0.2ms>=0.1ms],"
             "bwd_filter=cublas_gemm(0.05ms<0.06ms ALGO_1),bias_grad=kernel(kernel 0.01ms, cudnn 0.02ms)")
    replay = ("layout=nhwc algo=exhaustive workspace=12 MiB algo_cache=/c.json(hits=9,misses=0); "
              "conv1:fwd=IMPLICIT_GEMM/tc{IMPLICIT_GEMM/tc 0.1007, WINOGRAD/tc 0.105}[im2col_gemm 0.21ms>=0.1ms],"
              "bwd_filter=cublas_gemm(0.049ms<0.061ms ALGO_1),bias_grad=kernel(kernel 0.011ms, cudnn 0.02ms)")
    other = first.replace("fwd=IMPLICIT_GEMM/tc{", "fwd=WINOGRAD/tc{")
    assert plan_of(first) == plan_of(replay)
    assert plan_of(first) != plan_of(other)
    assert "IMPLICIT_GEMM/tc" in plan_of(first) and "cublas_gemm" in plan_of(first)


def test_plan_keeps_the_graph_engine_and_cublaslt_configurations():
    # call 17: two overfeat tf32 cubes whose conv4 ran different engine configurations read "same"
    # while the plan dropped every parenthesis holding a time.
    first = ("conv4:fwd=graph(eng51_k2=0_k13=0_k27=8 0.227008ms<0.281152ms IMPLICIT_PRECOMP_GEMM)+bias+relu"
             "{IMPLICIT_PRECOMP_GEMM/default 0.2812};fc6:fwd=cublasLt(algo=43 tile=15 splitk=1 0.1208ms vs "
             "cublasGemmEx+kernel 0.1322ms)+bias+relu")
    retimed = ("conv4:fwd=graph(eng51_k2=0_k13=0_k27=8 0.225632ms<0.280416ms IMPLICIT_PRECOMP_GEMM)+bias+relu"
               "{IMPLICIT_PRECOMP_GEMM/default 0.2804};fc6:fwd=cublasLt(algo=43 tile=15 splitk=1 0.1201ms vs "
               "cublasGemmEx+kernel 0.1334ms)+bias+relu")
    other_engine = retimed.replace("eng51_k2=0_k13=0_k27=8", "eng51_k2=9_k13=0_k27=4")
    other_tile = retimed.replace("tile=15", "tile=20")
    assert plan_of(first) == plan_of(retimed)
    assert plan_of(first) != plan_of(other_engine)
    assert plan_of(first) != plan_of(other_tile)
    assert "eng51_k2=0_k13=0_k27=8" in plan_of(first) and "ms" not in plan_of(first)
    # Since the incumbent is printed as compared (the legacy forward and the epilogue a fused graph saves):
    # the times go, the names and the "+epilogue" mark stay.
    fused = ("layer1.0.downsample.conv:fwd=graph(eng4_k24=40 0.149728ms<0.251334ms IMPLICIT_PRECOMP_GEMM "
             "0.080224ms+epilogue)+bn(folded)+bias+add+relu")
    refused = fused.replace("0.149728ms<0.251334ms", "0.150112ms<0.250990ms").replace("0.080224ms", "0.079990ms")
    assert plan_of(fused) == plan_of(refused)
    assert plan_of(fused) == ("layer1.0.downsample.conv:fwd=graph(eng4_k24=40 IMPLICIT_PRECOMP_GEMM +epilogue)"
                              "+bn(folded)+bias+add+relu")


def test_wall_times_from_the_seed_logs(tmp_path):
    cold, warm = tmp_path / "cold.log", tmp_path / "warm.log"
    cold.write_text("[42/42] ...\ncrossbench: wrote x.h5 (42 cells: 42 ok)\nseed wall_s 143\n")
    warm.write_text("crossbench: wrote y.h5\nseed wall_s 57\n")
    result = run_script("--logs", cold, warm)
    assert result.returncode == 0, result.stderr
    assert f"{cold}: 143 s wall" in result.stdout and f"{warm}: 57 s wall" in result.stdout


def test_the_graph_api_set_up_is_summed_over_a_cubes_cells():
    from repro_cubes import graph_api_setup_totals, setup_text  # noqa: E402
    cells = ["algo=exhaustive graph_api_graphs=3(shared 1) graph_api_setup=create:0.40s,build:24/3.10s,"
             "runtime_compiled:8/2.05s,restored:0/0.00s,kept:3; conv1:fwd=X",
             "algo=exhaustive graph_api_graphs=2(shared 0) graph_api_setup=create:0.10s,build:2/0.20s,"
             "runtime_compiled:0/0.00s,restored:4/0.12s,kept:0; conv1:fwd=X",
             # a cube of the build before restored/kept: its fields count, the missing ones as 0
             "graph_api_setup=create:0.50s,build:1/0.70s,runtime_compiled:1/0.60s; fc:fwd=Y",
             "algo=heuristic; conv1:fwd=IMPLICIT_GEMM"]  # no Graph API graphs: no token
    totals = graph_api_setup_totals(cells)
    assert totals[0] == pytest.approx(1.0) and totals[1] == 27 and totals[2] == pytest.approx(4.0)
    assert totals[3] == 9 and totals[4] == pytest.approx(2.65)
    assert totals[5] == 4 and totals[6] == pytest.approx(0.12) and totals[7] == 3
    assert setup_text(totals) == ("Graph API set-up: create 1.0 s, 27 plans built in 4.0 s (runtime-compiled 9 in 2.6 s), "
                                  "4 restored in 0.12 s, 3 kept")
    assert graph_api_setup_totals(["algo=heuristic; conv1:fwd=X"]) is None


def test_graphs_created_from_their_cached_configuration_are_summed_and_no_part_of_the_plan():
    from repro_cubes import graph_api_setup_totals, plan_of, setup_text  # noqa: E402
    searched = ("algo=exhaustive graph_api_graphs=3(shared 1) graph_api_setup=create:0.40s,build:24/3.10s,"
                "runtime_compiled:8/2.05s,restored:0/0.00s,kept:0,configured:0/0.00s; conv1:fwd=graph(eng1_k2=3 0.2ms)")
    replayed = ("algo=exhaustive graph_api_graphs=3(shared 1) graph_api_setup=create:0.05s,build:2/0.30s,"
                "runtime_compiled:1/0.25s,restored:0/0.00s,kept:0,configured:2/0.05s; conv1:fwd=graph(eng1_k2=3 0.2ms)")
    totals = graph_api_setup_totals([searched, replayed])
    assert totals[8] == 2 and totals[9] == pytest.approx(0.05)
    assert setup_text(totals).endswith(", 2 graphs created from their cached configuration in 0.05 s")
    assert plan_of(searched) == plan_of(replayed) and "graph_api_graphs=3(shared 1)" in plan_of(replayed)


def test_cpu_cubes_print_no_graph_api_set_up(cubes):
    result = run_script(*cubes, "--engine", "onednn", "--limit", "1000")
    assert result.returncode == 0, result.stderr
    assert "Graph API set-up" not in result.stdout  # oneDNN cells have no Graph API graphs


def test_the_jit_cache_a_cell_found_is_read_and_no_part_of_the_plan():
    from repro_cubes import JIT_CACHE, graph_api_setup_totals, plan_of  # noqa: E402
    fresh = ("algo=exhaustive graph_api_graphs=3(shared 1) graph_api_setup=create:0.40s,build:24/3.10s,"
             "runtime_compiled:8/2.05s,restored:0/0.00s,kept:0,configured:0/0.00s,jit_cache=/tmp/cb_jit_cache.x1; "
             "conv1:fwd=graph(eng1_k2=3 0.2ms)")
    shared = fresh.replace("jit_cache=/tmp/cb_jit_cache.x1", "jit_cache=default").replace("8/2.05s", "8/1.10s")
    assert JIT_CACHE.search(fresh).group(1) == "/tmp/cb_jit_cache.x1"
    assert JIT_CACHE.search(shared).group(1) == "default"
    assert JIT_CACHE.search("algo=heuristic; conv1:fwd=X") is None
    assert graph_api_setup_totals([fresh])[4] == pytest.approx(2.05), "the fields before it parse as before"
    assert plan_of(fresh) == plan_of(shared), "where the compiled kernels were cached is no part of the plan"
