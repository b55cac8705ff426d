"""The figures. Every function returns a matplotlib Figure; nothing here decides
what to plot, only how.  A cell that is not ok is drawn as a hatched, outlined
placeholder labelled with its status (never as a zero-height or missing bar).

Rules every figure keeps (tests/python/test_analysis_figures.py checks them on
real cubes): one colour per engine in every figure (ENGINE_PALETTE, here only);
no bars on a log axis (times and speedups are dots with their CI whiskers);
no text label overlaps another (value labels that would are dropped by
`tidy_labels`, which also reports any other overlap)."""

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
# One colour per engine, the same in every figure of every report. Engines not
# listed get one of EXTRA_ENGINE_COLORS, chosen by a hash of the name (stable
# across runs and cubes). No other series of any figure uses these colours.
ENGINE_PALETTE = {
    "cudnn": "#1f77b4", "onednn": "#ff7f0e", "pytorch": "#2ca02c", "pytorch-compile": "#17becf",
    "jax": "#9467bd", "tensorflow": "#8c564b",
}
EXTRA_ENGINE_COLORS = ["#e377c2", "#bcbd22", "#7f3c8d", "#11a579", "#3969ac", "#f2b701"]
# Series that are not engines (group sizes, devices): shades of grey, never an engine's hue.
GREYS = ["#c7c7c7", "#969696", "#636363", "#252525", "#525252", "#b0b0b0"]
PEAK_COLOR = "#d62728"
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


def engine_color(engine: str) -> str:
    if engine in ENGINE_PALETTE:
        return ENGINE_PALETTE[engine]
    import zlib
    return EXTRA_ENGINE_COLORS[zlib.crc32(engine.encode()) % len(EXTRA_ENGINE_COLORS)]


def engine_colors(engines) -> dict:
    return {e: engine_color(e) for e in engines}


def ci_pct(median: float, low: float, high: float) -> str:
    """A 95% CI as ± % of the median: the larger of the two half-widths."""
    if not (np.isfinite(median) and np.isfinite(low) and np.isfinite(high)) or median == 0:
        return ""
    half = max(median - low, high - median) / abs(median) * 100
    return f"±{half:.1f}%" if half >= 0.1 else "±<0.1%"


# ---------------------------------------------------------------------------
# Text labels that must not overlap

def _texts(fig) -> list:
    """Every visible, non-empty text the figure draws: titles, axis labels, tick
    labels in view, annotations, legends, figure texts."""
    out = list(fig.texts)
    for leg in fig.legends:
        out += list(leg.get_texts()) + [leg.get_title()]
    axes = list(fig.axes)
    for ax in list(axes):
        axes += [c for c in getattr(ax, "child_axes", []) if c not in axes]
    for ax in axes:
        if not ax.get_visible():
            continue
        out += list(ax.texts) + [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label]
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis._update_ticks():
                out += [tick.label1, tick.label2]
        leg = ax.get_legend()
        if leg is not None:
            out += list(leg.get_texts()) + [leg.get_title()]
    return [t for t in dict.fromkeys(out) if t.get_visible() and t.get_text().strip()]


def _corners(text, renderer) -> np.ndarray:
    """The 4 corners [px] of a text's rotated box (rotation_mode 'default': the
    rotated box is centred on the extent's centre)."""
    ext = text.get_window_extent(renderer)
    angle = text.get_rotation() % 180
    if angle == 0:
        return np.array([[ext.x0, ext.y0], [ext.x1, ext.y0], [ext.x1, ext.y1], [ext.x0, ext.y1]])
    text.set_rotation(0)
    flat = text.get_window_extent(renderer)
    text.set_rotation(angle)
    w, h = flat.width / 2, flat.height / 2
    c, s = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    centre = np.array([(ext.x0 + ext.x1) / 2, (ext.y0 + ext.y1) / 2])
    local = np.array([[-w, -h], [w, -h], [w, h], [-w, h]])
    return centre + local @ np.array([[c, s], [-s, c]])


def _overlap(a: np.ndarray, b: np.ndarray, margin: float = 0.5) -> bool:
    """Separating-axis test of two convex quadrilaterals, `margin` px of slack."""
    for poly in (a, b):
        for i in range(4):
            edge = poly[(i + 1) % 4] - poly[i]
            normal = np.array([-edge[1], edge[0]])
            n = np.hypot(*normal)
            if n == 0:
                continue
            normal = normal / n
            pa, pb = a @ normal, b @ normal
            if pa.max() <= pb.min() + margin or pb.max() <= pa.min() + margin:
                return False
    return True


def _boxes(fig) -> list:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return [(t, _corners(t, renderer)) for t in _texts(fig)]


def _overlapping(boxes) -> list[tuple[str, str]]:
    return [(a.get_text(), b.get_text()) for i, (a, pa) in enumerate(boxes) for b, pb in boxes[i + 1:]
            if _overlap(pa, pb)]


def label_overlaps(fig) -> list[tuple[str, str]]:
    """Pairs of visible text labels whose boxes overlap, as (text, text)."""
    return _overlapping(_boxes(fig))


def bars_on_log_axes(fig) -> list[str]:
    """Titles of the axes that draw bars on a logarithmic scale (a bar's length
    means nothing there)."""
    from matplotlib.container import BarContainer
    return [ax.get_title() or "untitled axes" for ax in fig.axes
            if "log" in (ax.get_xscale(), ax.get_yscale()) and any(isinstance(c, BarContainer) for c in ax.containers)]


def check_figure(fig) -> list[str]:
    """Everything that would make the figure mislead, after dropping the value
    labels that crowd others: overlapping labels and bars on log axes."""
    problems = [f"labels overlap: {a!r} / {b!r}" for a, b in tidy_labels(fig)]
    problems += [f"bars on a log axis: {t!r}" for t in bars_on_log_axes(fig)]
    return problems


def tidy_labels(fig) -> list[tuple[str, str]]:
    """Hide every value label (gid "value-label") that overlaps a text drawn
    before it, then return the overlaps that remain (none, for a figure of
    this module). Hiding a label moves nothing, so one drawing serves both."""
    boxes = _boxes(fig)
    kept = [(t, box) for t, box in boxes if t.get_gid() != "value-label"]
    for t, box in boxes:
        if t.get_gid() != "value-label":
            continue
        if any(_overlap(box, other) for _, other in kept):
            t.set_visible(False)
        else:
            kept.append((t, box))
    return _overlapping(kept)


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
                    # A dot, not a bar: the axis is logarithmic, where a bar's length means nothing.
                    dot = ax.errorbar(x, r.median_ms, yerr=err, fmt="o", ms=6, color=colors[e], mec="black",
                                      mew=0.5, ecolor="black", capsize=2, lw=1, zorder=3)
                    dot[0].set_gid("cell-ok")
                    if value_labels:
                        ax.annotate(_short_number(r.median_ms), (x, r.ci_high_ms), textcoords="offset points",
                                    xytext=(0, 2), ha="center", va="bottom", fontsize=7.5, zorder=4,
                                    rotation=90, gid="value-label")
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
    axes[0].set_ylabel(f"time per batch of {batch} images [ms]\n(median dots, log scale; whiskers: 95% CI)")
    handles = [Line2D([], [], marker="o", ls="none", color=colors[e], mec="black", mew=0.5, label=f"engine {e}")
               for e in engines] + _status_legend(seen_status)
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
                # One row per series with marks, its text only at its first mark: a label beside every
                # mark would overlap the marks of the neighbouring batches (the legend names each marker).
                row = len(oom_at)
                if marks:
                    oom_at[(e, ph)] = row
                for i, (bx, st, marker) in enumerate(sorted(marks, key=lambda m: m[0])):
                    y = 0.95 - 0.08 * row
                    ax.plot([bx], [y], marker=marker, ms=9 if marker == "X" else 8, color=color, transform=trans,
                            markeredgecolor=STATUS_STYLE.get(st, ("", "k"))[1], markeredgewidth=1.5,
                            ls="none", clip_on=False, zorder=5)
                    if i > 0:
                        continue
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
                    # A dot with its interval on a linear axis: 2x reads as twice 1x.
                    dot = ax.errorbar(x, r.speedup, yerr=[[r.speedup - r.speedup_low], [r.speedup_high - r.speedup]],
                                      fmt="o", ms=6, color=colors.get(sname, GREYS[2]), mec="black", mew=0.5,
                                      ecolor="black", capsize=2, lw=1, zorder=3)
                    dot[0].set_gid("cell-ok")
                    above = r.speedup >= 1
                    ax.annotate(f"{r.speedup:.2f}×", (x, r.speedup_high if above else r.speedup_low),
                                textcoords="offset points", xytext=(0, 3 if above else -3), rotation=90,
                                ha="center", va="bottom" if above else "top", fontsize=7.5, zorder=4,
                                gid="value-label")
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
        lo, hi = min(vals + [1.0]), max(vals + [1.0])
        pad = (hi - lo) * 0.25 + 0.05
        axes[0].set_ylim(max(0.0, lo - pad), hi + pad)
        axes[0].yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
    axes[0].set_ylabel(ylabel)
    handles = [Line2D([], [], marker="o", ls="none", color=colors.get(s, GREYS[2]), mec="black", mew=0.5,
                      label=f"{series_col} {s}") for s in series]
    handles.append(Line2D([], [], color="black", ls="--", label="1× = as fast as the baseline"))
    handles += _status_legend(seen)
    top = _header(fig, title + " (higher is better)\n"
                  "whiskers: the interval from the two cells' 95% confidence intervals", handles, 5)
    fig.tight_layout(rect=(0, 0, 1, top))
    return fig


# ---------------------------------------------------------------------------
# Efficiency: achieved TFLOPS (and % of peak)

def fig_efficiency(d: pd.DataFrame, device: str, precision: str, batch: int, engines: list[str],
                   colors: dict, peak: float | None, peak_source: str,
                   above_peak: dict | None = None) -> plt.Figure:
    """Effective TFLOP/s: the direct-convolution FLOP count of a step ÷ its
    median time. `above_peak`: (engine, network, phase) -> why a cell beyond
    the peak can be there (from its decisions); such bars are outlined in red,
    marked with a letter, and the letter explained under the title."""
    networks = ordered(d["network"], NETWORK_ORDER)
    phases = ordered(d["phase"], PHASE_ORDER)
    above_peak = above_peak or {}
    fig, axes = plt.subplots(1, len(phases), figsize=(min(16, max(8, 0.75 * len(networks) * len(phases) + 2.5)),
                                                      5.6), sharey=True, squeeze=False, dpi=DPI)
    axes = axes[0]
    width = 0.8 / max(1, len(engines))
    seen = set()
    top = d.loc[d["status"] == "ok", "tflops"].max()
    # GFLOP/s for slow devices (a CPU at small batch), so that the axis reads 40, not 0.04.
    scale, unit = (1e3, "GFLOP/s") if np.isfinite(top) and top < 1 else (1.0, "TFLOP/s")
    flagged = []   # (letter, text)
    for ax, ph in zip(axes, phases):
        p = d[d["phase"] == ph]
        for j, e in enumerate(engines):
            for i, n in enumerate(networks):
                x = i - 0.4 + width * (j + 0.5)
                r = p[(p["engine"] == e) & (p["network"] == n)]
                st = r["status"].iloc[0] if len(r) else "not_run"
                if st == "ok" and np.isfinite(r["tflops"].iloc[0]):
                    v = r["tflops"].iloc[0]
                    beyond = bool(peak) and v > peak
                    ax.bar(x, v * scale, width * 0.92, color=colors[e], zorder=2, gid="cell-ok",
                           edgecolor=PEAK_COLOR if beyond else "none", lw=1.8 if beyond else 0,
                           hatch="//" if beyond else None)
                    if beyond:
                        letter = chr(ord("a") + len(flagged))
                        reason = above_peak.get((e, n, ph), "no decisions recorded: check the measurement")
                        flagged.append((letter, f"({letter}) {n} {ph} {e}: {100 * v / peak:.0f}% of peak; {reason}"))
                        ax.annotate(letter, (x, v * scale), textcoords="offset points", xytext=(0, 2), ha="center",
                                    va="bottom", fontsize=8, fontweight="bold", color=PEAK_COLOR, zorder=4)
                    elif peak:
                        pct = 100 * v / peak
                        ax.annotate(f"{pct:.0f}%" if pct >= 1 else f"{pct:.2g}%", (x, v * scale),
                                    textcoords="offset points", xytext=(0, 2), ha="center", va="bottom",
                                    fontsize=7, rotation=90, gid="value-label")
                elif st == "ok":
                    _status_patch(ax, x, width * 0.92, "not_run", text="TFLOP/s not recorded")
                else:
                    seen.add(st)
                    _status_patch(ax, x, width * 0.92, st)
        if peak:
            ax.axhline(peak * scale, color=PEAK_COLOR, lw=1, ls="--", zorder=1)
        ax.set_xticks(range(len(networks)))
        ax.set_xticklabels(networks, rotation=30, ha="right")
        ax.set_xlim(-0.6, len(networks) - 0.4)
        ax.set_title(ph)
        ax.set_xlabel("network")
    ymax = max(top if np.isfinite(top) else 0, peak or 0)
    if ymax > 0:
        axes[0].set_ylim(0, ymax * scale * 1.25)
    axes[0].set_ylabel(f"effective {unit}\n(direct-convolution FLOPs ÷ median step time)")
    if peak:
        pk = peak * scale
        sec = axes[-1].secondary_yaxis("right", functions=(lambda v: 100 * v / pk, lambda q: q * pk / 100))
        sec.set_ylabel(f"% of the {precision} peak ({peak:g} TFLOP/s)")
        sub = f"bar labels: % of the {precision} peak, {peak:g} TFLOP/s ({peak_source}); dashed line: the peak"
    else:
        sub = (f"{precision} peak of this device unknown, so no % of peak "
               f"(add a row for it to crossbench_analysis/peaks.csv)")
    if flagged:
        sub += ("\nhatched, red-edged bars exceed the peak: the direct count overstates the work done; "
                "their algorithms (cube's decisions):\n" + "\n".join(t for _, t in flagged))
    if flagged:   # room for the explanation lines under the title
        width_chars = int(fig.get_figwidth() * 10.5)
        lines = sum(math.ceil(len(t) / width_chars) for _, t in flagged) + 2
        fig.set_figheight(fig.get_figheight() + 0.25 * lines)
    handles = [Patch(color=colors[e], label=f"engine {e}") for e in engines] + _status_legend(seen)
    if peak:
        handles.append(Line2D([], [], color=PEAK_COLOR, ls="--", lw=1, label=f"{precision} peak"))
    top_frac = _header(fig, f"Effective {unit} (direct-convolution FLOPs) on {device} — {precision}, batch {batch} "
                            f"(higher is better)\n" + sub, handles, 5)
    fig.tight_layout(rect=(0, 0, 1, top_frac))
    return fig


# ---------------------------------------------------------------------------
# Data-parallel scaling efficiency

def fig_scaling(t: pd.DataFrame, device: str, precision: str, threshold: float) -> plt.Figure:
    """`t`: rows of analysis.scaling_table for one device and precision (every status).
    One group per (engine, network, batch), one bar per gpus value: the scaling
    efficiency; a non-ok cell, or an ok one without an efficiency, is a labelled
    hatched placeholder."""
    nets = ordered(t["network"], NETWORK_ORDER)
    groups = sorted({(r.engine, r.network, int(r.batch)) for r in t.itertuples()},
                    key=lambda k: (list(dict.fromkeys(t["engine"])).index(k[0]), nets.index(k[1]), k[2]))
    gpus = sorted(int(g) for g in t["gpus"].unique())
    # Group sizes in greys, light to dark: no engine's colour means "2 devices".
    shades = GREYS[: max(1, len(gpus))] if len(gpus) <= 4 else GREYS
    colors = {g: shades[i % len(shades)] for i, g in enumerate(gpus)}
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
                    ax.annotate(f"{eff:.2f}", (x, eff), textcoords="offset points", xytext=(0, 2), ha="center",
                                va="bottom", fontsize=7, zorder=4, rotation=90, gid="value-label")
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
    ax.scatter(ok["price"], ok["images_per_s"], s=50, color=GREYS[2], zorder=3, label="device", gid="device-point")
    if len(front):
        xs, ys = [], []
        for r in front.itertuples():
            if xs:
                xs.append(r.price)
                ys.append(ys[-1])
            xs.append(r.price)
            ys.append(r.images_per_s)
        ax.plot(xs, ys, color=GREYS[3], lw=1.5, zorder=2, label="Pareto front (no device is both cheaper and faster)")
        ax.scatter(front["price"], front["images_per_s"], s=110, facecolor="none", edgecolor=GREYS[3],
                   lw=2, zorder=4)
    xmax = ok["price"].max() * 1.3 if len(ok) else 1.0
    for r in ok.itertuples():
        right = r.price > 0.6 * xmax
        ax.annotate(wrap(r.short + (f" ({r.precision})" if "precision" in t.columns else ""), 28),
                    (r.price, r.images_per_s), textcoords="offset points",
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


# ---------------------------------------------------------------------------
# Where the step goes: the stored layer times

def fig_layer_times(lt: pd.DataFrame, title: str, color: str, top: int = 8) -> plt.Figure:
    """`lt`: cube_extras.layer_times rows of several cells that differ only by
    network. One panel per network: its `top` layers by forward + backward time,
    forward and backward stacked (linear axis, so lengths add up)."""
    networks = ordered(lt["network"], NETWORK_ORDER)
    ncols = min(3, len(networks))
    nrows = math.ceil(len(networks) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.4 * ncols, 0.3 * top * nrows + 1.4 * nrows + 1.6),
                             squeeze=False, dpi=DPI)
    for k, n in enumerate(networks):
        ax = axes[k // ncols][k % ncols]
        g = lt[lt["network"] == n].copy()
        g["total"] = g["forward_ms"] + g["backward_ms"]
        step = g["total"].sum()
        g = g.sort_values("total", ascending=False).head(top).iloc[::-1]
        y = np.arange(len(g))
        ax.barh(y, g["forward_ms"], color=color, height=0.7, zorder=2)
        ax.barh(y, g["backward_ms"], left=g["forward_ms"], color=color, alpha=0.45, hatch="//", height=0.7,
                zorder=2, edgecolor="white", lw=0)
        ax.set_yticks(y)
        ax.set_yticklabels(g["layer"], fontsize=8)
        ax.set_xlim(0, float(g["total"].max()) * 1.35 if len(g) and g["total"].max() > 0 else 1)
        for yy, (tot, share) in enumerate(zip(g["total"], g["total"] / step if step > 0 else g["total"] * 0)):
            ax.annotate(f"{100 * share:.0f}%", (tot, yy), textcoords="offset points", xytext=(3, 0), ha="left",
                        va="center", fontsize=7.5, gid="value-label")
        ax.set_title(f"{n} (all layers: {step:.3g} ms)", fontsize=10)
        ax.set_xlabel("time per step [ms]")
    for k in range(len(networks), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    handles = [Patch(color=color, label="forward"),
               Patch(facecolor=color, alpha=0.45, hatch="//", edgecolor="white", label="backward")]
    top_frac = _header(fig, title + f"\nthe {top} slowest layers per network; labels: share of the sum of all "
                       f"layers' times (a profiling pass, not the timed steps)", handles, 2)
    fig.tight_layout(rect=(0, 0, 1, top_frac))
    return fig


def short_device(device: str) -> str:
    """The model part of a device key, with its tag: "NVIDIA H200 (132 SMs, sm_9.0,
    140.0 GiB) [power=500W]" -> "NVIDIA H200 [power=500W]". Never cut: tagged keys
    ([site=a], [site=b], power caps) differ only at the end, so a cut name would
    make two devices look alike (figure titles wrap instead)."""
    import re
    m = re.match(r"^(.*?) \((.*)\)(?: \[(.*)\])?$", device)
    head = device
    if m:
        head = m.group(1) + (f" [{m.group(3)}]" if m.group(3) else "")
    return head.strip() or device
