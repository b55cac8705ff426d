"""What a buyer reads, checked on the committed H200 cubes (bench/results/):
figures that cannot mislead (no overlapping labels, no bars on log axes,
effective TFLOP/s with above-peak cells explained, one colour per engine), a
report that answers first (headline, layer times), exports with provenance,
compare's warnings and geometric mean, and procurement (best precision, power
per engine, cost of ownership, the README's prices example, two devices on
the Pareto figure)."""
import csv
import math
import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "analysis"))

from crossbench_analysis import cube_extras, plots, procurement  # noqa: E402
from crossbench_analysis.analysis import STUDY_NETWORKS, collapse_replicas, single_device  # noqa: E402
from crossbench_analysis.cube import CELL_DIMS, FLOAT_VARS, load  # noqa: E402
from crossbench_analysis.report import HEADLINE, SECTIONS, Report, fmt  # noqa: E402
from crossbench_analysis.synthetic import demo_cube, write_cube  # noqa: E402

RESULTS = REPO / "bench" / "results" / "h200-2026-11-30"
FOUR_ENGINES = RESULTS / "seed2017_four_engines.h5"      # cudnn, pytorch, pytorch-compile, jax
LAYER_TIMES = RESULTS / "seed2017_explicit_gemm.h5"      # cudnn with /layer_times
H200 = "NVIDIA H200 (132 SMs, sm_90, 140 GiB)"
CAPPED = H200 + " [power=500W]"


def cli(*args):
    return subprocess.run([sys.executable, "-m", "crossbench_analysis", *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, env={"PYTHONPATH": str(REPO / "analysis"), "PATH": "/usr/bin:/bin"},
                          timeout=600)


@pytest.fixture(scope="module")
def two_devices(tmp_path_factory):
    """The four-engine H200 cube plus a second device key: the same cells tagged
    power=500W, 1.25x slower and at 0.8x the energy per image (made-up numbers
    for the second device, like any test cube)."""
    real = load(FOUR_ENGINES)
    cells = []
    for r in real.cells.itertuples(index=False):
        row = r._asdict()
        base = {d: row[d] for d in CELL_DIMS}
        base["status"] = row["status"]
        for var in FLOAT_VARS + ("throttled", "rank"):
            if var in row and not (isinstance(row[var], float) and math.isnan(row[var])):
                base[var] = row[var]
        cells.append(base)
        slow = dict(base, device=CAPPED, rank=1)
        for var in ("median_ms", "mean_ms", "min_ms", "max_ms", "p05_ms", "p95_ms", "ci_low_ms", "ci_high_ms"):
            if var in slow:
                slow[var] *= 1.25
        for var in ("images_per_s", "tflops"):
            if var in slow:
                slow[var] /= 1.25
        if "energy_j_per_image" in slow:
            slow["energy_j_per_image"] *= 0.8
        cells.append(slow)
    axes = {d: real.axis(d) for d in CELL_DIMS}
    axes["device"] = [H200, CAPPED]
    ranks = [dict(rank=0, host="vm", device_key=H200, device_index=0, uuid="GPU-a", power_limit_w=700),
             dict(rank=1, host="vm", device_key=CAPPED, device_index=0, uuid="GPU-a", power_limit_w=500)]
    path = tmp_path_factory.mktemp("two") / "two_devices.h5"
    write_cube(path, axes, cells, ranks, attrs={k: v for k, v in real.attrs.items() if k != "schema"})
    return path


def build_report(path, out):
    report = Report(load(path), out)
    doc = report.build()
    (Path(out) / "report.md").write_text(doc.markdown(report.out))
    return doc, (Path(out) / "report.md").read_text()


@pytest.fixture(scope="module")
def four_engine_report(tmp_path_factory):
    return build_report(FOUR_ENGINES, tmp_path_factory.mktemp("four"))


@pytest.fixture(scope="module")
def layer_report(tmp_path_factory):
    return build_report(LAYER_TIMES, tmp_path_factory.mktemp("layers"))


# ---------------------------------------------------------------------------
# figures

@pytest.mark.parametrize("which", ["four_engine_report", "layer_report", "demo"])
def test_every_figure_has_no_overlapping_label_and_no_bar_on_a_log_axis(which, request, tmp_path):
    if which == "demo":      # every status, batch sweep, data-parallel cells, two devices
        demo_cube(tmp_path / "demo.h5")
        doc, _ = build_report(tmp_path / "demo.h5", tmp_path / "demo")
    else:
        doc, _ = request.getfixturevalue(which)
    assert len(doc.figures) >= 6
    assert doc.figure_problems == []


def test_label_check_sees_an_overlap():
    """The check itself: two labels drawn on the same spot, one rotated, overlap."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.text(0.5, 0.5, "0.46×", rotation=90)
    ax.text(0.5, 0.52, "0.47×", rotation=90)
    ax.text(0.1, 0.1, "far away")
    assert plots.label_overlaps(fig) == [("0.46×", "0.47×")]
    plt.close(fig)


def test_effective_tflops_and_cells_above_peak_explained(four_engine_report):
    _, md = four_engine_report
    sec4 = md.split(f"## {SECTIONS[3]}")[1].split(f"## {SECTIONS[4]}")[0]
    assert "**Effective** TFLOP/s = the network's direct-convolution FLOP count" in sec4
    # Which cells exceed the H200's 67 TFLOP/s fp32 peak, from the cube itself.
    cube = load(FOUR_ENGINES)
    c = cube.cells
    above = c[(c["status"] == "ok") & (c["precision"] == "fp32") & (c["tflops"] > 67)]
    assert len(above), "the committed cube has fp32 cells above peak"
    decisions = cube_extras.decisions(cube).set_index(list(CELL_DIMS))["decisions"]
    for r in above.itertuples():
        text = decisions.loc[tuple(getattr(r, d) for d in CELL_DIMS)]
        reason = cube_extras.above_peak_reason(text, "fp32")
        assert ("FFT" in reason or "WINOGRAD" in reason) and ("FFT" in text or "WINOGRAD" in text)
        row = [ln for ln in sec4.splitlines() if ln.startswith("| NVIDIA H200") and f"| {r.engine} | {r.network} |"
               in ln and "| fp32 |" in ln and f"| {r.phase} |" in ln]
        assert len(row) == 1 and reason in row[0], row
    assert f"**{len(above)} cell(s) exceed the device's peak**" in sec4


def test_above_peak_reason_words():
    assert cube_extras.above_peak_reason("conv2:fwd=FFT/fma; conv3:fwd=WINOGRAD_NONFUSED/fma", "fp32") == (
        "FFT/WINOGRAD_NONFUSED convolutions (fewer multiplications than the direct count)")
    assert "TF32" in cube_extras.above_peak_reason("fc=cublas/32F_FAST_TF32", "fp32")
    assert "check the measurement" in cube_extras.above_peak_reason("conv1:fwd=IMPLICIT_GEMM", "fp32")


def test_efficiency_figure_says_effective_and_flags_above_peak():
    import matplotlib.pyplot as plt
    cells = single_device(collapse_replicas(load(FOUR_ENGINES).cells))
    d = cells[(cells["precision"] == "fp32") & (cells["batch"] == 64)]
    engines = ["cudnn", "pytorch", "pytorch-compile", "jax"]
    reasons = {("cudnn", "overfeat", "training"): "FFT convolutions"}
    fig = plots.fig_efficiency(d, H200, "fp32", 64, engines, plots.engine_colors(engines), 67.0, "peaks.csv",
                               reasons)
    assert "effective TFLOP/s" in fig.axes[0].get_ylabel() and "direct-convolution" in fig.axes[0].get_ylabel()
    header = " ".join(t.get_text() for t in fig.texts)
    assert "(direct-convolution FLOPs)" in header
    assert "overfeat training cudnn" in header and "FFT convolutions" in header
    flagged = [p for ax in fig.axes for p in ax.patches if p.get_gid() == "cell-ok" and p.get_hatch()]
    n_above = int(((d["status"] == "ok") & (d["tflops"] > 67.0)).sum())
    assert len(flagged) == n_above > 0
    plt.close(fig)


def test_one_colour_per_engine_in_every_figure():
    assert plots.engine_color("pytorch") == plots.ENGINE_PALETTE["pytorch"]
    assert plots.engine_colors(["jax", "cudnn"]) == plots.engine_colors(["cudnn", "jax"])  # not by position
    assert plots.engine_color("my-framework") == plots.engine_color("my-framework")
    engine_hues = set(plots.ENGINE_PALETTE.values()) | set(plots.EXTRA_ENGINE_COLORS)
    assert not engine_hues & set(plots.GREYS)   # group sizes and devices are greys
    # fig5's group sizes: greys, never an engine's colour.
    import matplotlib.colors as mcolors
    import matplotlib.pyplot as plt
    t = pd.DataFrame([dict(engine="cudnn", network="resnet50", batch=32, gpus=g, status="ok", scaling_efficiency=e,
                           below_threshold=e < 0.9, baseline_status="ok") for g, e in ((1, 1.0), (2, 0.95))])
    fig = plots.fig_scaling(t, H200, "bf16", 0.9)
    colours = {mcolors.to_hex(p.get_facecolor()) for ax in fig.axes for p in ax.patches if p.get_gid() == "cell-ok"}
    assert colours and not colours & engine_hues
    plt.close(fig)


def test_ci_is_printed_as_plus_minus_percent():
    assert plots.ci_pct(1.622, 1.620, 1.625) == "±0.2%"
    assert plots.ci_pct(100.0, 99.99, 100.0) == "±<0.1%"
    assert plots.ci_pct(10.0, 9.0, 10.5) == "±10.0%"


# ---------------------------------------------------------------------------
# the report answers first

def test_headline_comes_first_with_the_fastest_engines_and_the_ranking(four_engine_report):
    _, md = four_engine_report
    assert md.split("\n## ")[1].startswith(HEADLINE)
    head = md.split(f"## {HEADLINE}")[1].split("## Summary")[0]
    cells = single_device(collapse_replicas(load(FOUR_ENGINES).cells))
    ok = cells[(cells["status"] == "ok") & (cells["batch"] == 64)]
    for (ph, net, prec), g in ok.groupby(["phase", "network", "precision"]):
        g = g.sort_values("images_per_s", ascending=False)
        row = [ln for ln in head.splitlines() if ln.startswith(f"| {ph} | {net} |")]
        assert len(row) == 1
        assert f"| {g.iloc[0].engine}: {fmt(g.iloc[0].images_per_s, 4)}" in row[0]
    # The ranking: geometric mean over the study's networks of the fastest engine, at the best precision.
    train = ok[ok["phase"] == "training"]
    best = {p: math.exp(np.mean([math.log(train[(train["precision"] == p) & (train["network"] == n)]
                                          ["images_per_s"].max()) for n in STUDY_NETWORKS]))
            for p in train["precision"].unique()}
    top = max(best, key=best.get)
    assert top == "bf16" and best["bf16"] > 3 * best["fp32"]
    assert f"**1. {H200}**: {fmt(best[top], 4)} images/s at {top}" in head


def test_where_the_step_goes_draws_the_stored_layer_times(layer_report):
    doc, md = layer_report
    sec = md.split(f"## {SECTIONS[4]}")[1].split(f"## {SECTIONS[5]}")[0]
    figures = [p.name for p in doc.figures if p.name.startswith("fig-layers-")]
    assert len(figures) == 3   # one per precision: training, forward and backward
    with h5py.File(LAYER_TIMES, "r") as f:
        index = f["layer_times"]
        for name in index["group"].asstr()[...][:6]:
            g = index[name]
            total = g["forward_ms"][...] + g["backward_ms"][...]
            top = g["layer"].asstr()[...][int(np.argmax(total))]
            net, prec, phase = (g.attrs[k].decode() for k in ("network", "precision", "phase"))
            rows = [ln for ln in sec.splitlines() if f"| {net} | {prec} | {phase} | {top} |" in ln]
            assert rows, (net, prec, phase, top)
            share = 100 * total.max() / total.sum()
            assert f"| {share:.1f}% |" in rows[0]


def test_a_cube_without_layer_times_says_how_to_get_them(four_engine_report):
    _, md = four_engine_report
    sec = md.split(f"## {SECTIONS[4]}")[1].split(f"## {SECTIONS[5]}")[0]
    assert "stores no layer times: run with `--layer-times`" in sec


def test_export_carries_run_provenance(tmp_path):
    out = tmp_path / "cells.csv"
    r = cli("export", FOUR_ENGINES, "--csv", out)
    assert r.returncode == 0, r.stderr
    df = pd.read_csv(out, dtype=str, keep_default_na=False)
    with h5py.File(FOUR_ENGINES, "r") as f:
        attrs = {k: (v.decode() if isinstance(v, bytes) else str(v)) for k, v in f.attrs.items()}
        uuid = f["ranks/uuid"][0].decode()
        host = f["ranks/host"][0].decode()
    for name in ("git_revision", "crossbench_version", "cudnn_version", "cuda_runtime_version", "mpi_version"):
        assert (df[name] == attrs[name]).all(), name
    known = df["rank"] == "0"          # the cube's one rank; a cell of an earlier start (resumed) has rank -1
    assert known.sum() > 100
    assert (df.loc[known, "host"] == host).all() and (df.loc[known, "device_uuid"] == uuid).all()
    assert (df.loc[~known, "host"] == "").all() and (df.loc[~known, "device_uuid"] == "").all()


def test_compare_warns_about_other_gpus_and_revisions_and_gives_a_geomean(tmp_path):
    old, new = RESULTS / "seed2017_perf_next.h5", RESULTS / "seed2017_explicit_gemm.h5"
    r = cli("compare", old, new, "--csv", tmp_path / "cmp.csv")
    assert r.returncode in (0, 1), r.stderr
    a, b = load(old), load(new)
    assert f"WARNING: different git revisions: OLD {a.attrs['git_revision']}, NEW {b.attrs['git_revision']}" \
        in r.stdout
    assert f"{H200}: different physical GPUs: OLD {a.ranks['uuid'][0]}, NEW {b.ranks['uuid'][0]}" in r.stdout
    m = a.cells.merge(b.cells, on=list(CELL_DIMS), suffixes=("_o", "_n"))
    m = m[(m["status_o"] == "ok") & (m["status_n"] == "ok")]
    ratio = math.exp(np.log(m["median_ms_n"] / m["median_ms_o"]).mean())
    assert f"geometric mean of NEW ÷ OLD median time over {len(m)} cells ok in both: {ratio:.3f}" in r.stdout
    # The same cube against itself: no warning, ratio 1.
    r = cli("compare", old, old)
    assert "WARNING" not in r.stdout and ": 1.000 (no overall change; speedup 1.000×)" in r.stdout


# ---------------------------------------------------------------------------
# procurement

def readme_prices() -> str:
    text = (REPO / "analysis" / "README.md").read_text()
    block = text.split("### The prices file")[1].split("```csv\n")[1].split("```")[0]
    return block


def test_the_readme_prices_example_works_on_real_device_keys(two_devices, tmp_path):
    prices = tmp_path / "prices.csv"
    prices.write_text(readme_prices())
    out = tmp_path / "proc"
    r = cli("procurement", two_devices, "--prices", prices, "-o", out)
    assert r.returncode == 0, r.stdout + r.stderr
    t = pd.read_csv(out / "procurement.csv")
    assert sorted(t["device"]) == sorted([H200, CAPPED])
    assert (t["price"] == 32000).all()
    capped = t[t["device"] == CAPPED].iloc[0]
    assert capped["power_w"] == 500 and capped["power_source"] == "prices file"
    # Cost of ownership: price + power x 24 h x 365 x 3 years x 0.15 per kWh (the defaults).
    assert capped["tco"] == pytest.approx(32000 + 500 / 1000 * 24 * 365 * 3 * 0.15)
    assert "cost of ownership = price + energy at 0.15 USD/kWh (--kwh-price) for 3 years" in r.stdout
    # Into the same folder again: outputs are replaced only when asked (--force).
    r = cli("procurement", two_devices, "--prices", prices, "-o", out, "--kwh-price", "0.3", "--years", "5", "--force")
    assert r.returncode == 0, r.stdout + r.stderr
    t = pd.read_csv(out / "procurement.csv")
    assert t.loc[t["device"] == CAPPED, "tco"].iloc[0] == pytest.approx(32000 + 0.5 * 24 * 365 * 5 * 0.3)


def test_procurement_takes_each_device_at_its_best_precision(two_devices):
    cube = load(two_devices)
    prices = {d: procurement.Price(d, 30000.0, None, 1) for d in cube.devices}
    t, workload = procurement.procurement(cube, prices)
    assert "each device at its best precision" in workload
    assert list(t["precision"]) == ["bf16", "bf16"]
    cells = single_device(collapse_replicas(cube.cells))
    w = cells[(cells["phase"] == "training") & (cells["batch"] == 64) & (cells["precision"] == "bf16")
              & (cells["status"] == "ok") & (cells["device"] == H200)]
    expected = math.exp(np.mean([math.log(w[w["network"] == n]["images_per_s"].max()) for n in STUDY_NETWORKS]))
    assert t.loc[t["device"] == H200, "images_per_s"].iloc[0] == pytest.approx(expected)
    # --precision fp32 and --all-precisions.
    t32, _ = procurement.procurement(cube, prices, precision="fp32")
    assert list(t32["precision"]) == ["fp32", "fp32"]
    assert (t32["images_per_s"].values < t["images_per_s"].values).all()
    every, _ = procurement.procurement(cube, prices, all_precisions=True)
    assert sorted(zip(every["device"], every["precision"])) == sorted(
        (d, p) for d in cube.devices for p in ("fp32", "tf32", "bf16"))


def test_procurement_gives_power_for_every_engine_row(two_devices):
    cube = load(two_devices)
    prices = {d: procurement.Price(d, 30000.0, None, 1) for d in cube.devices}
    t, _ = procurement.procurement(cube, prices)
    engines = t.attrs["engines"]
    assert sorted(set(engines["engine"])) == ["cudnn", "jax", "pytorch", "pytorch-compile"]
    cells = single_device(collapse_replicas(cube.cells))
    for r in engines.itertuples():
        w = cells[(cells["device"] == r.device) & (cells["engine"] == r.engine) & (cells["precision"] == r.precision)
                  & (cells["phase"] == "training") & (cells["batch"] == 64) & (cells["status"] == "ok")]
        if w["energy_j_per_image"].notna().all():
            assert r.power_w == pytest.approx((w["energy_j_per_image"] * w["images_per_s"]).mean())
            assert r.power_source == "measured (energy × images/s)"
        else:   # the framework rows of the committed cube carry no telemetry: said, not blank
            assert math.isnan(r.power_w) and r.power_source == procurement.NO_TELEMETRY
    # The device row names the engines without telemetry when they were the fastest.
    row = t[t["device"] == H200].iloc[0]
    assert "no telemetry for" in row["power_source"] and "jax" in row["power_source"]
    text = procurement.render(t, "w", "USD")
    assert "power per engine" in text and procurement.NO_TELEMETRY in text


def test_pareto_figure_shows_both_devices(two_devices, tmp_path):
    import matplotlib.pyplot as plt
    cube = load(two_devices)
    prices = {H200: procurement.Price(H200, 32000.0, None, 1), CAPPED: procurement.Price(CAPPED, 25000.0, 500.0, 2)}
    t, workload = procurement.procurement(cube, prices)
    fig = plots.fig_pareto(t, workload, "USD")
    points = [c for ax in fig.axes for c in ax.collections if c.get_gid() == "device-point"]
    assert len(points) == 1 and len(points[0].get_offsets()) == 2
    labels = [tx.get_text() for ax in fig.axes for tx in ax.texts]
    assert any(lab.startswith("NVIDIA H200 [power=500W]") for lab in labels)
    assert any(lab.startswith("NVIDIA H200 (bf16)") or lab.startswith("NVIDIA H200\n") or lab == "NVIDIA H200 (bf16)"
               for lab in labels), labels
    assert t["pareto"].all()   # cheaper-and-slower and dearer-and-faster: both on the front
    assert plots.check_figure(fig) == []
    plt.close(fig)
