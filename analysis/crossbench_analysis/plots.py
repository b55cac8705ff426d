"""The figures. Every function returns a matplotlib Figure; nothing here decides
what to plot, only how.  A cell that is not ok is drawn as a hatched, outlined
placeholder labelled with its status (never as a zero-height or missing bar)."""

from __future__ import annotations

import math
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402
from matplotlib.transforms import blended_transform_factory  # noqa: E402

from .analysis import batch_curve, label, ordered, NETWORK_ORDER, PHASE_ORDER  # noqa: E402

DPI = 100
ENGINE_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"]
STATUS_STYLE = {  # hatch, edge colour
    "oom": ("////", "#d62728"),
    "unsupported": ("\\\\\\\\", "#7f7f7f"),
    "failed": ("xxxx", "#9467bd"),
    "timeout": ("....", "#ff7f0e"),
    "not_run": ("", "#bbbbbb"),
}
PHASE_STYLE = {"inference": "-", "training": "--"}

plt.rcParams.update({
    "font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 9,
    "figure.titlesize": 13, "axes.grid": True, "grid.alpha": 0.3, "axes.axisbelow": True,
})


def wrap(text: str, width: int = 90) -> str:
    return "\n".join(textwrap.wrap(text, width)) or text


def engine_colors(engines) -> dict:
    return {e: ENGINE_COLORS[i % len(ENGINE_COLORS)] for i, e in enumerate(engines)}


def _status_patch(ax, x, width, status, text=None, frac=None):
    """A cell without a measurement: a faint hatched column over the whole height of
    the axes (so it cannot be read as a value) with its status written in it."""
    hatch, color = STATUS_STYLE.get(status, ("", "#333333"))
    trans = blended_transform_factory(ax.transData, ax.transAxes)
    ax.add_patch(matplotlib.patches.Rectangle((x - width / 2, 0), width, 1, transform=trans,
                                              facecolor="none", edgecolor=color, hatch=hatch, lw=0.8,
                                              alpha=0.45, zorder=1, gid=f"cell-{status}"))
    ax.text(x, 0.5, text or label(status), transform=trans, rotation=90, ha="center", va="center",
            fontsize=8.5, fontweight="bold", color=color, zorder=3,
            bbox=dict(facecolor="white", edgecolor="none", pad=1.0, alpha=0.9))


def _status_legend(statuses) -> list:
    out = []
    for s in ["oom", "unsupported", "failed", "timeout", "not_run"]:
        if s in statuses:
            hatch, color = STATUS_STYLE[s]
            out.append(Patch(facecolor="white", edgecolor=color, hatch=hatch,
                             label=f"{label(s)} (no measurement)"))
    return out


def _short_number(v: float) -> str:
    """3 significant digits without exponent: 0.0123, 1.23, 123, 1234."""
    if v >= 100:
        return f"{v:.0f}"
    return f"{v:.3g}"


def _times(v, _=None) -> str:
    """A speedup tick: 4×, 1×, 1/8× (log₂ axes)."""
    if v <= 0:
        return ""
    if v >= 1:
        return f"{v:g}×"
    return f"1/{1 / v:.3g}×"


def _header(fig, title: str, handles: list, ncol: int, legend_title: str | None = None) -> float:
    """Title (top left) and a legend under it, above the axes; returns the top of the
    area left for the axes (a figure fraction, for tight_layout's rect)."""
    H = fig.get_figheight()
    width_chars = int(fig.get_figwidth() * 10.5)
    title = "\n".join(wrap(part, width_chars) for part in title.split("\n"))
    lines = title.count("\n") + 1
    fig.text(0.01, 1 - 0.1 / H, title, ha="left", va="top", fontsize=12)
    used = 0.1 + 0.24 * lines + 0.08
    if handles:
        ncol = max(1, min(ncol, len(handles)))
        rows = math.ceil(len(handles) / ncol) + (1 if legend_title else 0)
        fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.005, 1 - used / H), ncol=ncol,
                   frameon=False, fontsize=9, title=legend_title, title_fontsize=9, alignment="left",
                   columnspacing=1.5, handlelength=2.2)
        used += 0.27 * rows + 0.1
    return 1 - used / H


def _log_axis_ticks(ax, values, axis="y"):
    """Readable decimal tick labels on a log axis."""
    fmt = FuncFormatter(lambda v, _: f"{v:g}" if v >= 0.01 else f"{v:.0e}")
    (ax.yaxis if axis == "y" else ax.xaxis).set_major_formatter(fmt)
    def minor(v, _):
        if v <= 0:
            return ""
        mantissa = round(v / 10 ** math.floor(math.log10(v)), 6)
        return f"{v:g}" if mantissa in (2.0, 5.0) else ""
    (ax.yaxis if axis == "y" else ax.xaxis).set_minor_formatter(FuncFormatter(minor))


# ---------------------------------------------------------------------------
# Figure kind 1: per device, time per batch, grouped by network, one bar per engine

def fig_time_per_batch(d: pd.DataFrame, device: str, precision: str, batch: int, engines: list[str],
                       colors: dict) -> plt.Figure:
    """`d`: the collapsed cells of one device, precision and batch (every status)."""
    networks = ordered(d["network"], NETWORK_ORDER)
    phases = ordered(d["phase"], PHASE_ORDER)
    fig, axes = plt.subplots(1, len(phases), figsize=(min(16, max(8, 0.75 * len(networks) * len(phases) + 2.5)),
                                                      6), sharey=True, squeeze=False, dpi=DPI)
    axes = axes[0]
    width = 0.8 / max(1, len(engines))
    seen_status = set()
    ok_vals = d.loc[d["status"] == "ok", "ci_high_ms"].dropna()
    value_labels = len(networks) * len(engines) <= 20   # readable only when the bars are wide enough
    for ax, phase in zip(axes, phases):
        p = d[d["phase"] == phase]
        for j, e in enumerate(engines):
            for i, n in enumerate(networks):
                x = i - 0.4 + width * (j + 0.5)
                r = p[(p["engine"] == e) & (p["network"] == n)]
                status = r["status"].iloc[0] if len(r) else "not_run"
                if status == "ok":
                    r = r.iloc[0]
                    err = [[r.median_ms - r.ci_low_ms], [r.ci_high_ms - r.median_ms]]
                    ax.bar(x, r.median_ms, width * 0.92, color=colors[e], zorder=2, gid="cell-ok")
                    ax.errorbar(x, r.median_ms, yerr=err, fmt="none", ecolor="black", capsize=2, lw=1,
                                zorder=3)
                    if value_labels:
                        ax.annotate(_short_number(r.median_ms), (x, r.ci_high_ms), textcoords="offset points",
                                    xytext=(0, 2), ha="center", va="bottom", fontsize=7.5, zorder=4,
                                    gid="value-label")
                else:
                    seen_status.add(status)
                    _status_patch(ax, x, width * 0.92, status)
        ax.set_xticks(range(len(networks)))
        ax.set_xticklabels(networks, rotation=30, ha="right")
        ax.set_xlim(-0.6, len(networks) - 0.4)
        ax.set_title(f"{phase}" + (" (forward + backward)" if phase == "training" else " (forward)"))
        ax.set_xlabel("network")
    if len(ok_vals):
        axes[0].set_yscale("log")
        lo = d.loc[d["status"] == "ok", "ci_low_ms"].min()
        axes[0].set_ylim(lo / 3, ok_vals.max() * 1.6)
        _log_axis_ticks(axes[0], ok_vals)
    else:
        axes[0].set_ylim(0, 1)
        for ax in axes:
            ax.text(0.5, 0.6, "no ok cell at this batch", transform=ax.transAxes, ha="center")
    axes[0].set_ylabel(f"time per batch of {batch} images [ms]\n(median, log scale; whiskers: 95% CI)")
    handles = [Patch(color=colors[e], label=f"engine {e}") for e in engines] + _status_legend(seen_status)
    top = _header(fig, f"Time per batch on {device} — {precision}, batch {batch} (lower is better)", handles, 6)
    fig.tight_layout(rect=(0, 0, 1, top))
    return fig


# ---------------------------------------------------------------------------
# Figure kind 2: time per image against batch size

def fig_batch_efficiency(d: pd.DataFrame, device: str, precision: str, engines: list[str],
                         colors: dict) -> plt.Figure:
    """`d`: the collapsed cells of one device and precision, every batch and status."""
    networks = ordered(d["network"], NETWORK_ORDER)
    phases = ordered(d["phase"], PHASE_ORDER)
    batches = sorted(d["batch"].unique())
    ncols = min(3, len(networks))
    nrows = math.ceil(len(networks) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols + 0.5, 3.5 * nrows + 1.6), squeeze=False,
                             dpi=DPI)
    seen_status = set()
    any_best = any_oom = False
    for k, n in enumerate(networks):
        ax = axes[k // ncols][k % ncols]
        notes = []
        oom_at = {}
        for e in engines:
            for ph in phases:
                s = d[(d["network"] == n) & (d["engine"] == e) & (d["phase"] == ph)]
                if s.empty or (s["status"] == "not_run").all():
                    continue
                s = s.sort_values("batch")
                ok = s[s["status"] == "ok"]
                color, ls = colors[e], PHASE_STYLE.get(ph, ":")
                facts = batch_curve(s)
                if len(ok):
                    # NaN at batches without a measurement, so the line breaks there.
                    att = s[s["status"] != "not_run"]
                    okm = att["status"] == "ok"
                    per_image = (att["median_ms"] / att["batch"]).where(okm)
                    lo = (att["ci_low_ms"] / att["batch"]).where(okm)
                    hi = (att["ci_high_ms"] / att["batch"]).where(okm)
                    ax.plot(att["batch"], per_image, ls, color=color, marker="o", ms=3, lw=1.5)
                    ax.fill_between(att["batch"], lo, hi, color=color, alpha=0.15, lw=0)
                    bb = facts["best_batch"]
                    ax.plot([bb], [per_image[att["batch"] == bb].iloc[0]], marker="*", ms=13, color=color,
                            markeredgecolor="black", markeredgewidth=0.7, ls="none", zorder=5)
                    any_best = True
                trans = blended_transform_factory(ax.transData, ax.transAxes)
                marks = []
                if facts["first_oom"] is not None:
                    any_oom = True
                    seen_status.add("oom")
                    marks.append((facts["first_oom"], "oom", "X"))
                    if facts["largest_fit"] is not None:
                        ax.axvline(facts["largest_fit"], color=color, ls=ls, lw=0.8, alpha=0.6)
                bad = s[~s["status"].isin(["ok", "oom", "not_run"])]
                for r in bad.itertuples():
                    seen_status.add(r.status)
                    marks.append((r.batch, r.status, "v"))
                for bx, st, marker in marks:
                    level = oom_at.setdefault(bx, [])
                    y = 0.95 - 0.08 * len(level)
                    level.append(st)
                    ax.plot([bx], [y], marker=marker, ms=9 if marker == "X" else 8, color=color, transform=trans,
                            markeredgecolor=STATUS_STYLE.get(st, ("", "k"))[1], markeredgewidth=1.5,
                            ls="none", clip_on=False, zorder=5)
                    ax.text(bx / 1.2, y, label(st), transform=trans, ha="right", va="center",
                            fontsize=7.5, color=STATUS_STYLE.get(st, ("", "k"))[1], fontweight="bold")
                if ok.empty:
                    st = ", ".join(sorted({label(x) for x in s["status"] if x != "not_run"}))
                    notes.append(f"{e} {ph}: {st}")
        for i, note in enumerate(notes):
            ax.text(0.5, 0.5 - 0.1 * i, note, transform=ax.transAxes, ha="center", fontsize=8,
                    color="#555555", bbox=dict(facecolor="white", edgecolor="#999999", pad=2))
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(batches))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlim(batches[0] / 1.4, batches[-1] * 1.4)
        if len(batches) > 8:
            for lab in ax.get_xticklabels():
                lab.set_rotation(45)
        okn = d[(d["network"] == n) & (d["status"] == "ok")]
        if len(okn):
            ax.set_yscale("log")
            lo = (okn["ci_low_ms"] / okn["batch"]).min()
            hi = (okn["ci_high_ms"] / okn["batch"]).max()
            ax.set_ylim(lo / 1.6, hi * 2.2)   # headroom for the status marks at the top
            _log_axis_ticks(ax, None)
        else:
            ax.set_yticks([])
            ax.set_ylim(0, 1)
        ax.set_title(n)
        if k % ncols == 0:
            ax.set_ylabel("time per image [ms]\n(median, log scale)")
        if k // ncols == nrows - 1 or k + ncols >= len(networks):
            ax.set_xlabel("batch size [images] (log₂ scale)")
    for k in range(len(networks), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    handles = [Line2D([], [], color=colors[e], lw=2, label=f"engine {e}") for e in engines]
    handles += [Line2D([], [], color="black", ls=PHASE_STYLE[p], label=p) for p in phases if p in PHASE_STYLE]
    handles.append(Patch(facecolor="#888888", alpha=0.3, label="95% CI"))
    if any_best:
        handles.append(Line2D([], [], marker="*", ms=12, color="white", markerfacecolor="#888888",
                              markeredgecolor="black", ls="none", label="best throughput"))
    if any_oom:
        handles.append(Line2D([], [], marker="X", ms=9, color="#888888", markeredgecolor="#d62728",
                              ls="none", label="first batch that ran out of memory (OOM)"))
        handles.append(Line2D([], [], color="#888888", lw=0.8, label="largest batch that fit"))
    for st in sorted(seen_status - {"oom"}):
        handles.append(Line2D([], [], marker="v", ms=8, color="#888888", markeredgewidth=1.5,
                              markeredgecolor=STATUS_STYLE.get(st, ("", "k"))[1], ls="none",
                              label=f"{label(st)} at this batch (no measurement)"))
    top = _header(fig, f"Batch-size efficiency on {device} — {precision}: time per image against batch "
                       f"size (lower is better)", handles, 5 if ncols >= 3 else 3)
    fig.tight_layout(rect=(0, 0, 1, top))
    return fig


# ---------------------------------------------------------------------------
# Speedup bars (device over baseline device; engine over baseline engine)

def fig_speedup(t: pd.DataFrame, title: str, series_col: str, colors: dict, ylabel: str) -> plt.Figure:
    """`t`: rows with network, phase, `series_col`, speedup, speedup_low/high, status,
    baseline_status, note.  One group of bars per network, one subplot per phase."""
    networks = ordered(t["network"], NETWORK_ORDER)
    phases = ordered(t["phase"], PHASE_ORDER)
    series = list(dict.fromkeys(t[series_col]))
    fig, axes = plt.subplots(1, len(phases), figsize=(min(16, max(8, 0.75 * len(networks) * len(phases) + 2.5)),
                                                      5.6), sharey=True, squeeze=False, dpi=DPI)
    axes = axes[0]
    width = 0.8 / max(1, len(series))
    seen = set()
    vals = t["speedup_high"].dropna().tolist() + t["speedup_low"].dropna().tolist()
    for ax, ph in zip(axes, phases):
        p = t[t["phase"] == ph]
        for j, sname in enumerate(series):
            for i, n in enumerate(networks):
                x = i - 0.4 + width * (j + 0.5)
                r = p[(p[series_col] == sname) & (p["network"] == n)]
                if r.empty:
                    continue
                r = r.iloc[0]
                if np.isfinite(r.speedup):
                    # From 1x (the baseline) up (faster) or down (slower).
                    ax.bar(x, r.speedup - 1.0, width * 0.92, color=colors.get(sname, "#1f77b4"), zorder=2,
                           bottom=1.0, gid="cell-ok")
                    ax.errorbar(x, r.speedup, yerr=[[r.speedup - r.speedup_low], [r.speedup_high - r.speedup]],
                                fmt="none", ecolor="black", capsize=2, lw=1, zorder=3)
                    above = r.speedup >= 1
                    ax.text(x, r.speedup_high * 1.04 if above else r.speedup_low / 1.04, f"{r.speedup:.2g}×",
                            ha="center", va="bottom" if above else "top", fontsize=7.5, zorder=4)
                else:
                    st = r.status if r.status != "ok" else r.baseline_status
                    seen.add(st)
                    where = "" if r.status != "ok" else " (baseline)"
                    _status_patch(ax, x, width * 0.92, st, text=label(st) + where)
        ax.axhline(1.0, color="black", lw=1, ls="--", zorder=1)
        ax.set_xticks(range(len(networks)))
        ax.set_xticklabels(networks, rotation=30, ha="right")
        ax.set_xlim(-0.6, len(networks) - 0.4)
        ax.set_title(ph)
        ax.set_xlabel("network")
    if vals:
        axes[0].set_yscale("log", base=2)
        lo, hi = min(vals + [1.0]), max(vals + [1.0])
        axes[0].set_ylim(lo / 1.8, hi * 1.8)
        axes[0].yaxis.set_major_formatter(FuncFormatter(_times))
    axes[0].set_ylabel(ylabel)
    handles = [Patch(color=colors.get(s, "#1f77b4"), label=f"{series_col} {s}") for s in series]
    handles.append(Line2D([], [], color="black", ls="--", label="1× = as fast as the baseline"))
    handles += _status_legend(seen)
    top = _header(fig, title + " (higher is better)\n"
                  "whiskers: the interval from the two cells' 95% confidence intervals", handles, 5)
    fig.tight_layout(rect=(0, 0, 1, top))
    return fig


# ---------------------------------------------------------------------------
# Efficiency: achieved TFLOPS (and % of peak)

def fig_efficiency(d: pd.DataFrame, device: str, precision: str, batch: int, engines: list[str],
                   colors: dict, peak: float | None, peak_source: str) -> plt.Figure:
    networks = ordered(d["network"], NETWORK_ORDER)
    phases = ordered(d["phase"], PHASE_ORDER)
    fig, axes = plt.subplots(1, len(phases), figsize=(min(16, max(8, 0.75 * len(networks) * len(phases) + 2.5)),
                                                      5.6), sharey=True, squeeze=False, dpi=DPI)
    axes = axes[0]
    width = 0.8 / max(1, len(engines))
    seen = set()
    top = d.loc[d["status"] == "ok", "tflops"].max()
    # GFLOP/s for slow devices (a CPU at small batch), so that the axis reads 40, not 0.04.
    scale, unit = (1e3, "GFLOP/s") if np.isfinite(top) and top < 1 else (1.0, "TFLOP/s")
    for ax, ph in zip(axes, phases):
        p = d[d["phase"] == ph]
        for j, e in enumerate(engines):
            for i, n in enumerate(networks):
                x = i - 0.4 + width * (j + 0.5)
                r = p[(p["engine"] == e) & (p["network"] == n)]
                st = r["status"].iloc[0] if len(r) else "not_run"
                if st == "ok" and np.isfinite(r["tflops"].iloc[0]):
                    v = r["tflops"].iloc[0]
                    ax.bar(x, v * scale, width * 0.92, color=colors[e], zorder=2, gid="cell-ok")
                    if peak:
                        pct = 100 * v / peak
                        ax.text(x, v * scale, f"{pct:.0f}%" if pct >= 1 else f"{pct:.2g}%", ha="center",
                                va="bottom", fontsize=7)
                elif st == "ok":
                    _status_patch(ax, x, width * 0.92, "not_run", text="TFLOP/s not recorded")
                else:
                    seen.add(st)
                    _status_patch(ax, x, width * 0.92, st)
        ax.set_xticks(range(len(networks)))
        ax.set_xticklabels(networks, rotation=30, ha="right")
        ax.set_xlim(-0.6, len(networks) - 0.4)
        ax.set_title(ph)
        ax.set_xlabel("network")
    if np.isfinite(top) and top > 0:
        axes[0].set_ylim(0, top * scale * 1.25)
    axes[0].set_ylabel(f"achieved throughput [{unit}]")
    if peak:
        pk = peak * scale
        sec = axes[-1].secondary_yaxis("right", functions=(lambda v: 100 * v / pk, lambda q: q * pk / 100))
        sec.set_ylabel(f"% of peak ({peak:g} TFLOP/s)")
        sub = f"bar labels: % of the {precision} peak, {peak:g} TFLOP/s ({peak_source})"
    else:
        sub = (f"{precision} peak of this device unknown, so no % of peak "
               f"(add a row for it to crossbench_analysis/peaks.csv)")
    handles = [Patch(color=colors[e], label=f"engine {e}") for e in engines] + _status_legend(seen)
    top = _header(fig, f"Achieved {unit} on {device} — {precision}, batch {batch} (higher is better)\n" + sub,
                  handles, 5)
    fig.tight_layout(rect=(0, 0, 1, top))
    return fig


# ---------------------------------------------------------------------------
# Data-parallel scaling efficiency

GPUS_COLORS = ["#2ca02c", "#1f77b4", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def fig_scaling(t: pd.DataFrame, device: str, precision: str, threshold: float) -> plt.Figure:
    """`t`: rows of analysis.scaling_table for one device and precision (every status).
    One group per (engine, network, batch), one bar per gpus value: the scaling
    efficiency; a non-ok cell, or an ok one without an efficiency, is a labelled
    hatched placeholder."""
    nets = ordered(t["network"], NETWORK_ORDER)
    groups = sorted({(r.engine, r.network, int(r.batch)) for r in t.itertuples()},
                    key=lambda k: (list(dict.fromkeys(t["engine"])).index(k[0]), nets.index(k[1]), k[2]))
    gpus = sorted(int(g) for g in t["gpus"].unique())
    colors = {g: GPUS_COLORS[i % len(GPUS_COLORS)] for i, g in enumerate(gpus)}
    several_engines = t["engine"].nunique() > 1
    fig, ax = plt.subplots(figsize=(min(16, max(8, 0.45 * len(groups) * len(gpus) + 2.5)), 5.8), dpi=DPI)
    width = 0.8 / max(1, len(gpus))
    seen = set()
    effs = t["scaling_efficiency"].astype(float)
    top = max(1.1, float(np.nanmax(effs)) * 1.12) if np.isfinite(effs).any() else 1.1
    labels_fit = len(groups) * len(gpus) <= 40
    for i, (e, n, b) in enumerate(groups):
        for j, g in enumerate(gpus):
            x = i - 0.4 + width * (j + 0.5)
            r = t[(t["engine"] == e) & (t["network"] == n) & (t["batch"] == b) & (t["gpus"] == g)]
            if r.empty:
                continue
            r = r.iloc[0]
            eff = float(r["scaling_efficiency"])
            if r["status"] == "ok" and np.isfinite(eff):
                ax.bar(x, eff, width * 0.92, color=colors[g], zorder=2, gid="cell-ok",
                       edgecolor="#d62728" if r["below_threshold"] else "none", lw=1.5)
                if labels_fit:
                    ax.text(x, eff, f"{eff:.2f}", ha="center", va="bottom", fontsize=7, zorder=4,
                            gid="value-label")
            elif r["status"] == "ok":   # measured, but no ok gpus = 1 cell to compare with
                base = r["baseline_status"]
                _status_patch(ax, x, width * 0.92, "not_run",
                              text="no efficiency: gpus = 1 " + ("absent" if base == "absent" else label(base)))
            else:
                seen.add(r["status"])
                _status_patch(ax, x, width * 0.92, r["status"])
    ax.axhline(1.0, color="black", lw=1, zorder=1)
    ax.axhline(threshold, color="#d62728", lw=1, ls="--", zorder=1)
    ax.set_ylim(0, top)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{n} b{b}" + (f" · {e}" if several_engines else "") for e, n, b in groups],
                       rotation=35, ha="right")
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.set_xlabel("network, batch per device" + (", engine" if several_engines else ""))
    ax.set_ylabel("scaling efficiency\nimages/s ÷ (gpus × images/s on 1 device)")
    handles = [Patch(color=colors[g], label=f"{g} devices") for g in gpus]
    handles.append(Line2D([], [], color="black", lw=1, label="1 = linear scaling"))
    handles.append(Line2D([], [], color="#d62728", lw=1, ls="--", label=f"{threshold:g}: flagged below"))
    if t["below_threshold"].astype(bool).any():
        handles.append(Patch(facecolor="white", edgecolor="#d62728", lw=1.5, label=f"below {threshold:g} (flagged)"))
    handles += _status_legend(seen)
    top_frac = _header(fig, f"Data-parallel scaling efficiency on {device} — {precision} (higher is better)",
                       handles, 4)
    fig.tight_layout(rect=(0, 0, 1, top_frac))
    return fig


# ---------------------------------------------------------------------------
# Procurement: throughput against price

def fig_pareto(t: pd.DataFrame, workload: str, currency: str = "price") -> plt.Figure:
    """`t`: device, price, images_per_s (NaN where not measured), status_text, pareto (bool)."""
    fig, ax = plt.subplots(figsize=(10, 6.5), dpi=DPI)
    ok = t[np.isfinite(t["images_per_s"]) & np.isfinite(t["price"])]
    front = ok[ok["pareto"]].sort_values("price")
    ax.scatter(ok["price"], ok["images_per_s"], s=50, color="#1f77b4", zorder=3, label="device")
    if len(front):
        xs, ys = [], []
        for r in front.itertuples():
            if xs:
                xs.append(r.price)
                ys.append(ys[-1])
            xs.append(r.price)
            ys.append(r.images_per_s)
        ax.plot(xs, ys, color="#2ca02c", lw=1.5, zorder=2, label="Pareto front (no device is both cheaper and faster)")
        ax.scatter(front["price"], front["images_per_s"], s=90, facecolor="none", edgecolor="#2ca02c",
                   lw=2, zorder=4)
    xmax = ok["price"].max() * 1.3 if len(ok) else 1.0
    for r in ok.itertuples():
        right = r.price > 0.6 * xmax
        ax.annotate(wrap(r.short, 28), (r.price, r.images_per_s), textcoords="offset points",
                    xytext=(-8, 6) if right else (8, 6), ha="right" if right else "left", va="bottom", fontsize=8.5)
    missing = t[~(np.isfinite(t["images_per_s"]) & np.isfinite(t["price"]))]
    if len(missing):
        txt = "not plotted:\n" + "\n".join(wrap(f"{r.short}: {r.status_text}", 60) for r in missing.itertuples())
        ax.text(0.99, 0.02, txt, transform=ax.transAxes, ha="right", va="bottom", fontsize=8,
                bbox=dict(facecolor="#fff3f3", edgecolor="#d62728"))
    ax.set_xlabel(f"price [{currency}]")
    ax.set_ylabel("throughput [images/s]")
    if len(ok):
        ax.set_xlim(0, xmax)
        ax.set_ylim(0, ok["images_per_s"].max() * 1.25)
    ax.legend(loc="upper left", fontsize=8.5)
    ax.set_title("Throughput against price (upper left is better)", loc="left", fontsize=12)
    fig.text(0.01, 0.985, wrap("workload: " + workload, 130), ha="left", va="top", fontsize=9, color="#333333")
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return fig


def short_device(device: str, width: int = 48) -> str:
    """The model part of a device key, with its tag: "NVIDIA H200 (132 SMs, sm_9.0,
    140.0 GiB) [power=500W]" -> "NVIDIA H200 [power=500W]"."""
    import re
    m = re.match(r"^(.*?) \((.*)\)(?: \[(.*)\])?$", device)
    head = device
    if m:
        head = m.group(1) + (f" [{m.group(3)}]" if m.group(3) else "")
    head = head.strip() or device
    return head if len(head) <= width else head[: width - 1] + "…"
