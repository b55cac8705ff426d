"""The crossbench command line: bad input gets exit 2, a message that names the
problem, and no cube; the info commands print the facts; a real run writes a
cube through the same path on one rank and on two."""
import json
import pathlib

import h5py
import numpy as np
import pytest
import xarray
from conftest import TINY_JOB


def write_job(directory, text):
    path = pathlib.Path(directory) / "job.ini"
    path.write_text(text)
    return path


def with_matrix_line(key, value):
    lines = [f"{key} = {value}" if line.startswith(key + " ") else line for line in TINY_JOB.splitlines()]
    return "\n".join(lines) + "\n"


BAD_JOBS = {
    "unknown section": (TINY_JOB + "\n[colour]\nhue = red\n", ["unknown section [colour]", "valid sections"]),
    "unknown key": (TINY_JOB.replace("warmup = 1", "warmpu = 1"), ["unknown key 'warmpu'", "[measure]", "valid keys", "warmup"]),
    "unknown network": (with_matrix_line("networks", "alexnet, lenet"), ["'lenet'", "alexnet", "resnet152"]),
    "unknown engine": (with_matrix_line("engines", "tensorflow"), ["'tensorflow'", "onednn", "auto"]),
    "unknown precision": (with_matrix_line("precisions", "fp64"), ["'fp64'", "fp32", "bf16"]),
    "unknown phase": (with_matrix_line("phases", "inference, backprop"), ["'backprop'", "inference", "training"]),
    "zero batch": (with_matrix_line("batches", "0"), ["batch 0", "1 to 1048576"]),
    "negative batch": (with_matrix_line("batches", "-4"), ["batch -4", "1 to 1048576"]),
    "non-integer batch": (with_matrix_line("batches", "1.5"), ["'1.5'", "integer"]),
    "absurd batch": (with_matrix_line("batches", "2000000"), ["2000000", "1 to 1048576"]),
    "empty matrix": (with_matrix_line("networks", ""), ["matrix is empty", "networks"]),
    "missing matrix key": ("\n".join(l for l in TINY_JOB.splitlines() if not l.startswith("phases")), ["matrix is empty", "phases"]),
    "duplicate values": (with_matrix_line("batches", "1, 2, 1"), ["'1' twice"]),
    "duplicate key": (TINY_JOB.replace("min_steps = 3", "min_steps = 3\nmin_steps = 4"), ["min_steps", "twice"]),
    "zero steps": (TINY_JOB.replace("min_steps = 3", "min_steps = 0"), ["min_steps", "out of range", "1 to"]),
    "max below min": (TINY_JOB.replace("max_steps = 5", "max_steps = 2"), ["max_steps", "below min_steps"]),
}


@pytest.mark.parametrize("case", sorted(BAD_JOBS))
def test_bad_job_file_exits_2_and_writes_nothing(case, tmp_path, run_crossbench):
    text, expected = BAD_JOBS[case]
    job = write_job(tmp_path, text)
    output = tmp_path / "out.h5"
    result = run_crossbench("run", "--job", job, "--output", output, "--quiet")
    assert result.returncode == 2, result.stderr
    assert "job.ini" in result.stderr or "--set" in result.stderr
    for fragment in expected:
        assert fragment in result.stderr, f"{case}: {fragment!r} not in {result.stderr!r}"
    assert not output.exists()
    assert list(tmp_path.iterdir()) == [job]


def test_set_override_is_validated_like_the_job_file(tmp_path, run_crossbench):
    job = write_job(tmp_path, TINY_JOB)
    result = run_crossbench("run", "--job", job, "--set", "matrix.networks=alexnet,nope", "--output", tmp_path / "o.h5")
    assert result.returncode == 2
    assert "'nope'" in result.stderr and "--set" in result.stderr
    result = run_crossbench("run", "--job", job, "--set", "matrix.colour=red", "--output", tmp_path / "o.h5")
    assert result.returncode == 2 and "unknown key 'colour'" in result.stderr
    assert not (tmp_path / "o.h5").exists()


def test_algo_cache_is_checked_before_anything_runs(tmp_path, run_crossbench):
    job = write_job(tmp_path, TINY_JOB)
    cache = tmp_path / "algorithms.json"
    output = tmp_path / "o.h5"
    # Only the measured search has choices to cache.
    result = run_crossbench("run", "--job", job, "--algo-cache", cache, "--output", output)
    assert result.returncode == 2 and "algo_cache applies to algo = exhaustive" in result.stderr, result.stderr
    # A file that is not a cache: exit 2 naming it, and nothing written.
    for text, problem in [("{not json", "not valid JSON"),
                          ('{"format": "crossbench-algorithm-cache/9", "records": []}', "format 'crossbench-algorithm-cache/9'"),
                          ('{"format": "crossbench-algorithm-cache/1", "records": [{"device": "d"}]}', "record 0 has no 'libraries'")]:
        cache.write_text(text)
        result = run_crossbench("run", "--job", job, "--algo", "exhaustive", "--algo-cache", cache, "--output", output)
        assert result.returncode == 2, result.stderr
        assert str(cache) in result.stderr and problem in result.stderr, result.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["algorithms.json", "job.ini"]
    # The compiled plans beside it (FILE.plans, engine.graph_plan_reuse): a file that is not a plan store, the same.
    cache.unlink()
    plans = tmp_path / "algorithms.json.plans"
    plans.write_bytes(b"{not a plan store")
    result = run_crossbench("run", "--job", job, "--algo", "exhaustive", "--algo-cache", cache, "--output", output)
    assert result.returncode == 2, result.stderr
    assert str(plans) in result.stderr and "does not begin with the format's line" in result.stderr, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["algorithms.json.plans", "job.ini"]
    # Without plan reuse the plans file is not read.
    result = run_crossbench("plan", "--job", job, "--set", "engine.algo=exhaustive", "--set", f"engine.algo_cache={cache}",
                            "--set", "engine.graph_plan_reuse=false")
    assert result.returncode == 0, result.stderr
    plans.unlink()
    # A missing file is a cold cache, and the job-file key is the same option.
    result = run_crossbench("plan", "--job", job, "--set", "engine.algo=exhaustive", "--set", f"engine.algo_cache={cache}")
    assert result.returncode == 0, result.stderr
    assert not cache.exists() and not plans.exists()


def test_search_l2_is_an_engine_option(tmp_path, run_crossbench):
    """engine.search_l2 (the L2 state of the measured search's timed runs): listed with its
    values, checked like every key, and cold only where there is a search to time."""
    options = json.loads(run_crossbench("list", "options", "--json").stdout)
    row = next(o for o in options if o["key"] == "engine.search_l2")
    assert row["default"] == "warm" and row["valid"] == "warm, cold" and row["changes_numbers"]
    assert row["recorded_as"] == "engine_search_l2"
    assert "| `engine.search_l2` |" in run_crossbench("list", "options").stdout
    job = write_job(tmp_path, TINY_JOB)
    result = run_crossbench("plan", "--job", job, "--set", "engine.algo=exhaustive", "--set", "engine.search_l2=hot")
    assert result.returncode == 2, result.stderr
    assert "[engine] search_l2 'hot'" in result.stderr and "valid: warm, cold" in result.stderr, result.stderr
    result = run_crossbench("plan", "--job", job, "--set", "engine.search_l2=cold")
    assert result.returncode == 2 and "search_l2 = cold applies to algo = exhaustive" in result.stderr, result.stderr
    for value in ("warm", "cold"):
        result = run_crossbench("plan", "--job", job, "--set", "engine.algo=exhaustive", "--set", f"engine.search_l2={value}")
        assert result.returncode == 0, result.stderr


def test_missing_job_file(tmp_path, run_crossbench):
    result = run_crossbench("run", "--job", tmp_path / "absent.ini", "--output", tmp_path / "o.h5")
    assert result.returncode == 2
    assert "absent.ini" in result.stderr and "No such file" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_unreadable_job_file(tmp_path, run_crossbench):
    result = run_crossbench("run", "--job", tmp_path, "--output", tmp_path / "o.h5")  # a directory
    assert result.returncode == 2 and "cannot read job file" in result.stderr


def test_output_in_missing_directory(tmp_path, run_crossbench):
    job = write_job(tmp_path, TINY_JOB)
    result = run_crossbench("run", "--job", job, "--output", tmp_path / "nowhere" / "o.h5")
    assert result.returncode == 2
    assert "nowhere" in result.stderr and "does not exist" in result.stderr
    assert not (tmp_path / "nowhere").exists()


def test_unknown_command_and_list(run_crossbench):
    assert run_crossbench("frobnicate").returncode == 2
    result = run_crossbench("list", "colours")
    assert result.returncode == 2 and "networks, engines, devices" in result.stderr


def test_describe_resnet50_reports_reference_cost(run_crossbench):
    result = run_crossbench("describe", "resnet50")
    assert result.returncode == 0, result.stderr
    total = [line for line in result.stdout.splitlines() if line.startswith("total")][0]
    assert "total: 8.18 GFLOP/image forward" in total  # DESIGN.md's reference figure
    assert "25.6 M parameters" in total
    assert "layer4.2.conv3" in result.stdout
    bad = run_crossbench("describe", "resnet51")
    assert bad.returncode == 2 and "resnet50" in bad.stderr


def test_list_commands(run_crossbench):
    networks = run_crossbench("list", "networks")
    assert networks.returncode == 0
    for name in ["alexnet", "overfeat", "vgg11", "vgg16", "vgg19", "googlenet", "resnet50", "resnet101", "resnet152"]:
        assert name in networks.stdout
    engines = run_crossbench("list", "engines")
    assert "onednn" in engines.stdout and "cudnn" in engines.stdout
    devices = run_crossbench("list", "devices")
    assert devices.returncode == 0 and "cpu:" in devices.stdout


def test_export_network_is_complete_json(tmp_path, run_crossbench):
    import json
    result = run_crossbench("export-network", "googlenet", "--output", tmp_path / "g.json")
    assert result.returncode == 0, result.stderr
    graph = json.loads((tmp_path / "g.json").read_text())
    assert graph["name"] == "googlenet" and graph["classes"] == 1000
    kinds = {layer["kind"] for layer in graph["layers"]}
    assert {"convolution", "lrn", "concat", "max_pool", "avg_pool", "dropout", "fully_connected"} <= kinds


def test_describe_is_parsed_by_the_schema(run_crossbench, tmp_path):
    """describe NETWORK: one network and --help (its only flag); anything else is exit 2 naming it."""
    alexnet = run_crossbench("describe", "alexnet")
    assert alexnet.returncode == 0, alexnet.stderr
    assert alexnet.stdout.startswith("alexnet: input 3x")
    assert "total:" in alexnet.stdout and alexnet.stderr == ""
    for arguments, message in [
            ((), "usage: crossbench describe NETWORK"),
            (("alexnet", "vgg16"), "usage: crossbench describe NETWORK; unexpected 'vgg16'"),
            (("alexnet", "--json"), "crossbench describe: unknown flag '--json'; valid: --help"),
            (("--output", "x"), "crossbench describe: unknown flag '--output'; valid: --help")]:
        bad = run_crossbench("describe", *arguments, cwd=tmp_path)
        assert bad.returncode == 2, (arguments, bad.stderr)
        assert bad.stderr == f"crossbench: error: {message}\n", (arguments, bad.stderr)
        assert bad.stdout == ""
    for flag in ("--help", "-h"):
        helped = run_crossbench("describe", "alexnet", flag)
        assert helped.returncode == 0, helped.stderr
        assert helped.stdout.startswith("usage: crossbench describe NETWORK\n")
        assert "  --help\n      this text" in helped.stdout and "crossbench describe resnet50" in helped.stdout
    assert list(tmp_path.iterdir()) == []


def test_export_network_flags_are_parsed_by_the_schema(tmp_path, run_crossbench):
    """export-network NETWORK [-o|--output FILE [--force]]: stdout without --output, the same JSON in FILE
    with it (--output=FILE too), replaced only with --force; a bad flag, a missing or empty value, a
    second network: exit 2 naming it, nothing written."""
    stdout = run_crossbench("export-network", "alexnet")
    assert stdout.returncode == 0, stdout.stderr
    graph = json.loads(stdout.stdout)
    assert graph["name"] == "alexnet" and graph["layers"]
    for index, flag in enumerate(("--output", "-o")):
        path = tmp_path / f"a{index}.json"
        written = run_crossbench("export-network", "alexnet", flag, path)
        assert written.returncode == 0 and written.stdout == "", written.stderr
        assert json.loads(path.read_text()) == graph
    path = tmp_path / "eq.json"
    assert run_crossbench("export-network", f"--output={path}", "alexnet").returncode == 0
    assert json.loads(path.read_text()) == graph
    # --force: an existing FILE is replaced; without it, refused and kept.
    path.write_text("mine\n")
    refused = run_crossbench("export-network", "alexnet", "-o", path)
    assert refused.returncode == 2 and f"'{path}' exists; replace it with --force" in refused.stderr
    assert path.read_text() == "mine\n"
    forced = run_crossbench("export-network", "--force", "vgg16", "-o", path)
    assert forced.returncode == 0, forced.stderr
    assert json.loads(path.read_text())["name"] == "vgg16"
    before = sorted(tmp_path.iterdir())
    usage = "usage: crossbench export-network NETWORK [--output FILE [--force]]"
    for arguments, message in [
            ((), usage),
            (("--force",), usage),
            (("alexnet", "vgg16"), f"{usage}; unexpected 'vgg16'"),
            (("alexnet", "--colour"), "crossbench export-network: unknown flag '--colour'; valid: --output, --force, --help"),
            (("alexnet", "--out", "x.json"), "crossbench export-network: unknown flag '--out'; valid: --output, --force, --help"),
            (("alexnet", "--output"), "--output needs a value"),
            (("alexnet", "-o"), "needs a value"),
            (("alexnet", "--output", ""), f"export-network: --output is empty; {usage}"),
            (("alexnet", "--force=yes"), "--force takes no value"),
            (("alexnet", "-o", "x.json", "--output", "y.json"), "--output is given twice; give it once"),
            (("lenet", "-o", "x.json"), "unknown network 'lenet'")]:
        bad = run_crossbench("export-network", *arguments, cwd=tmp_path)
        assert bad.returncode == 2, (arguments, bad.stderr)
        assert bad.stderr.startswith("crossbench: error: ") and message in bad.stderr, (arguments, bad.stderr)
        assert bad.stdout == ""
    assert sorted(tmp_path.iterdir()) == before
    for arguments in (("--help",), ("-h",), ("alexnet", "-o", tmp_path / "h.json", "--help")):
        helped = run_crossbench("export-network", *arguments)
        assert helped.returncode == 0, helped.stderr
        assert helped.stdout.startswith(usage + "\n")
        assert "  -o, --output FILE\n" in helped.stdout and "  --force\n      replace FILE if it exists [off]" in helped.stdout
        assert "Exit codes: 0 done; 1 a failure (I/O); 2 bad input" in helped.stdout
    assert not (tmp_path / "h.json").exists()


def test_plan_lists_every_cell_with_cost(tmp_path, run_crossbench):
    job = write_job(tmp_path, TINY_JOB)
    result = run_crossbench("plan", "--job", job, "--ranks", "2")
    assert result.returncode == 0, result.stderr
    assert "onednn/alexnet/fp32/b1/inference/r0" in result.stdout
    assert "onednn/alexnet/fp32/b1/training/r0" in result.stdout
    assert "rank 0" in result.stdout and "rank 1" in result.stdout and "predicted makespan" in result.stdout


def check_cube(path, ranks_expected):
    dataset = xarray.open_dataset(path)
    for dim in ["device", "engine", "network", "precision", "batch", "phase", "replica", "step"]:
        assert dim in dataset.dims
    assert list(dataset["engine"].values) == ["onednn"]
    assert dataset.sizes["phase"] == 2
    with h5py.File(path, "r") as cube:
        assert cube.attrs["schema"] in (b"crossbench-cube/4", "crossbench-cube/4")
        names = {value: name for name, value in h5py.check_enum_dtype(cube["status"].dtype).items()}
        statuses = [names[v] for v in cube["status"][...].ravel()]
        assert statuses == ["ok", "ok"], statuses
        ranks = sorted(set(cube["rank"][...].ravel().tolist()))
        assert ranks == ranks_expected
        assert len(cube["ranks/rank"]) == len(ranks_expected)
    medians = dataset["median_ms"].values.ravel()
    assert np.all(np.isfinite(medians)) and np.all(medians > 0)


def test_single_rank_run_writes_the_cube(tmp_path, run_crossbench):
    job = write_job(tmp_path, TINY_JOB)
    output = tmp_path / "one.h5"
    result = run_crossbench("run", "--job", job, "--output", output)
    assert result.returncode == 0, result.stderr + result.stdout
    # Context (progress, where the cube went, what to run next) on stderr; the
    # device legend and the table on stdout, the rows naming the device D0.
    assert "[2/2]" in result.stderr and "ETA" in result.stderr
    assert "wrote" in result.stderr and f"next: scripts/report report {output}" in result.stderr
    assert result.stdout.startswith("D0 = CPU ") and "libraries: onednn_version" in result.stdout, result.stdout
    rows = [line for line in result.stdout.splitlines() if line.startswith("D0 ") and not line.startswith("D0 =")]
    assert len(rows) == 2 and all(" ok " in row for row in rows), result.stdout
    check_cube(output, [0])


def test_two_rank_run_splits_the_cells(tmp_path, run_crossbench):
    job = write_job(tmp_path, TINY_JOB)
    output = tmp_path / "two.h5"
    result = run_crossbench("run", "--job", job, "--output", output, "--quiet", mpi_ranks=2)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "[1/2]" not in result.stdout  # --quiet
    check_cube(output, [0, 1])


def test_check_prints_one_json_line_per_cell_and_failures_are_data(run_crossbench):
    """`crossbench check` (the engines' output checks, compared in test_worker_agreement.py): its
    input is validated like run's, and cells that cannot run are lines with their reason."""
    bad = run_crossbench("check", "--set", "matrix.engines=tensorflow")
    assert bad.returncode == 2 and "'tensorflow'" in bad.stderr
    result = run_crossbench("check", "--set", "matrix.networks=alexnet",
                            "--set", "matrix.precisions=tf32,fp16", "--set", "matrix.batches=1",
                            "--set", "matrix.phases=inference", "--set", "workers.nowhere=/nonexistent/python w.py",
                            "--set", "matrix.engines=onednn,nowhere")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["engine"], r["precision"]) for r in rows] == [("onednn", "tf32"), ("onednn", "fp16"),
                                                            ("nowhere", "tf32"), ("nowhere", "fp16")]
    for row in rows:
        assert (row["network"], row["batch"], row["phase"]) == ("alexnet", 1, "inference")
        assert row["status"] == "unsupported" and row["message"], row
        assert "loss" not in row
    assert "/nonexistent/python" in rows[-1]["message"]
