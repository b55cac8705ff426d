"""Tests of analysis/ (crossbench_analysis): every command on three kinds of cube.

* "h5py": a cube written here with h5py following DESIGN.md's schema (committed
  enum, dimension scales), with every status and two device keys;
* "writer": a cube written by the project's own C++ writer
  ($CROSSBENCH_BUILD_DIR/.../write_sample_cube OUT.h5: mixed statuses, two keys);
* "crossbench": a cube produced by a real `crossbench run` on the CPU, in this
  test session;
* "crossbench-mpi": a real two-rank `mpirun` run whose ranks carry different
  device tags, so that the cube has two device keys (device against device).

The last two are skipped, with the reason, when the binaries are not built.
CROSSBENCH_BUILD_DIR defaults to build/ in the repository.
"""

from __future__ import annotations

import base64
import csv
import glob
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "analysis"))

from crossbench_analysis import cube as cubemod  # noqa: E402
from crossbench_analysis import plots  # noqa: E402
from crossbench_analysis.analysis import collapse_replicas, focus_batch, scaling_table, single_device  # noqa: E402,E501
from crossbench_analysis.report import SECTIONS  # noqa: E402
from crossbench_analysis.synthetic import add_scaling_efficiency, ok_cell, write_cube  # noqa: E402

REPORT = REPO / "scripts" / "report"
BUILD = Path(os.environ.get("CROSSBENCH_BUILD_DIR", REPO / "build"))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TIME_VARS = ("median_ms", "mean_ms", "min_ms", "max_ms", "p05_ms", "p95_ms", "ci_low_ms", "ci_high_ms")


def cli(*args, timeout=900):
    """Run scripts/report (the wrapper users run) and return the CompletedProcess."""
    return subprocess.run([str(REPORT), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO)


# ---------------------------------------------------------------------------
# cube sources

GPU_KEY = "NVIDIA H100 80GB HBM3 (132 SMs, sm_9.0, 79.1 GiB)"
CPU_KEY = "CPU Intel(R) Xeon(R) CPU @ 2.20GHz (2 threads, avx2, 7.8 GiB)"


INFERENCE_SINGLE_DEVICE = "inference is single-device: gpus > 1 applies to training cells only"
CPU_NEEDS_RANKS = (f"data parallel over 2 devices needs 2 ranks bound to devices of key '{CPU_KEY}'; "
                   f"this run has 1")


def write_h5py_cube(path: Path, schema: str = cubemod.SCHEMA_2) -> None:
    """Two device keys, two engines, three networks, fp32 + bf16, batches 16/32/64,
    both phases, two replicas; OOM, unsupported, failed, timeout and not_run cells.

    Schema 2 (default) adds gpus = 2 (data parallel) for the GPU's training cells,
    with known scaling (DP_FACTOR: the 2-GPU step is that many times the 1-GPU
    step, so the efficiency is 1 / factor), an OOM, a timeout, an ok cell whose
    gpus = 1 twin failed (no efficiency), one without exposed communication, one
    whose efficiency the cube lacks; inference gpus = 2 cells are unsupported (by
    design) and the CPU's training gpus = 2 cells unsupported (one rank).
    Schema 1: the same gpus = 1 cells, without the gpus axis."""
    rng = np.random.default_rng(2017)
    dp_rng = np.random.default_rng(2018)
    data_parallel = schema != cubemod.SCHEMA_1
    axes = {"device": [GPU_KEY, CPU_KEY], "engine": ["cudnn", "onednn"],
            "network": ["alexnet", "vgg11", "resnet50"], "precision": ["fp32", "bf16"],
            "batch": [16, 32, 64], "phase": ["inference", "training"], "replica": [0, 1]}
    if data_parallel:
        axes["gpus"] = [1, 2]
    gflop = {"alexnet": 1.43, "vgg11": 15.2, "resnet50": 8.18}
    cells = []
    for dev, eng, speed in ((GPU_KEY, "cudnn", 20.0), (CPU_KEY, "onednn", 0.5)):
        for n in axes["network"]:
            for p in axes["precision"]:
                for b in axes["batch"]:
                    for ph in axes["phase"]:
                        for rep in axes["replica"]:
                            co = dict(device=dev, engine=eng, network=n, precision=p, batch=b, phase=ph,
                                      replica=rep)
                            if dev == CPU_KEY and p == "bf16":
                                cells.append(dict(co, status="unsupported", message="no native bf16 on this CPU"))
                            elif n == "vgg11" and ph == "training" and b == 64:
                                cells.append(dict(co, status="oom", message="out of memory: 3.1 GiB requested"))
                            elif n == "resnet50" and ph == "training" and b == 32 and dev == GPU_KEY:
                                cells.append(dict(co, status="failed", message="CUDNN_STATUS_INTERNAL_ERROR"))
                            elif n == "alexnet" and ph == "training" and b == 64 and dev == CPU_KEY and rep == 1:
                                cells.append(dict(co, status="timeout", message="cell time limit 60 s"))
                            else:
                                mult = 3 if ph == "training" else 1
                                t = gflop[n] * mult * b / speed * (1 + 0.1 * (b == 64)) * (1 + 0.02 * rep)
                                s = t * np.exp(rng.normal(0, 0.005, 40))
                                c = ok_cell(co, s, b, steps=40, rank=rep)
                                c["tflops"] = gflop[n] * mult * b / c["median_ms"]
                                c["peak_memory_bytes"] = 1e8 * b
                                if dev == GPU_KEY:
                                    c["energy_j_per_image"] = 0.1 * gflop[n]
                                    c["mean_sm_clock_mhz"] = 1755.0
                                    c["throttled"] = 1 if (n == "resnet50" and b == 16) else 0
                                cells.append(c)
                            if data_parallel:
                                cells.append(dp_cell(dict(co, gpus=2), cells, dp_rng))
    ranks = [dict(rank=0, host="gpu01", device_key=GPU_KEY, device_index=0, uuid="GPU-1", pci_bus_id="0000:1b:00.0",
                  memory_bytes=80 * 2**30, sm_clock_mhz=1980, memory_clock_mhz=2619, power_limit_w=700,
                  driver="550.54.15"),
             dict(rank=1, host="cpu01", device_key=CPU_KEY, device_index=-1, memory_bytes=64 * 2**30,
                  sm_clock_mhz=2400, driver="6.1.0", threads=2)]
    write_cube(path, axes, add_scaling_efficiency(cells), ranks,
               attrs={"created": "2026-11-29T12:00:00Z", "command_line": "crossbench run --job t.ini",
                      "job_file": "[matrix]\nnetworks = alexnet vgg11 resnet50\n", "crossbench_version": "0.1.0",
                      "git_revision": "abc123", "hdf5_version": "1.10.8"},
               schema=schema)


# The 2-GPU step of each GPU training cell, as a multiple of its 1-GPU step (replica 0's
# efficiency is exactly 1 / factor up to the samples' noise); exposed communication is
# (factor - 1) of the 1-GPU step except where said.
DP_FACTOR = {"alexnet": 1.4, "vgg11": 1.03, "resnet50": 1.05}


def dp_cell(co: dict, cells: list, rng) -> dict:
    """The gpus = 2 cell of `co` (see write_h5py_cube)."""
    if co["phase"] == "inference":
        return dict(co, status="unsupported", message=INFERENCE_SINGLE_DEVICE, rank=-1)
    if co["device"] == CPU_KEY:
        return dict(co, status="unsupported", message=CPU_NEEDS_RANKS, rank=-1)
    n, p, b = co["network"], co["precision"], co["batch"]
    if n == "vgg11" and b == 64:
        return dict(co, status="oom", message="out of memory: 3.1 GiB requested", rank=0)
    if n == "resnet50" and p == "bf16" and b == 16:
        return dict(co, status="timeout", message="cell time limit 60 s", rank=0, steps=3,
                    samples_ms=[50.0, 51.0, 52.0])
    twin = next(c for c in cells if c.get("gpus", 1) == 1 and all(
        c[k] == co[k] for k in ("device", "engine", "network", "precision", "batch", "phase", "replica")))
    if twin["status"] == "ok":
        t1 = twin["median_ms"]
    else:   # resnet50 b32: the 1-GPU cell failed; the 2-GPU one runs
        t1 = 8.18 * 3 * b / 20.0 * (1 + 0.02 * co["replica"])
    factor = DP_FACTOR[n]
    if n == "vgg11" and p == "bf16" and b == 16:
        factor = 1.25
    s = t1 * factor * np.exp(rng.normal(0, 0.002, 30))
    c = ok_cell(co, s, b, steps=30, rank=0, throttled=0, tflops=2 * 3 * 8.0 * b / (t1 * factor),
                exposed_communication_ms=(factor - 1) * t1,
                decisions="data parallel over ranks 0,1; 1 bucket of 25 MiB; nccl")
    if n == "vgg11" and p == "bf16" and b == 16:
        del c["exposed_communication_ms"]          # not measured: NaN in the cube
    if n == "vgg11" and p == "fp32" and b == 32:
        c["scaling_efficiency"] = float("nan")      # the cube lacks it: scaling_table computes it
    return c


def find_binary(name: str) -> Path | None:
    if not BUILD.is_dir():
        return None
    direct = BUILD / name
    if direct.is_file() and os.access(direct, os.X_OK):
        return direct
    hits = sorted(p for p in glob.glob(str(BUILD / "**" / name), recursive=True)
                  if os.path.isfile(p) and os.access(p, os.X_OK))
    return Path(hits[0]) if hits else None


CPU_JOB = """\
# analysis tests: a tiny CPU matrix. fp32 runs; bf16 runs where the CPU has native
# bf16 and is `unsupported` elsewhere. The CI target stops a cell early on a quiet
# machine; the time limit bounds it on a busy one.
[matrix]
networks = alexnet
engines = auto
precisions = fp32, bf16
batches = 1, 2
phases = inference, training

[measure]
warmup = 2
min_steps = 5
max_steps = 200
target_ci = 0.02
cell_time_limit_s = 10
"""


def run_crossbench(out: Path, job_text: str, *extra: str) -> Path:
    exe = find_binary("crossbench")
    if exe is None:
        pytest.skip(f"crossbench is not built in {BUILD} (set CROSSBENCH_BUILD_DIR)")
    job = out.with_suffix(".ini")
    job.write_text(job_text)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run([str(exe), "run", "--job", str(job), "--output", str(out), "--quiet", *extra],
                       capture_output=True, text=True, timeout=900, cwd=REPO, env=env)
    assert r.returncode == 0, f"crossbench run failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    assert out.is_file(), f"crossbench run wrote no cube at {out}"
    return out


def run_crossbench_two_keys(out: Path, job_text: str) -> Path:
    """A real two-rank MPI run whose ranks carry different device tags, so the cube
    has two device keys (Open MPI's MPMD syntax gives each rank its own environment)."""
    exe = find_binary("crossbench")
    if exe is None:
        pytest.skip(f"crossbench is not built in {BUILD} (set CROSSBENCH_BUILD_DIR)")
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("mpirun is not installed")
    job = out.with_suffix(".ini")
    job.write_text(job_text)
    run = [str(exe), "run", "--job", str(job), "--output", str(out), "--quiet"]
    command = [mpirun, "--oversubscribe"]
    for i, tag in enumerate(("slot-a", "slot-b")):
        command += ([":"] if i else []) + ["-np", "1", "-x", "OMP_NUM_THREADS=1", "-x",
                                           f"CROSSBENCH_DEVICE_TAG={tag}"] + run
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    r = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=REPO, env=env)
    assert r.returncode == 0, f"mpirun crossbench run failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    assert out.is_file(), f"crossbench run wrote no cube at {out}"
    return out


@pytest.fixture(scope="session")
def real_cube(tmp_path_factory) -> Path:
    """A cube from a real `crossbench run` on this machine's CPU (once per session)."""
    return run_crossbench(tmp_path_factory.mktemp("cube-crossbench") / "crossbench.h5", CPU_JOB)


@pytest.fixture(scope="session", params=["h5py", "writer", "crossbench", "crossbench-mpi"])
def cube_file(request, tmp_path_factory) -> Path:
    kind = request.param
    d = tmp_path_factory.mktemp(f"cube-{kind}")
    out = d / f"{kind}.h5"
    if kind == "h5py":
        write_h5py_cube(out)
    elif kind == "writer":
        exe = find_binary("write_sample_cube")
        if exe is None:
            pytest.skip(f"write_sample_cube (the C++ writer's sample program) is not built under {BUILD}")
        r = subprocess.run([str(exe), str(out)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"write_sample_cube failed:\n{r.stdout}\n{r.stderr}"
    elif kind == "crossbench":
        out = request.getfixturevalue("real_cube")
    else:
        run_crossbench_two_keys(out, CPU_JOB)
        keys = cubemod.load(out).devices
        assert len(keys) == 2 and keys[0] != keys[1], keys
    return out


@pytest.fixture(scope="session")
def loaded(cube_file):
    return cubemod.load(cube_file)


@pytest.fixture(scope="session")
def report_dir(cube_file, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report")
    r = cli("report", cube_file, "-o", out)
    assert r.returncode == 0, f"report failed:\n{r.stdout}\n{r.stderr}"
    return out


# ---------------------------------------------------------------------------
# loading

def test_load_has_schema_axes_and_statuses(loaded, cube_file):
    # The C++ writer writes schema 4; the h5py test writer the schema-2 layout (both read alike).
    assert loaded.schema in ("crossbench-cube/2", "crossbench-cube/3", "crossbench-cube/4")
    assert cubemod.CELL_DIMS == ("device", "engine", "network", "precision", "batch", "phase", "gpus", "replica")
    for d in cubemod.CELL_DIMS:
        assert d in loaded.ds.dims
    assert loaded.ds["median_ms"].dims == cubemod.CELL_DIMS
    assert 1 in loaded.gpus and loaded.cells["gpus"].dtype.kind == "i"
    # gpus = 1 cells are single-device: no exposed communication, no scaling efficiency.
    single = loaded.cells[loaded.cells["gpus"] == 1]
    assert single["exposed_communication_ms"].isna().all() and single["scaling_efficiency"].isna().all()
    # A data-parallel group's images/s is the group's: gpus x batch / median.
    ok = loaded.cells[loaded.cells["status"] == "ok"]
    np.testing.assert_allclose(ok["images_per_s"], ok["gpus"] * ok["batch"] / ok["median_ms"] * 1e3, rtol=1e-9)
    cells = loaded.cells
    n = int(np.prod([len(loaded.ds[d]) for d in cubemod.CELL_DIMS]))
    assert len(cells) == n
    assert set(cells["status"]) <= set(cubemod.STATUS_NAMES)
    assert (cells["status"] == "ok").any()
    ok = cells[cells["status"] == "ok"]
    assert (ok["median_ms"] > 0).all()
    assert (ok["ci_low_ms"] <= ok["median_ms"]).all() and (ok["median_ms"] <= ok["ci_high_ms"]).all()
    # Numbers are NaN unless ok: never a zero standing in for a missing measurement.
    assert cells.loc[cells["status"] != "ok", "median_ms"].isna().all()
    assert cells["batch"].dtype.kind == "i"


@pytest.mark.filterwarnings("ignore:numpy.ndarray size changed")
def test_load_matches_xarray_open_dataset(loaded, cube_file):
    """Our h5py reader and netCDF (xarray.open_dataset) agree on axes and values."""
    import xarray as xr
    try:
        ds = xr.open_dataset(cube_file)
    except Exception as e:  # pragma: no cover - depends on the netCDF backends installed
        pytest.skip(f"xarray.open_dataset cannot open the cube here: {e}")
    with ds:
        for d in cubemod.CELL_DIMS:
            assert [str(v) for v in ds[d].values] == [str(v) for v in loaded.ds[d].values]
        ours = loaded.ds["median_ms"].transpose(*ds["median_ms"].dims).values
        theirs = ds["median_ms"].values
        ok = loaded.ds["status"].transpose(*ds["median_ms"].dims).values == "ok"
        np.testing.assert_allclose(ours[ok], theirs[ok])


def test_status_decoded_by_enum_name(tmp_path):
    """The enum is read by name: a cube whose enum numbers differ still decodes right."""
    p = tmp_path / "c.h5"
    write_h5py_cube(p)
    with h5py.File(p, "r+") as f:
        names = ["timeout", "failed", "unsupported", "oom", "ok", "not_run"]   # reversed numbering
        old = cubemod._read_status(f["status"])
        dt = h5py.enum_dtype({n: i for i, n in enumerate(names)}, basetype="u1")
        codes = np.vectorize(lambda s: names.index(s))(old).astype(np.uint8)
        dims = [f["status"].dims[i][0] for i in range(f["status"].ndim)]
        del f["status"]
        ds = f.create_dataset("status", data=codes, dtype=dt)
        for i, s in enumerate(dims):
            ds.dims[i].attach_scale(s)
    c = cubemod.load(p)
    assert (c.ds["status"].values == old).all()


# ---------------------------------------------------------------------------
# refusing what is not a cube

def test_refuses_foreign_hdf5(tmp_path):
    p = tmp_path / "foreign.h5"
    with h5py.File(p, "w") as f:
        f["temperature"] = np.arange(10.0)
        f.attrs["title"] = "weather"
    r = cli("report", p, "-o", tmp_path / "out")
    assert r.returncode == 2
    assert "error:" in r.stderr and "not a crossbench cube" in r.stderr and "schema" in r.stderr
    assert not (tmp_path / "out" / "report.md").exists()
    for cmd in (["export", p, "--csv", tmp_path / "x.csv"], ["compare", p, p]):
        r = cli(*cmd)
        assert r.returncode == 2 and "not a crossbench cube" in r.stderr
    assert not (tmp_path / "x.csv").exists()


def test_refuses_unknown_schema(tmp_path):
    p = tmp_path / "future.h5"
    write_h5py_cube(p)
    with h5py.File(p, "r+") as f:
        f.attrs["schema"] = "crossbench-cube/99"
    r = cli("export", p, "--csv", tmp_path / "x.csv")
    assert r.returncode == 2
    assert "crossbench-cube/99" in r.stderr and "not known" in r.stderr
    # The message names what this analysis does read.
    assert "crossbench-cube/1" in r.stderr and "crossbench-cube/2" in r.stderr
    assert not (tmp_path / "x.csv").exists()
    with pytest.raises(cubemod.CubeError, match="crossbench-cube/99"):
        cubemod.load(p)


@pytest.mark.parametrize("content", [b"", b"device,engine\nA100,cudnn\n", b"\x89HDF\r\n\x1a\n garbage"])
def test_refuses_non_hdf5(tmp_path, content):
    p = tmp_path / "notacube.h5"
    p.write_bytes(content)
    r = cli("report", p, "-o", tmp_path / "out")
    assert r.returncode == 2
    assert r.stderr.startswith("error:") and "HDF5 file" in r.stderr and "not a crossbench cube" in r.stderr
    r = cli("report", tmp_path / "missing.h5", "-o", tmp_path / "out")
    assert r.returncode == 2 and "no such file" in r.stderr


def test_cubeerror_from_python(tmp_path):
    p = tmp_path / "foreign.h5"
    with h5py.File(p, "w") as f:
        f["x"] = 1
    with pytest.raises(cubemod.CubeError, match="no 'schema'"):
        cubemod.load(p)


# ---------------------------------------------------------------------------
# report

def _is_png(path: Path) -> bool:
    import matplotlib.image as mpimg
    data = path.read_bytes()
    if not data.startswith(PNG_MAGIC):
        return False
    img = mpimg.imread(path)
    return img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100


def test_report_has_every_section(report_dir):
    md = (report_dir / "report.md").read_text()
    html = (report_dir / "report.html").read_text()
    for title in SECTIONS:
        assert f"## {title}" in md, title
        assert title.replace("'", "&#x27;") in html, title
    assert "## Summary" in md


def test_report_figures_are_valid_pngs(report_dir):
    figs = sorted((report_dir / "figures").glob("*.png"))
    assert figs, "the report wrote no figure"
    assert {p.name.split("-")[0] for p in figs} >= {"fig1", "fig4"}
    for p in figs:
        assert _is_png(p), p
    md = (report_dir / "report.md").read_text()
    for p in figs:
        assert f"figures/{p.name}" in md


def test_report_html_is_self_contained(report_dir):
    html = (report_dir / "report.html").read_text()
    srcs = re.findall(r'<img[^>]*src="([^"]+)"', html)
    assert len(srcs) == len(list((report_dir / "figures").glob("*.png")))
    for s in srcs:
        assert s.startswith("data:image/png;base64,")
        assert base64.b64decode(s.split(",", 1)[1]).startswith(PNG_MAGIC)
    assert "<link" not in html and "<script" not in html


def _section1_tables(md: str) -> dict:
    """{(heading, row network, column): text} for the tables of section 1."""
    sec = md.split(f"## {SECTIONS[0]}")[1].split(f"## {SECTIONS[1]}")[0]
    out, heading, header = {}, None, None
    for line in sec.splitlines():
        if line.startswith("### "):
            heading, header = line[4:], None
        elif line.startswith("| network |"):
            header = [c.strip() for c in line.strip("|").split(" | ")]
        elif line.startswith("|---"):
            continue
        elif line.startswith("| ") and header:
            vals = [c.strip() for c in re.split(r"(?<!\\) \| ", line.strip().strip("|").strip())]
            for col, v in zip(header[1:], vals[1:]):
                out[(heading, vals[0], col)] = v
        else:
            header = header if line.startswith("|") else None
    return out


def test_report_shows_every_non_ok_cell_as_its_status(loaded, report_dir):
    """Every cell of section 1's tables that is not ok reads as its status (OOM as OOM);
    section 1 compares single devices (gpus = 1)."""
    cells = single_device(collapse_replicas(loaded.cells))
    b = focus_batch(cells)
    tables = _section1_tables((report_dir / "report.md").read_text())
    assert tables
    at_b = cells[(cells["batch"] == b) & (cells["status"] != "not_run")]
    checked = 0
    for r in at_b.itertuples():
        key = (f"{r.device} — {r.precision}, batch {b}", r.network, f"{r.phase} · {r.engine}")
        assert key in tables, key
        text = tables[key]
        want = cubemod.STATUS_LABELS[r.status]
        if r.status == "ok":
            assert re.match(r"^[0-9.]+(e[+-]?\d+)? ms ±(<)?[0-9.]+%$", text), text  # the CI as ± %
        else:
            assert text.startswith(want), (key, text)
        checked += 1
    assert checked == len(at_b)
    oom = (loaded.cells["status"] == "oom").sum()
    if oom:
        assert "OOM" in (report_dir / "report.md").read_text()


def test_figures_mark_oom_and_never_plot_zero(loaded):
    """The time-per-batch figure draws an OOM placeholder labelled OOM for each OOM cell,
    a dot (never a bar: the axis is logarithmic) for each ok cell, and nothing at zero."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    cells = single_device(collapse_replicas(loaded.cells))
    checked_oom = 0
    for dev in loaded.devices:
        engines = sorted(set(cells[(cells["device"] == dev) & (cells["status"] != "not_run")]["engine"]))
        if not engines:
            continue
        for b in sorted(cells["batch"].unique()):
            for prec in sorted(cells["precision"].unique()):
                d = cells[(cells["device"] == dev) & (cells["batch"] == b) & (cells["precision"] == prec)
                          & cells["engine"].isin(engines)]
                if not (d["status"] == "ok").any():
                    continue
                fig = plots.fig_time_per_batch(d, dev, prec, b, engines, plots.engine_colors(engines))
                texts = [t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid() != "value-label"]
                n_oom = int((d["status"] == "oom").sum())
                assert texts.count("OOM") == n_oom
                checked_oom += n_oom
                n_bad = int((~d["status"].isin(["ok"])).sum())
                assert len(texts) == n_bad
                patches = [p for ax in fig.axes for p in ax.patches if isinstance(p, Rectangle)]
                assert not [p for p in patches if p.get_gid() == "cell-ok"], "a bar on a log axis"
                assert plots.bars_on_log_axes(fig) == []
                dots = [line for ax in fig.axes for line in ax.lines if line.get_gid() == "cell-ok"]
                assert len(dots) == int((d["status"] == "ok").sum())
                ok_ms = sorted(d.loc[d["status"] == "ok", "median_ms"])
                assert sorted(float(line.get_ydata()[0]) for line in dots) == pytest.approx(ok_ms)
                holders = [p.get_gid() for p in patches if (p.get_gid() or "").startswith("cell-")
                           and p.get_gid() != "cell-ok"]
                assert sorted(holders) == sorted(f"cell-{s}" for s in d["status"] if s != "ok")
                plt.close(fig)
    # OOM cells at a batch without any ok cell of their device and precision get no
    # bar figure; the batch figure and the summary table show them (tests below).


def test_batch_figure_marks_first_oom(loaded):
    import matplotlib.pyplot as plt
    cells = single_device(collapse_replicas(loaded.cells))
    if cells["batch"].nunique() < 2:
        pytest.skip("single batch size: no batch curve")
    for dev in loaded.devices:
        for prec in sorted(cells["precision"].unique()):
            d = cells[(cells["device"] == dev) & (cells["precision"] == prec) & (cells["status"] != "not_run")]
            if d.empty or not (d["status"] == "ok").any():
                continue
            engines = sorted(d["engine"].unique())
            fig = plots.fig_batch_efficiency(d, dev, prec, engines, plots.engine_colors(engines))
            texts = [t.get_text() for ax in fig.axes for t in ax.texts]
            nets_with_oom = d[d["status"] == "oom"]["network"].nunique()
            assert sum(t == "OOM" for t in texts) >= nets_with_oom
            plt.close(fig)


def test_report_lists_every_oom_cell(report_dir, loaded):
    md = (report_dir / "report.md").read_text()
    summary = md.split("## Summary")[1].split(f"## {SECTIONS[0]}")[0]
    rows = [ln for ln in summary.splitlines() if ln.startswith("| OOM |")]
    oom = loaded.cells[loaded.cells["status"] == "oom"]
    data_parallel = max(loaded.gpus) > 1
    # A data-parallel cube lists the group size too: an OOM on 1 and on 2 GPUs are two rows.
    groups = oom.groupby(["device", "engine", "precision", "phase", "network"] + (["gpus"] if data_parallel else []))
    assert len(rows) == groups.ngroups
    for key, g in groups:
        dev, eng, prec, ph, net = key[:5]
        batches = ", ".join(str(b) for b in sorted(g["batch"].unique()))
        gpus = f" {key[5]} |" if data_parallel else ""
        assert any(f"| {eng} | {prec} | {ph} | {net} |{gpus} {batches} |" in r for r in rows), key


def test_report_batch_words(report_dir, loaded):
    md = (report_dir / "report.md").read_text()
    sec2 = md.split(f"## {SECTIONS[1]}")[1].split(f"## {SECTIONS[2]}")[0]
    if loaded.cells["batch"].nunique() < 2:
        assert "single batch size" in sec2
    else:
        assert "Best throughput at batch" in sec2
        if (loaded.cells["status"] == "oom").any():
            assert "OOM from batch" in sec2


def test_report_provenance(report_dir, loaded):
    md = (report_dir / "report.md").read_text()
    sec5 = md.split(f"## {SECTIONS[6]}")[1]
    for key in ("schema", "command_line"):
        if key in loaded.attrs:
            assert key in sec5
    if "host" in loaded.ranks.columns:
        for h in set(loaded.ranks["host"]):
            assert str(h) in sec5
    thr = loaded.cells[(loaded.cells["status"] == "ok") & (loaded.cells["throttled"] == 1)]
    if len(thr):
        assert f"{len(thr)} cell(s) ran while the device throttled" in sec5


# ---------------------------------------------------------------------------
# export

def test_export_one_row_per_cell(loaded, cube_file, tmp_path):
    out = tmp_path / "cells.csv"
    r = cli("export", cube_file, "--csv", out, "--samples", tmp_path / "steps.csv")
    assert r.returncode == 0, r.stderr
    with out.open() as f:
        rows = list(csv.DictReader(f))
    n = int(np.prod([len(loaded.ds[d]) for d in cubemod.CELL_DIMS]))
    assert len(rows) == n
    cols = set(rows[0])
    assert set(cubemod.CELL_DIMS) <= cols
    assert set(cubemod.CELL_VARS) <= cols
    keys = {tuple(r[d] for d in cubemod.CELL_DIMS) for r in rows}
    assert len(keys) == n, "a cell appears twice"
    want = loaded.cells["status"].value_counts().to_dict()
    got = {}
    for r in rows:
        got[r["status"]] = got.get(r["status"], 0) + 1
    assert got == want
    for r in rows:
        if r["status"] == "ok":
            assert float(r["median_ms"]) > 0
        else:
            assert r["median_ms"] == ""
    ok_steps = int(loaded.cells.loc[loaded.cells["status"] == "ok", "steps"].sum())
    with (tmp_path / "steps.csv").open() as f:
        assert sum(1 for _ in f) - 1 == ok_steps


# ---------------------------------------------------------------------------
# compare

def _rewrite_times(src: Path, dst: Path, factor_of, only_gpus: int | None = None) -> None:
    """Copy `src` to `dst`, multiplying every time of each ok cell by factor_of(median, lo, hi)
    (only the cells with gpus == `only_gpus` when given: then their scaling efficiency
    falls with their throughput, the gpus = 1 cells being unchanged)."""
    shutil.copy(src, dst)
    with h5py.File(dst, "r+") as f:
        status = cubemod._read_status(f["status"])
        ok = status == "ok"
        if only_gpus is not None:
            on = np.zeros(ok.shape, dtype=bool)
            on[:, :, :, :, :, :, list(f["gpus"][()]).index(only_gpus)] = True
            ok &= on
        med, lo, hi = f["median_ms"][()], f["ci_low_ms"][()], f["ci_high_ms"][()]
        factor = np.ones_like(med)
        factor[ok] = factor_of(med[ok], lo[ok], hi[ok])
        for v in TIME_VARS + ("std_ms",):
            if v in f:
                a = f[v][()]
                f[v][...] = np.where(ok, a * factor, a)
        for v in ("images_per_s", "tflops") + (("scaling_efficiency",) if only_gpus is not None else ()):
            if v in f:
                a = f[v][()]
                f[v][...] = np.where(ok, a / factor, a)
        if "samples_ms" in f:
            s = f["samples_ms"][()]
            f["samples_ms"][...] = s * factor[..., None]


def test_compare_same_cube_passes(cube_file):
    r = cli("compare", cube_file, cube_file)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no cell moved" in r.stdout


def test_compare_detects_planted_slowdown(cube_file, loaded, tmp_path):
    slow = tmp_path / "slow.h5"
    _rewrite_times(cube_file, slow, lambda m, lo, hi: np.full_like(m, 1.2))
    r = cli("compare", cube_file, slow, "--fail-above", "5%", "--csv", tmp_path / "cmp.csv")
    import pandas as pd
    t = pd.read_csv(tmp_path / "cmp.csv")
    flagged = t[t["regression"]]
    assert ((flagged["change_pct"] - 20).abs() < 1e-6).all()
    # Exactly the cells whose 95% CI is narrow enough for a 20% move to stand out:
    # 0.2 m > hypot(hi - m, 1.2 (m - lo)).
    ok = loaded.cells[loaded.cells["status"] == "ok"]
    m, lo, hi = ok["median_ms"], ok["ci_low_ms"], ok["ci_high_ms"]
    expected = ok[0.2 * m > np.hypot(hi - m, 1.2 * (m - lo))]
    key = list(cubemod.CELL_DIMS)
    as_set = lambda df: {tuple(str(v) for v in row) for row in df[key].itertuples(index=False)}  # noqa: E731
    assert as_set(flagged) == as_set(expected)
    if expected.empty:
        assert r.returncode == 0
        pytest.skip("this cube's confidence intervals are all wider than a 20% move (a busy machine?): "
                    "compare rightly reports nothing; the h5py and writer cubes cover detection")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "REGRESSION" in r.stdout and "+20.0%" in r.stdout
    # A threshold above the slowdown does not fail.
    r = cli("compare", cube_file, slow, "--fail-above", "25%")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "slower" in r.stdout


def test_compare_ignores_noise_within_ci(cube_file, tmp_path):
    noisy = tmp_path / "noisy.h5"
    rng = np.random.default_rng(5)

    def within(m, lo, hi):
        # Move each median by up to 30% of its CI half-width, either way.
        u = rng.uniform(-0.3, 0.3, m.shape)
        half = np.where(u > 0, hi - m, m - lo)
        return 1 + u * half / m
    _rewrite_times(cube_file, noisy, within)
    r = cli("compare", cube_file, noisy, "--fail-above", "5%")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "REGRESSION" not in r.stdout


def test_compare_fails_on_ok_to_oom(cube_file, loaded, tmp_path):
    broken = tmp_path / "broken.h5"
    shutil.copy(cube_file, broken)
    with h5py.File(broken, "r+") as f:
        st = f["status"][()]
        enum = h5py.check_enum_dtype(f["status"].dtype)
        ok_code, oom_code = enum["ok"], enum["oom"]
        idx = tuple(np.argwhere(st == ok_code)[0])
        st[idx] = oom_code
        f["status"][...] = st
    r = cli("compare", cube_file, broken)
    assert r.returncode == 1
    assert "ok → OOM" in r.stdout


def test_compare_two_real_runs(real_cube, tmp_path):
    """Two real runs of one job: compare classifies every cell; exit 0 or 1 (never an error)."""
    a = real_cube
    b = run_crossbench(tmp_path / "b.h5", CPU_JOB)
    r = cli("compare", a, b, "--csv", tmp_path / "cmp.csv")
    assert r.returncode in (0, 1), r.stdout + r.stderr
    import pandas as pd
    t = pd.read_csv(tmp_path / "cmp.csv")
    n = int(np.prod([len(cubemod.load(a).ds[d]) for d in cubemod.CELL_DIMS]))
    assert len(t) == n and t["verdict"].notna().all()
    assert (r.returncode == 1) == bool(t["regression"].any())


def test_compare_with_no_cell_in_common_is_exit_2(tmp_path):
    """A CI gate given the wrong file must not pass: no cell attempted in both cubes is exit 2."""
    paths = []
    for name, device in (("a", GPU_KEY), ("b", CPU_KEY)):
        axes = {"device": [device], "engine": ["cudnn"], "network": ["alexnet"], "precision": ["fp32"],
                "batch": [16], "phase": ["inference"], "replica": [0]}
        co = dict(device=device, engine="cudnn", network="alexnet", precision="fp32", batch=16,
                  phase="inference", replica=0)
        paths.append(tmp_path / f"{name}.h5")
        write_cube(paths[-1], axes, [ok_cell(co, [1.0, 1.1, 0.9] * 10, 16, steps=30, rank=0)])
    r = cli("compare", *paths)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "no cell is attempted in both" in r.stderr and CPU_KEY in r.stderr
    # The same cube against itself still passes.
    assert cli("compare", paths[0], paths[0]).returncode == 0


def test_compare_bad_threshold(cube_file):
    r = cli("compare", cube_file, cube_file, "--fail-above", "lots")
    assert r.returncode == 2 and "error:" in r.stderr


# ---------------------------------------------------------------------------
# procurement

def test_procurement(loaded, cube_file, tmp_path):
    devices = loaded.devices
    prices = tmp_path / "prices.csv"
    with prices.open("w", newline="") as f:
        f.write("# test prices: full device keys (quoted: they hold commas)\n")
        w = csv.writer(f)
        w.writerow(["device", "price", "power_w"])
        for i, d in enumerate(devices):
            w.writerow([d, 1000 * (i + 1)] + ([300] if i == 0 else []))
    out = tmp_path / "proc"
    r = cli("procurement", cube_file, "--prices", prices, "-o", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "images/s per 1000 USD" in r.stdout
    for d in devices:
        assert d.replace("|", "\\|") in r.stdout
    assert _is_png(out / "pareto.png")
    assert (out / "procurement.md").is_file() and (out / "procurement.csv").is_file()
    # A single network and phase, by substring device names.
    net = loaded.cells.loc[loaded.cells["status"] == "ok", "network"].iloc[0]
    r = cli("procurement", cube_file, "--prices", prices, "-o", out, "--network", net, "--phase", "inference")
    assert r.returncode == 2 and "--force" in r.stderr  # never a silent overwrite
    r = cli("procurement", cube_file, "--prices", prices, "-o", out, "--network", net, "--phase", "inference", "--force")
    assert r.returncode == 0, r.stderr


def test_procurement_prices_errors(loaded, cube_file, tmp_path):
    p = tmp_path / "prices.csv"
    p.write_text("no-such-device-xyz,100\n")
    r = cli("procurement", cube_file, "--prices", p, "-o", tmp_path / "o")
    assert r.returncode == 2 and "no device matches" in r.stderr
    p.write_text(f"{loaded.devices[0]},cheap\n")
    r = cli("procurement", cube_file, "--prices", p, "-o", tmp_path / "o")
    assert r.returncode == 2 and "not a number" in r.stderr


def test_procurement_ambiguous_substring(tmp_path):
    c = tmp_path / "c.h5"
    write_h5py_cube(c)
    p = tmp_path / "prices.csv"
    p.write_text("GiB,100\n")   # matches both keys
    r = cli("procurement", c, "--prices", p, "-o", tmp_path / "o")
    assert r.returncode == 2 and "ambiguous" in r.stderr


# ---------------------------------------------------------------------------
# the h5py cube's known facts (its numbers are known, so check them exactly)

def test_h5py_cube_facts(tmp_path):
    p = tmp_path / "c.h5"
    write_h5py_cube(p)
    c = cubemod.load(p)
    cells = single_device(collapse_replicas(c.cells))
    assert set(cells["gpus"]) == {1}
    # timeout in replica 1 only: the cell is ok through replica 0.
    r = cells[(cells["device"] == CPU_KEY) & (cells["engine"] == "onednn") & (cells["network"] == "alexnet")
              & (cells["batch"] == 64)
              & (cells["phase"] == "training") & (cells["precision"] == "fp32")].iloc[0]
    assert r.status == "ok" and r.n_ok == 1 and "timeout" in r.message
    from crossbench_analysis.analysis import batch_curve
    s = cells[(cells["device"] == GPU_KEY) & (cells["engine"] == "cudnn") & (cells["network"] == "vgg11")
              & (cells["phase"] == "training")
              & (cells["precision"] == "fp32")]
    f = batch_curve(s)
    assert f["first_oom"] == 64 and f["largest_fit"] == 32
    from crossbench_analysis.peaks import PeakTable
    pk = PeakTable.read().peak(GPU_KEY, "bf16")
    assert pk.tflops == pytest.approx(989.4)
    assert PeakTable.read().peak(CPU_KEY, "fp32").tflops is None
    peaks = PeakTable.read()
    assert peaks.peak("NVIDIA A10 (72 SMs, sm_8.6, 22.0 GiB)", "fp32").tflops == pytest.approx(31.2)
    assert peaks.peak("NVIDIA A100-SXM4-80GB (108 SMs, sm_8.0, 79.2 GiB)", "fp32").tflops == pytest.approx(19.5)
    assert peaks.peak("NVIDIA H100 PCIe (114 SMs, sm_9.0, 79.6 GiB)", "fp16").tflops == pytest.approx(756)
    assert peaks.peak("NVIDIA H200 (132 SMs, sm_9.0, 140.0 GiB) [power=500W]", "tf32").tflops == pytest.approx(494.7)
    assert peaks.peak("NVIDIA L40S (142 SMs, sm_8.9, 44.4 GiB)", "fp16").tflops == pytest.approx(362)
    assert peaks.peak("Tesla K40c (15 SMs, sm_3.5, 11.2 GiB)", "fp32").tflops == pytest.approx(4.29)
    assert peaks.peak("NVIDIA GeForce RTX 4090 (128 SMs, sm_8.9, 23.6 GiB)", "bf16").tflops == pytest.approx(165.2)
    assert peaks.peak("NVIDIA H200 (132 SMs, sm_9.0, 140.0 GiB)", "fp32").source == "peaks.csv: H200"


def test_cube_without_any_ok_cell(tmp_path):
    """Nothing ran: every command still works and says why, nothing is plotted as zero."""
    p = tmp_path / "none.h5"
    axes = {"device": [CPU_KEY], "engine": ["onednn"], "network": ["alexnet", "vgg16"], "precision": ["bf16"],
            "batch": [8], "phase": ["training"], "replica": [0]}
    write_cube(p, axes, [dict(device=CPU_KEY, engine="onednn", network="alexnet", precision="bf16", batch=8,
                              phase="training", replica=0, status="unsupported", message="no native bf16")])
    r = cli("report", p, "-o", tmp_path / "rep")
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "unsupported: no native bf16" in md and "not run" in md
    assert "No figure for bf16 at batch 8: no cell was measured" in md
    prices = tmp_path / "p.csv"
    prices.write_text("CPU,1000\n")
    r = cli("procurement", p, "--prices", prices, "-o", tmp_path / "proc")
    assert r.returncode == 0, r.stderr
    assert "not measured" in r.stdout and "alexnet: unsupported" in r.stdout
    assert _is_png(tmp_path / "proc" / "pareto.png")


def test_variable_in_another_axis_order_loads_by_its_scales(tmp_path):
    """A variable stored with its axes in another order is placed by its dimension scales."""
    p = tmp_path / "c.h5"
    write_h5py_cube(p)
    before = cubemod.load(p).ds["median_ms"].values
    with h5py.File(p, "r+") as f:
        data = f["median_ms"][()]
        scales = [f["median_ms"].dims[i][0] for i in range(8)]
        order = [7, 6, 5, 4, 3, 2, 1, 0]
        del f["median_ms"]
        ds = f.create_dataset("median_ms", data=np.transpose(data, order))
        for i, axis in enumerate(order):
            ds.dims[i].attach_scale(scales[axis])
    after = cubemod.load(p).ds["median_ms"].values
    np.testing.assert_array_equal(np.isnan(before), np.isnan(after))
    np.testing.assert_allclose(before[~np.isnan(before)], after[~np.isnan(after)])


def test_missing_required_variable_is_refused(tmp_path):
    p = tmp_path / "c.h5"
    write_h5py_cube(p)
    with h5py.File(p, "r+") as f:
        del f["status"]
    r = cli("export", p, "--csv", tmp_path / "x.csv")
    assert r.returncode == 2 and "lacks the variable 'status'" in r.stderr


# ---------------------------------------------------------------------------
# schema 1: read as single-device cells

def test_schema1_cube_reads_as_single_device(tmp_path):
    """A schema-1 cube (no gpus axis) loads as gpus = [1] with NaN exposed communication
    and scaling efficiency, holds the same cells as the schema-2 cube's gpus = 1 slice,
    and every command works on it."""
    p1, p2 = tmp_path / "v1.h5", tmp_path / "v2.h5"
    write_h5py_cube(p1, schema=cubemod.SCHEMA_1)
    write_h5py_cube(p2)
    with h5py.File(p1, "r") as f:
        assert "gpus" not in f and "scaling_efficiency" not in f and "exposed_communication_ms" not in f
        assert f["status"].ndim == 7 and f["samples_ms"].ndim == 8
    c1, c2 = cubemod.load(p1), cubemod.load(p2)
    assert c1.schema == "crossbench-cube/1" and c2.schema == "crossbench-cube/2"
    assert c1.gpus == [1] and c2.gpus == [1, 2]
    assert c1.ds["status"].dims == cubemod.CELL_DIMS
    assert c1.ds["samples_ms"].dims == cubemod.CELL_DIMS + ("step",)
    # The variables schema 1 lacks are filled, not reported missing.
    assert c1.missing_vars == []
    assert c1.cells["exposed_communication_ms"].isna().all() and c1.cells["scaling_efficiency"].isna().all()
    assert set(c1.cells["gpus"]) == {1}
    one = c2.ds.sel(gpus=[1])
    assert (c1.ds["status"].values == one["status"].values).all()
    for v in ("median_ms", "ci_low_ms", "images_per_s", "samples_ms"):
        np.testing.assert_array_equal(c1.ds[v].values, one[v].values)
    assert (c1.ds["message"].values == one["message"].values).all()
    assert len(c1.cells) == len(c2.cells) // 2

    # report: the schema is said, section 5 has nothing to scale.
    r = cli("report", p1, "-o", tmp_path / "rep")
    assert r.returncode == 0, r.stderr
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "schema `crossbench-cube/1`, from before data-parallel training" in md
    sec5 = md.split(f"## {SECTIONS[5]}")[1].split(f"## {SECTIONS[6]}")[0]
    assert "no data-parallel cells" in sec5 and "predates data-parallel training" in sec5
    assert not list((tmp_path / "rep" / "figures").glob("fig5-*"))
    # scaling: nothing to scale, said so.
    r = cli("scaling", p1)
    assert r.returncode == 0 and "no data-parallel cells" in r.stdout
    # export: the gpus column, all 1.
    r = cli("export", p1, "--csv", tmp_path / "v1.csv")
    assert r.returncode == 0, r.stderr
    with (tmp_path / "v1.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(c1.cells) and {r["gpus"] for r in rows} == {"1"}
    # compare schema 1 against schema 2: the gpus = 1 cells match and are unchanged;
    # the data-parallel ones exist in NEW only and do not fail.
    r = cli("compare", p1, p2, "--csv", tmp_path / "cmp.csv")
    assert r.returncode == 0, r.stdout + r.stderr
    import pandas as pd
    t = pd.read_csv(tmp_path / "cmp.csv")
    assert len(t) == len(c2.cells)
    assert t.loc[t["gpus"] == 1, "verdict"].isin(["unchanged", "within noise (CIs overlap)", "not run in either"]).all()
    assert t.loc[t["gpus"] == 2, "verdict"].str.startswith("only in NEW").all()
    # procurement compares single devices: schema 1 and 2 give the same table.
    prices = tmp_path / "prices.csv"
    prices.write_text(f'"{GPU_KEY}",30000,700\n"{CPU_KEY}",9000,300\n')
    outs = []
    for p in (p1, p2):
        r = cli("procurement", p, "--prices", prices, "-o", tmp_path / f"proc-{p.stem}", "--network", "resnet50",
                "--batch", "16")
        assert r.returncode == 0, r.stderr
        outs.append(pd.read_csv(tmp_path / f"proc-{p.stem}" / "procurement.csv"))
    pd.testing.assert_frame_equal(outs[0], outs[1])
    assert np.isfinite(outs[0]["images_per_s"]).all()


TELEMETRY_VARS = ("min_sm_clock_mhz", "mean_power_w", "max_temperature_c")


def test_cpp_writer_records_the_telemetry_variables(tmp_path):
    """The C++ writer's sample (tests/cube/sample_cube.hpp) records min SM clock, mean power and max
    temperature of its ok cells; load() reads them, NaN where the cell is not ok."""
    exe = find_binary("write_sample_cube")
    if exe is None:
        pytest.skip(f"write_sample_cube (the C++ writer's sample program) is not built under {BUILD}")
    path = tmp_path / "writer.h5"
    r = subprocess.run([str(exe), str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    c = cubemod.load(path)
    assert c.missing_vars == []
    ok = c.cells[c.cells["status"] == "ok"]
    assert len(ok) == 4
    assert (ok["min_sm_clock_mhz"] == 1755.0).all()
    assert (ok["mean_power_w"] == 612.5).all()
    assert (ok["max_temperature_c"] == 57.0).all()
    assert c.ds["max_temperature_c"].dtype == np.float64
    assert c.cells.loc[c.cells["status"] != "ok", list(TELEMETRY_VARS)].isna().all().all()


def test_the_efficiency_table_shows_each_cells_power_and_temperature(tmp_path):
    """The report's efficiency table carries the C++ writer's mean power and hottest temperature of each ok
    cell, and leaves them empty for a cube written before they were recorded."""
    exe = find_binary("write_sample_cube")
    if exe is None:
        pytest.skip(f"write_sample_cube (the C++ writer's sample program) is not built under {BUILD}")
    path = tmp_path / "writer.h5"
    r = subprocess.run([str(exe), str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr

    def efficiency_rows(cube, out):
        r = cli("report", cube, "-o", out)
        assert r.returncode == 0, f"report failed:\n{r.stdout}\n{r.stderr}"
        lines = (out / "report.md").read_text().splitlines()
        rows = []
        for header in (i for i, line in enumerate(lines) if "| mean power [W] |" in line):  # every such table
            names = [c.strip() for c in lines[header].strip("|").split("|")]
            for line in lines[header + 2:]:
                if not line.startswith("|"):
                    break
                rows.append(dict(zip(names, (c.strip() for c in line.strip("|").split("|")))))
        assert rows, "no efficiency table with a power column"

        def measured(row):  # an ok cell: a number where others name their status
            try:
                return float(row["effective TFLOP/s"].replace(",", "")) > 0
            except ValueError:
                return False
        return [row for row in rows if measured(row)]

    ok_rows = efficiency_rows(path, tmp_path / "new")
    assert len(ok_rows) >= 1  # the section shows one batch size: the sample has one ok cell at it
    assert all(row["mean power [W]"] == "612.5" and row["max temperature [°C]"] == "57" for row in ok_rows)
    with h5py.File(path, "r+") as f:
        for name in TELEMETRY_VARS:
            del f[name]
    older = efficiency_rows(path, tmp_path / "older")
    assert len(older) == len(ok_rows)
    assert all(row["mean power [W]"] == "" and row["max temperature [°C]"] == "" for row in older)


@pytest.mark.parametrize("writer", ["h5py", "writer"])
def test_older_cube_without_the_telemetry_variables_loads_with_nan(tmp_path, writer):
    """A cube written before min_sm_clock_mhz, mean_power_w and max_temperature_c (the schema string
    unchanged: the h5py writer's schema 2, the C++ writer's schema 4) lacks them: it loads, they are
    NaN, and they are not reported missing."""
    p = tmp_path / "older.h5"
    if writer == "h5py":
        write_h5py_cube(p)
        schema, clock = cubemod.SCHEMA_2, 1755.0
    else:
        exe = find_binary("write_sample_cube")
        if exe is None:
            pytest.skip(f"write_sample_cube (the C++ writer's sample program) is not built under {BUILD}")
        r = subprocess.run([str(exe), str(p)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        schema, clock = cubemod.SCHEMA_4, 1980.0
    with h5py.File(p, "r+") as f:
        for name in TELEMETRY_VARS:
            assert name in f, name  # today's writers record them
            del f[name]
    c = cubemod.load(p)
    assert c.schema == schema
    assert c.missing_vars == []
    for name in TELEMETRY_VARS:
        assert c.ds[name].dims == cubemod.CELL_DIMS and c.ds[name].dtype == np.float64
        assert c.cells[name].isna().all(), name
    # The rest of the cube reads as before: the ok single-GPU cells keep their mean SM clock.
    cells = c.cells
    ok = cells[(cells["status"] == "ok") & cells["device"].str.startswith("NVIDIA") & (cells["gpus"] == 1)]
    assert len(ok) > 0 and (ok["mean_sm_clock_mhz"] == clock).all()
    # A variable that every cube of the schema has is still reported when absent.
    with h5py.File(p, "r+") as f:
        del f["energy_j_per_image"]
    assert cubemod.load(p).missing_vars == ["energy_j_per_image"]


def test_write_schema1_refuses_data_parallel_cells(tmp_path):
    axes = {"device": [GPU_KEY], "engine": ["cudnn"], "network": ["alexnet"], "precision": ["fp32"],
            "batch": [8], "phase": ["training"], "replica": [0]}
    cell = dict(device=GPU_KEY, engine="cudnn", network="alexnet", precision="fp32", batch=8, phase="training",
                replica=0, gpus=2, status="failed")
    with pytest.raises(ValueError, match="no gpus axis"):
        write_cube(tmp_path / "x.h5", axes, [cell], schema=cubemod.SCHEMA_1)
    with pytest.raises(ValueError, match="no gpus axis"):
        write_cube(tmp_path / "x.h5", dict(axes, gpus=[1, 2]), [], schema=cubemod.SCHEMA_1)


# ---------------------------------------------------------------------------
# data-parallel scaling

def write_scaling_cube(path: Path, with_efficiency: bool = True) -> None:
    """Exact numbers: resnet50 training at batch 32 takes 10 ms on 1 GPU (3200 images/s),
    12.5 ms on 2 (5120 images/s: efficiency 0.8, 2.5 ms exposed communication) and
    10.5 ms on 4 (efficiency 32 / 33.6 = 0.952..., 0.5 ms exposed); alexnet training
    failed on 1 GPU, ran on 2 (4 ms, 1 ms exposed: no efficiency) and timed out on 4;
    the inference cells with gpus > 1 are unsupported (by design)."""
    axes = {"device": [GPU_KEY], "engine": ["cudnn"], "network": ["alexnet", "resnet50"], "precision": ["fp32"],
            "batch": [32], "phase": ["inference", "training"], "gpus": [1, 2, 4], "replica": [0]}

    def at(network, phase, gpus):
        return dict(device=GPU_KEY, engine="cudnn", network=network, precision="fp32", batch=32, phase=phase,
                    gpus=gpus, replica=0)
    cells = [
        ok_cell(at("resnet50", "training", 1), [10.0] * 5, 32, throttled=0),
        ok_cell(at("resnet50", "training", 2), [12.5] * 5, 32, exposed_communication_ms=2.5, throttled=0),
        ok_cell(at("resnet50", "training", 4), [10.5] * 5, 32, exposed_communication_ms=0.5, throttled=0),
        dict(at("alexnet", "training", 1), status="failed", message="CUDNN_STATUS_INTERNAL_ERROR"),
        ok_cell(at("alexnet", "training", 2), [4.0] * 5, 32, exposed_communication_ms=1.0, throttled=0),
        dict(at("alexnet", "training", 4), status="timeout", message="cell time limit 60 s"),
        ok_cell(at("resnet50", "inference", 1), [3.0] * 5, 32),
        ok_cell(at("alexnet", "inference", 1), [1.0] * 5, 32),
    ]
    for n in ("alexnet", "resnet50"):
        for g in (2, 4):
            cells.append(dict(at(n, "inference", g), status="unsupported", message=INFERENCE_SINGLE_DEVICE))
    if with_efficiency:
        add_scaling_efficiency(cells)
    ranks = [dict(rank=i, host="gpu01", device_key=GPU_KEY, device_index=i) for i in range(4)]
    write_cube(path, axes, cells, ranks, attrs={"created": "2026-12-01T00:00:00Z"})


@pytest.mark.parametrize("with_efficiency", [True, False], ids=["from-cube", "computed"])
def test_scaling_table_exact(tmp_path, with_efficiency):
    p = tmp_path / "s.h5"
    write_scaling_cube(p, with_efficiency)
    c = cubemod.load(p)
    t = scaling_table(c.cells)
    # Training cells with gpus > 1 only: the unsupported inference ones are not rows.
    assert [(r.network, r.gpus) for r in t.itertuples()] == [("alexnet", 2), ("alexnet", 4), ("resnet50", 2),
                                                             ("resnet50", 4)]
    assert set(t.columns) >= {"gpus", "median_ms", "images_per_s", "scaling_efficiency",
                              "exposed_communication_ms", "exposed_share", "below_threshold", "note"}
    r = t.set_index(["network", "gpus"])
    source = "cube" if with_efficiency else "computed"

    two = r.loc[("resnet50", 2)]
    assert two["status"] == "ok" and two["median_ms"] == 12.5
    assert two["images_per_s"] == pytest.approx(5120)
    assert two["images_per_s_1gpu"] == pytest.approx(3200) and two["ideal_images_per_s"] == pytest.approx(6400)
    assert two["scaling_efficiency"] == pytest.approx(0.8) and two["efficiency_source"] == source
    assert two["exposed_communication_ms"] == 2.5 and two["exposed_share"] == pytest.approx(0.2)
    assert bool(two["below_threshold"])
    assert two["note"] == "below 0.9: exposed communication 2.5 ms of 12.5 ms step (20%)"

    four = r.loc[("resnet50", 4)]
    assert four["scaling_efficiency"] == pytest.approx(4 * 32 / 10.5e-3 / (4 * 3200))
    assert four["scaling_efficiency"] == pytest.approx(10 / 10.5)
    assert not four["below_threshold"] and four["note"] == ""
    assert four["exposed_share"] == pytest.approx(0.5 / 10.5)

    # The gpus = 1 cell failed: no efficiency, so not flagged, and the note says why.
    a2 = r.loc[("alexnet", 2)]
    assert a2["status"] == "ok" and a2["images_per_s"] == pytest.approx(2 * 32 / 4e-3)
    assert np.isnan(a2["scaling_efficiency"]) and np.isnan(a2["images_per_s_1gpu"])
    assert a2["baseline_status"] == "failed" and not a2["below_threshold"]
    assert a2["note"] == "no efficiency: the gpus = 1 cell is failed"
    assert a2["exposed_share"] == pytest.approx(0.25)
    # A data-parallel cell that timed out stays a row, with its status and NaNs.
    a4 = r.loc[("alexnet", 4)]
    assert a4["status"] == "timeout" and a4["note"] == "timeout: cell time limit 60 s"
    assert np.isnan(a4["median_ms"]) and np.isnan(a4["scaling_efficiency"]) and not a4["below_threshold"]

    # The threshold is a parameter.
    assert not scaling_table(c.cells, threshold=0.75)["below_threshold"].any()
    assert list(scaling_table(c.cells, threshold=0.96)["below_threshold"]) == [False, False, True, True]
    # No data-parallel cell: an empty table with the same columns.
    empty = scaling_table(c.cells[c.cells["gpus"] == 1])
    assert empty.empty and list(empty.columns) == list(t.columns)


def test_scaling_cli_and_report(tmp_path):
    p = tmp_path / "s.h5"
    write_scaling_cube(p)
    r = cli("scaling", p, "--csv", tmp_path / "s.csv")
    assert r.returncode == 0, r.stderr
    assert "4 data-parallel training cell(s): 3 ok, 1 below 0.9 scaling efficiency" in r.stdout
    flagged = [ln for ln in r.stdout.splitlines() if "FLAG" in ln]
    assert len(flagged) == 1
    assert "| resnet50 | fp32 | 32 | 2 | ok | 12.5 | 5120 | 3200 | 0.800 | 2.5 | 20.0% |" in flagged[0]
    assert "FLAG below 0.9: exposed communication 2.5 ms of 12.5 ms step (20%)" in flagged[0]
    import pandas as pd
    t = pd.read_csv(tmp_path / "s.csv")
    assert len(t) == 4 and int(t["below_threshold"].sum()) == 1
    r = cli("scaling", p, "--threshold", "75%")
    assert r.returncode == 0 and "FLAG" not in r.stdout and "0 below 0.75" in r.stdout
    r = cli("scaling", p, "--threshold", "1.5")
    assert r.returncode == 2

    out = tmp_path / "rep"
    r = cli("report", p, "-o", out)
    assert r.returncode == 0, r.stderr
    md = (out / "report.md").read_text()
    sec5 = md.split(f"## {SECTIONS[5]}")[1].split(f"## {SECTIONS[6]}")[0]
    assert "4 data-parallel training cell(s): 3 ok, 1 below 0.9 efficiency, 1 ok without an efficiency" in sec5
    assert (f"**{GPU_KEY}, cudnn, resnet50, fp32, batch 32, gpus 2**: efficiency 0.80, below 0.9: "
            "exposed communication 2.5 ms of 12.5 ms step (20%)") in sec5
    rows = {ln.split(" | ")[1] + "/" + ln.split(" | ")[3]: ln for ln in sec5.splitlines() if ln.startswith("| cudnn")}
    assert set(rows) == {"alexnet/2", "alexnet/4", "resnet50/2", "resnet50/4"}
    assert "| 12.5 | 5120 | 3200 | 0.800 | 2.5 | 20.0% | below 0.9 |" in rows["resnet50/2"]
    assert "| 0.952 |" in rows["resnet50/4"] and "below 0.9" not in rows["resnet50/4"]
    assert "| failed | unknown |" in rows["alexnet/2"] and "the gpus = 1 cell is failed" in rows["alexnet/2"]
    assert "| timeout | timeout |" in rows["alexnet/4"]
    assert _is_png(out / "figures" / "fig5-d0-nvidia-h100-80gb-hbm3-fp32.png")
    # Sections 1-4 are single-device: resnet50 training reads 10 ms (gpus = 1), not 12.5.
    sec1 = _section1_tables(md)
    assert sec1[(f"{GPU_KEY} — fp32, batch 32", "resnet50", "training · cudnn")].startswith("10 ms")
    # The summary counts the inference cells with gpus > 1 apart and does not list them.
    summary = md.split("## Summary")[1].split(f"## {SECTIONS[0]}")[0]
    assert "4 of the unsupported cells are inference cells with gpus > 1" in summary
    assert INFERENCE_SINGLE_DEVICE not in summary
    assert "| timeout | " in summary and "| failed | " in summary


def test_scaling_on_the_h5py_cube(tmp_path):
    """The h5py cube's data-parallel cells (write_h5py_cube, DP_FACTOR), two replicas each."""
    p = tmp_path / "c.h5"
    write_h5py_cube(p)
    c = cubemod.load(p)
    t = scaling_table(c.cells)
    assert (t["gpus"] == 2).all() and (t["n_replicas"] == 2).all()
    assert len(t) == len(c.cells[(c.cells["phase"] == "training") & (c.cells["gpus"] == 2)]
                         .drop_duplicates(["device", "network", "precision", "batch"]))
    ok = t[t["status"] == "ok"]
    eff = ok["scaling_efficiency"]
    # Flagged exactly where the efficiency is known and below 0.9.
    assert list(ok["below_threshold"]) == list(eff.notna() & (eff < 0.9))
    assert not t.loc[t["status"] != "ok", "below_threshold"].any()
    gpu = t[t["device"] == GPU_KEY].set_index(["network", "precision", "batch"])
    for prec in ("fp32", "bf16"):
        for b in (16, 32, 64):
            a = gpu.loc[("alexnet", prec, b)]
            assert a["scaling_efficiency"] == pytest.approx(1 / 1.4, rel=0.01) and a["below_threshold"]
            assert a["note"].startswith("below 0.9: exposed communication ")
            assert a["exposed_share"] == pytest.approx(0.4 / 1.4, rel=0.01)
            assert gpu.loc[("vgg11", prec, 64), "status"] == "oom"
            r50 = gpu.loc[("resnet50", prec, 32)]     # its gpus = 1 twin failed
            assert r50["status"] == "ok" and np.isnan(r50["scaling_efficiency"]) and not r50["below_threshold"]
    assert gpu.loc[("vgg11", "bf16", 16), "note"].startswith("below 0.9: exposed communication not measured")
    assert gpu.loc[("vgg11", "fp32", 32), "efficiency_source"] == "computed"
    assert gpu.loc[("vgg11", "fp32", 32), "scaling_efficiency"] == pytest.approx(1 / 1.03, rel=0.01)
    assert gpu.loc[("resnet50", "bf16", 16), "status"] == "timeout"
    cpu = t[t["device"] == CPU_KEY]
    assert len(cpu) and (cpu["status"] == "unsupported").all() and cpu["note"].str.contains("needs 2 ranks").all()
    assert not (t["note"].str.contains("single-device")).any()


def test_compare_matches_cells_on_gpus(tmp_path):
    """A 20% slowdown planted in the gpus = 2 cells only: compare flags data-parallel
    cells only, each against the same group size (never against the gpus = 1 cell)."""
    p = tmp_path / "c.h5"
    write_h5py_cube(p)
    slow = tmp_path / "slow.h5"
    _rewrite_times(p, slow, lambda m, lo, hi: np.full_like(m, 1.2), only_gpus=2)
    c = cubemod.load(p)
    r = cli("compare", p, slow, "--csv", tmp_path / "cmp.csv")
    assert r.returncode == 1, r.stdout + r.stderr
    import pandas as pd
    t = pd.read_csv(tmp_path / "cmp.csv")
    assert len(t) == len(c.cells)
    assert not t.duplicated(list(cubemod.CELL_DIMS)).any()
    assert (t.loc[t["gpus"] == 1, "verdict"].isin(["unchanged", "within noise (CIs overlap)", "not run in either"])).all()
    flagged = t[t["regression"]]
    assert len(flagged) and (flagged["gpus"] == 2).all()
    ok2 = c.cells[(c.cells["status"] == "ok") & (c.cells["gpus"] == 2)]
    m, lo, hi = ok2["median_ms"], ok2["ci_low_ms"], ok2["ci_high_ms"]
    expected = ok2[0.2 * m > np.hypot(hi - m, 1.2 * (m - lo))]
    key = list(cubemod.CELL_DIMS)
    as_set = lambda df: {tuple(str(v) for v in row) for row in df[key].itertuples(index=False)}  # noqa: E731
    assert as_set(flagged) == as_set(expected)
    head = next(ln for ln in r.stdout.splitlines() if ln.startswith("|  | verdict"))
    assert "| phase | gpus | replica |" in head
    assert any(" | 2 | 0 | " in ln and "REGRESSION" in ln for ln in r.stdout.splitlines())
    # The slowed cube's scaling table sees the lower efficiency.
    before = scaling_table(c.cells).set_index(["device", "network", "precision", "batch"])
    after = scaling_table(cubemod.load(slow).cells).set_index(["device", "network", "precision", "batch"])
    both = before["scaling_efficiency"].notna() & (before["efficiency_source"] == "cube")
    np.testing.assert_allclose(after.loc[both, "scaling_efficiency"], before.loc[both, "scaling_efficiency"] / 1.2)


# ---------------------------------------------------------------------------
# the synthetic writer lays a cube out as the C++ writer does

def test_synthetic_cube_layout(tmp_path):
    p = tmp_path / "s.h5"
    write_scaling_cube(p)
    with h5py.File(p, "r") as f:
        schema = f.attrs.get_id("schema")
        assert schema.get_type().get_class() == h5py.h5t.STRING and not schema.get_type().is_variable_str()
        assert schema.get_type().get_strpad() == h5py.h5t.STR_NULLTERM
        assert f.attrs["schema"] == b"crossbench-cube/2"
        assert f.attrs["hdf5_version"] == h5py.version.hdf5_version.encode()
        assert isinstance(f["status_t"], h5py.Datatype)
        assert h5py.check_enum_dtype(f["status"].dtype) == {n: i for i, n in enumerate(cubemod.STATUS_NAMES)}
        assert f["status"].attrs["flag_meanings"] == b"not_run ok oom unsupported failed timeout"
        assert list(f["status"].attrs["flag_values"]) == [0, 1, 2, 3, 4, 5]
        assert f["status"].fillvalue == 0
        assert f["gpus"].dtype == np.int32 and list(f["gpus"][()]) == [1, 2, 4]
        assert f["gpus"].attrs["units"] == b"1" and f["batch"].dtype == np.int64
        for name in ("status", "median_ms", "scaling_efficiency", "rank", "message", "decisions"):
            dims = [f[name].dims[i][0].name.rsplit("/", 1)[-1] for i in range(f[name].ndim)]
            assert tuple(dims) == cubemod.CELL_DIMS, name
        for name in cubemod.FLOAT_VARS:
            v = f[name]
            assert v.dtype == np.float64 and np.isnan(v.attrs["_FillValue"]) and np.isnan(v.fillvalue)
            assert "long_name" in v.attrs and "units" in v.attrs, name
        assert f["exposed_communication_ms"].attrs["units"] == b"ms"
        assert f["scaling_efficiency"].attrs["units"] == b"1"
        for name, (dtype, fill) in {"throttled": (np.int8, -1), "steps": (np.int32, 0),
                                    "rank": (np.int32, -1)}.items():
            assert f[name].dtype == dtype and f[name].fillvalue == fill and "_FillValue" not in f[name].attrs
        sm = f["samples_ms"]
        assert sm.chunks == (1,) * 8 + (5,) and sm.compression == "gzip" and sm.compression_opts == 4
        assert sm.shuffle
        dims = [sm.dims[i][0].name.rsplit("/", 1)[-1] for i in range(sm.ndim)]
        assert tuple(dims) == cubemod.CELL_DIMS + ("step",)
        # Numbers only where ok; steps, rank and messages for every status.
        st = cubemod._read_status(f["status"])
        assert np.isnan(f["median_ms"][()][st != "ok"]).all()
        assert (f["throttled"][()][st != "ok"] == -1).all()
        assert f["scaling_efficiency"][0, 0, 1, 0, 0, 1, 1, 0] == pytest.approx(0.8)
        assert np.isnan(f["scaling_efficiency"][0, 0, 1, 0, 0, 1, 0, 0])
        assert f["message"].asstr()[0, 0, 0, 0, 0, 0, 1, 0] == INFERENCE_SINGLE_DEVICE
    netCDF4 = pytest.importorskip("netCDF4")
    with netCDF4.Dataset(p) as nc:
        # Creation order as the C++ writer: coordinates, the enum, status, the floats, ...
        assert list(nc.variables)[:11] == list(cubemod.CELL_DIMS) + ["step", "status", "median_ms"]
        assert list(nc.variables)[-6:] == ["throttled", "steps", "rank", "message", "decisions", "samples_ms"]
        floats = list(nc.variables)[10:10 + len(cubemod.FLOAT_VARS)]
        assert floats == list(cubemod.FLOAT_VARS)
        assert nc.enumtypes["status_t"].enum_dict == {n: i for i, n in enumerate(cubemod.STATUS_NAMES)}
        assert nc.groups["ranks"].dimensions["rank_row"].size == 4
    import xarray as xr
    with xr.open_dataset(p) as ds:
        assert ds["median_ms"].dims == cubemod.CELL_DIMS and ds["gpus"].dtype == np.int32
        assert float(ds["images_per_s"].sel(network="resnet50", phase="training", gpus=2, batch=32,
                                             replica=0).squeeze()) == pytest.approx(5120)


def test_demo_cube_is_data_parallel(tmp_path):
    from crossbench_analysis.synthetic import demo_cube
    p = tmp_path / "demo.h5"
    r = cli("demo-cube", p)
    assert r.returncode == 0, r.stderr
    c = cubemod.load(p)
    assert c.schema == "crossbench-cube/2" and c.gpus == [1, 2, 4]
    t = scaling_table(c.cells)
    assert len(t) and (t["status"] == "ok").all() and t["below_threshold"].any() and (~t["below_threshold"]).any()
    ok = t.dropna(subset=["scaling_efficiency"])
    np.testing.assert_allclose(ok["scaling_efficiency"], ok["images_per_s"] / ok["ideal_images_per_s"], rtol=1e-12)
    r = cli("report", p, "-o", tmp_path / "rep")
    assert r.returncode == 0, r.stderr
    assert list((tmp_path / "rep" / "figures").glob("fig5-*"))
    del demo_cube
