"""Computations on a cube's cells: replicas, batch choice, speedups, batch curves,
data-parallel scaling.

Everything here keeps every status: a non-ok cell stays in the result with its
status (and a NaN where a number would be), so that callers show it as such.

The `gpus` axis (data-parallel group size, schema 2): functions that group or
match cells carry `gpus` as a key when the cells have it, so a data-parallel
cell is never mixed with the single-device cell of the same coordinates.  The
comparisons of devices, engines and batch sizes are single-device questions:
the report and procurement call them on ``single_device(cells)`` (gpus == 1);
``scaling_table`` answers the data-parallel one.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .cube import FLOAT_VARS, STATUS_LABELS

KEY = ["device", "engine", "network", "precision", "batch", "phase", "gpus"]
# A cell's coordinates without device and engine (what device/engine comparisons match on).
MATCH = ["network", "precision", "batch", "phase", "gpus"]
# The study's seven networks ("Oxford VGG" is vgg11), in its order.
STUDY_NETWORKS = ("alexnet", "overfeat", "vgg11", "googlenet", "resnet50", "resnet101", "resnet152")
NETWORK_ORDER = ("alexnet", "overfeat", "vgg11", "vgg16", "vgg19", "googlenet", "resnet50",
                 "resnet101", "resnet152")
PRECISION_ORDER = ("fp32", "tf32", "fp16", "bf16", "amp-fp16", "amp-bf16")  # include/crossbench/cell.hpp
PHASE_ORDER = ("inference", "training")
NATIVE_ENGINES = ("cudnn", "onednn")
# Severity when replicas of one cell disagree and none is ok.
_SEVERITY = ["failed", "timeout", "oom", "unsupported", "not_run"]


def label(status: str) -> str:
    return STATUS_LABELS.get(status, status)


def ordered(values, order) -> list:
    values = list(dict.fromkeys(values))
    known = [v for v in order if v in values]
    return known + [v for v in values if v not in known]


def _present(cols, df: pd.DataFrame) -> list[str]:
    """`cols` that `df` has (cells built without a gpus column still work)."""
    return [c for c in cols if c in df.columns]


def single_device(cells: pd.DataFrame) -> pd.DataFrame:
    """The single-device cells (gpus == 1): what device, engine and batch comparisons use.
    Cells without a gpus column are all single-device."""
    if "gpus" not in cells.columns:
        return cells
    return cells[cells["gpus"] == 1].reset_index(drop=True)


def by_design_unsupported(cells: pd.DataFrame) -> pd.Series:
    """True for the inference cells with gpus > 1: crossbench records them
    `unsupported` by design (inference is single-device), they are not failures."""
    if "gpus" not in cells.columns:
        return pd.Series(False, index=cells.index)
    return (cells["gpus"] > 1) & (cells["phase"] != "training") & (cells["status"] == "unsupported")


# ---------------------------------------------------------------------------
# replicas

def collapse_replicas(cells: pd.DataFrame) -> pd.DataFrame:
    """One row per cell over the replica axis.

    ok if any replica is ok: the median of the replicas' medians (and of every
    other number), the CI from the lowest ci_low to the highest ci_high; else
    the most severe status of the replicas.  Adds n_replicas and n_ok."""
    cells = cells.copy()
    if cells.empty:
        out = cells.drop(columns=["replica"], errors="ignore")
        out["n_replicas"] = pd.Series(dtype=int)
        out["n_ok"] = pd.Series(dtype=int)
        return out
    if cells["replica"].nunique() == 1:
        out = cells.drop(columns=["replica"])
        out["n_replicas"] = 1
        out["n_ok"] = (out["status"] == "ok").astype(int)
        return out.reset_index(drop=True)

    rows = []
    key_cols = _present(KEY, cells)
    for key, g in cells.groupby(key_cols, sort=False):
        ok = g[g["status"] == "ok"]
        row = dict(zip(key_cols, key))
        row["n_replicas"] = len(g)
        row["n_ok"] = len(ok)
        if len(ok):
            row["status"] = "ok"
            for n in FLOAT_VARS:
                row[n] = float(np.nanmedian(ok[n])) if ok[n].notna().any() else np.nan
            row["ci_low_ms"] = float(ok["ci_low_ms"].min())
            row["ci_high_ms"] = float(ok["ci_high_ms"].max())
            row["throttled"] = int(ok["throttled"].max())
            row["steps"] = int(ok["steps"].sum())
            row["rank"] = int(ok["rank"].iloc[0])
            bad = g[g["status"] != "ok"]
            row["message"] = "; ".join(dict.fromkeys(
                [f"replica {r.replica}: {label(r.status)}" for r in bad.itertuples()] +
                [m for m in ok["message"] if m]))
        else:
            statuses = list(g["status"])
            row["status"] = min(statuses, key=lambda s: _SEVERITY.index(s) if s in _SEVERITY else 0)
            for n in FLOAT_VARS:
                row[n] = np.nan
            row["throttled"] = -1
            row["steps"] = int(g["steps"].sum())
            row["rank"] = int(g["rank"].iloc[0])
            row["message"] = "; ".join(dict.fromkeys(m for m in g["message"] if m))
        rows.append(row)
    return pd.DataFrame(rows)


def replica_spread(cells: pd.DataFrame) -> pd.DataFrame:
    """Device-to-device variation: per cell with >= 2 ok replicas, slowest/fastest median."""
    ok = cells[cells["status"] == "ok"]
    if ok.empty or cells["replica"].nunique() < 2:
        return pd.DataFrame()
    g = ok.groupby(_present(KEY, ok))["median_ms"]
    out = pd.DataFrame({"replicas_ok": g.count(), "fastest_ms": g.min(), "slowest_ms": g.max()})
    out = out[out["replicas_ok"] >= 2].reset_index()
    out["spread_pct"] = (out["slowest_ms"] / out["fastest_ms"] - 1) * 100
    return out.sort_values("spread_pct", ascending=False).reset_index(drop=True)


# ---------------------------------------------------------------------------
# choices

def engines_on(cells: pd.DataFrame, device: str) -> list[str]:
    """Engines with at least one cell that was attempted (status != not_run) on `device`."""
    d = cells[(cells["device"] == device) & (cells["status"] != "not_run")]
    return ordered(d["engine"].unique(), NATIVE_ENGINES)


def focus_batch(cells: pd.DataFrame, requested: int | None = None) -> int:
    """The batch of the study's bar figures: `requested`, else 64 (the study's) when
    it was run, else the batch with the most ok cells (ties: the larger)."""
    batches = sorted(cells["batch"].unique())
    if requested is not None:
        if requested not in batches:
            raise ValueError(f"batch {requested} is not on the cube's batch axis {batches}")
        return int(requested)
    attempted = cells[cells["status"] != "not_run"]
    if 64 in set(attempted["batch"]):
        return 64
    counts = cells[cells["status"] == "ok"].groupby("batch").size()
    if counts.empty:
        counts = attempted.groupby("batch").size()
    if counts.empty:
        return int(batches[-1]) if batches else 64
    return int(max(counts.index, key=lambda b: (counts[b], b)))


def native_first(engines: list[str]) -> str:
    for e in NATIVE_ENGINES:
        if e in engines:
            return e
    return engines[0]


def default_baseline_device(cells: pd.DataFrame) -> str | None:
    """The device with the most ok cells (ties: first on the axis)."""
    ok = cells[cells["status"] == "ok"]
    if ok.empty:
        return None
    counts = ok.groupby("device", sort=False).size()
    devices = list(dict.fromkeys(cells["device"]))
    return max(devices, key=lambda d: (counts.get(d, 0), -devices.index(d)))


# ---------------------------------------------------------------------------
# speedups

def _ratio(base: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
    """Speedup of `other` over `base` (base time / other time) with its interval."""
    ok = (base["status"].values == "ok") & (other["status"].values == "ok")
    s = base["median_ms"].values / other["median_ms"].values
    lo = base["ci_low_ms"].values / other["ci_high_ms"].values
    hi = base["ci_high_ms"].values / other["ci_low_ms"].values
    return pd.DataFrame({"speedup": np.where(ok, s, np.nan), "speedup_low": np.where(ok, lo, np.nan),
                         "speedup_high": np.where(ok, hi, np.nan)})


def _why_missing(base_status: str, other_status: str, base_name: str, other_name: str) -> str:
    parts = []
    if other_status != "ok":
        parts.append(f"{label(other_status)} on {other_name}")
    if base_status != "ok":
        parts.append(f"{label(base_status)} on {base_name}")
    return "; ".join(parts)


def device_speedups(cells: pd.DataFrame, baseline: str, device: str) -> tuple[pd.DataFrame, str]:
    """Speedup of `device` over `baseline` per (engine, network, precision, batch, phase).

    Cells are matched on the same engine when the two devices share one;
    otherwise each device's fastest ok engine per cell is used ("best engine").
    Returns (table, mode) with mode "same engine" or "best engine"."""
    a = cells[(cells["device"] == baseline) & (cells["status"] != "not_run")]
    b = cells[(cells["device"] == device) & (cells["status"] != "not_run")]
    shared = sorted(set(a["engine"]) & set(b["engine"]))
    cols = _present(MATCH, cells)
    if shared:
        mode = "same engine"
        on = ["engine"] + cols
        m = a.merge(b, on=on, suffixes=("_base", "_dev"))
        m["engine_base"] = m["engine"]
        m["engine_dev"] = m["engine"]
    else:
        mode = "best engine"
        m = _best_engine(a).merge(_best_engine(b), on=cols, suffixes=("_base", "_dev"))
        m["engine"] = m["engine_base"] + " vs " + m["engine_dev"]
    if m.empty:
        return pd.DataFrame(), mode
    base = pd.DataFrame({k: m[f"{k}_base"].values for k in ("status", "median_ms", "ci_low_ms", "ci_high_ms")})
    other = pd.DataFrame({k: m[f"{k}_dev"].values for k in ("status", "median_ms", "ci_low_ms", "ci_high_ms")})
    r = _ratio(base, other)
    out = pd.DataFrame({"engine": m["engine"].values, **{k: m[k].values for k in cols},
                        "baseline_status": m["status_base"].values, "status": m["status_dev"].values,
                        "baseline_ms": m["median_ms_base"].values, "device_ms": m["median_ms_dev"].values})
    out = pd.concat([out, r], axis=1)
    out["note"] = [_why_missing(bs, s, "baseline", "this device") if (bs != "ok" or s != "ok") else ""
                   for bs, s in zip(out["baseline_status"], out["status"])]
    return _sort(out), mode


def _best_engine(d: pd.DataFrame) -> pd.DataFrame:
    """Per (network, precision, batch, phase[, gpus]): the fastest ok engine's row, else
    one non-ok row (the most telling status)."""
    rows = []
    for _, g in d.groupby(_present(MATCH, d), sort=False):
        ok = g[g["status"] == "ok"]
        if len(ok):
            rows.append(ok.loc[ok["median_ms"].idxmin()])
        else:
            rows.append(g.iloc[sorted(range(len(g)), key=lambda i: _SEVERITY.index(g["status"].iloc[i])
                                      if g["status"].iloc[i] in _SEVERITY else 0)[0]])
    return pd.DataFrame(rows).reset_index(drop=True) if rows else d.iloc[0:0]


def engine_speedups(cells: pd.DataFrame, device: str, baseline_engine: str) -> pd.DataFrame:
    """Speedup of each other engine over `baseline_engine` on `device`."""
    d = cells[(cells["device"] == device) & (cells["status"] != "not_run")]
    base = d[d["engine"] == baseline_engine]
    frames = []
    for e in engines_on(cells, device):
        if e == baseline_engine:
            continue
        o = d[d["engine"] == e]
        cols = _present(MATCH, d)
        m = base.merge(o, on=cols, suffixes=("_base", "_dev"))
        if m.empty:
            continue
        r = _ratio(pd.DataFrame({k: m[f"{k}_base"].values for k in ("status", "median_ms", "ci_low_ms", "ci_high_ms")}),
                   pd.DataFrame({k: m[f"{k}_dev"].values for k in ("status", "median_ms", "ci_low_ms", "ci_high_ms")}))
        out = pd.DataFrame({"engine": e, **{k: m[k].values for k in cols},
                            "baseline_status": m["status_base"].values, "status": m["status_dev"].values,
                            "baseline_ms": m["median_ms_base"].values, "device_ms": m["median_ms_dev"].values})
        out = pd.concat([out, r], axis=1)
        out["note"] = [_why_missing(bs, s, baseline_engine, e) if (bs != "ok" or s != "ok") else ""
                       for bs, s in zip(out["baseline_status"], out["status"])]
        frames.append(out)
    return _sort(pd.concat(frames, ignore_index=True)) if frames else pd.DataFrame()


def _sort(df: pd.DataFrame) -> pd.DataFrame:
    if df.empty:
        return df
    key = {
        "network": lambda s: s.map(lambda v: NETWORK_ORDER.index(v) if v in NETWORK_ORDER else 99),
        "precision": lambda s: s.map(lambda v: PRECISION_ORDER.index(v) if v in PRECISION_ORDER else 99),
        "phase": lambda s: s.map(lambda v: PHASE_ORDER.index(v) if v in PHASE_ORDER else 99),
    }
    cols = [c for c in ["precision", "batch", "phase", "gpus", "engine", "network"] if c in df.columns]
    return df.sort_values(cols, key=lambda s: key[s.name](s) if s.name in key else s).reset_index(drop=True)


# ---------------------------------------------------------------------------
# batch efficiency (the study's second figure)

FLAT = 0.05   # a doubling of the batch that changes per-image time by less than 5% is "flat"


def batch_curve(series: pd.DataFrame) -> dict:
    """Facts about one (device, engine, network, precision, phase) over the batch axis.

    `series` has batch, status, median_ms, images_per_s.  Returns a dict with
    best_batch, best_images_per_s, largest_fit, first_oom, stops_falling_at,
    bend ("up", "flat", "down" or None) and words (a sentence)."""
    s = series.sort_values("batch")
    ok = s[s["status"] == "ok"]
    attempted = s[s["status"] != "not_run"]
    facts = {"best_batch": None, "best_images_per_s": None, "largest_fit": None, "first_oom": None,
             "stops_falling_at": None, "bend": None, "words": ""}
    oom = s[s["status"] == "oom"]
    if len(oom):
        facts["first_oom"] = int(oom["batch"].min())
    other_bad = attempted[~attempted["status"].isin(["ok", "oom"])]
    bad_words = ""
    if len(other_bad):
        groups = {}
        for r in other_bad.itertuples():
            groups.setdefault(label(r.status), []).append(str(r.batch))
        bad_words = " " + "; ".join(f"{k} at batch {', '.join(v)}" for k, v in groups.items()) + "."
    if ok.empty:
        if attempted.empty:
            facts["words"] = "not run."
        else:
            st = ", ".join(f"{label(k)} ×{v}" for k, v in attempted["status"].value_counts().items())
            facts["words"] = f"no batch size ran ({st})." + (
                f" OOM from batch {facts['first_oom']}." if facts["first_oom"] else "")
        return facts

    b = ok["batch"].to_numpy(dtype=float)
    t = (ok["median_ms"] / ok["batch"]).to_numpy()   # ms per image
    t_lo = (ok["ci_low_ms"] / ok["batch"]).to_numpy()
    t_hi = (ok["ci_high_ms"] / ok["batch"]).to_numpy()
    best = int(np.argmin(t))
    facts["best_batch"] = int(b[best])
    facts["best_images_per_s"] = float(1e3 / t[best])
    if facts["first_oom"] is not None:
        fits = ok[ok["batch"] < facts["first_oom"]]
        facts["largest_fit"] = int(fits["batch"].max()) if len(fits) else None
    else:
        facts["largest_fit"] = int(b.max())

    words = []
    if len(b) == 1:
        words.append(f"only batch {int(b[0])} ran ({t[0]:.3g} ms/image).")
    else:
        # Where per-image time stops falling: the first batch after which the next
        # step (normalised per doubling) gains less than FLAT.
        stop = None
        for i in range(len(b) - 1):
            doublings = math.log2(b[i + 1] / b[i])
            gain = 1 - (t[i + 1] / t[i]) ** (1 / doublings)
            if gain < FLAT:
                stop = i
                break
        if best > 0:
            noise = "" if t_hi[best] < t_lo[0] else " (within the confidence intervals: not significant)"
            words.append(f"per-image time falls {t[0] / t[best]:.3g}× from batch {int(b[0])} "
                         f"({t[0]:.3g} ms) to batch {int(b[best])} ({t[best]:.3g} ms){noise}")
        else:
            words.append(f"per-image time is lowest at the smallest batch, {int(b[0])} ({t[0]:.3g} ms)")
        if stop is not None and stop < len(b) - 1:
            facts["stops_falling_at"] = int(b[stop])
            if stop < best:
                words.append(f"it stops falling at batch {int(b[stop])} (each doubling beyond gains "
                             f"less than {FLAT:.0%})")
            elif stop == best and best < len(b) - 1:
                words.append(f"it stops falling at batch {int(b[stop])}")
        # Shape beyond the best point.
        last = len(b) - 1
        if best < last:
            rise = t[last] / t[best] - 1
            if rise > FLAT and t_lo[last] > t_hi[best]:
                facts["bend"] = "up"
                words.append(f"beyond it the curve bends up: per-image time is {rise:+.0%} at batch "
                             f"{int(b[last])}, so larger batches lose throughput")
            elif rise > FLAT:
                facts["bend"] = "flat"
                words.append(f"beyond it per-image time is {rise:+.0%} at batch {int(b[last])}, but within "
                             f"the confidence intervals (not a significant bend)")
            else:
                facts["bend"] = "flat"
                words.append(f"beyond it the curve is flat (within {FLAT:.0%} up to batch {int(b[last])})")
        else:
            if stop is None:
                facts["bend"] = "down"
                if facts["first_oom"] is not None:
                    words.append(f"still falling at the largest batch that fit ({int(b[last])}): memory, not "
                                 f"efficiency, limits the batch")
                else:
                    words.append(f"still falling at the largest batch run ({int(b[last])}): larger batches "
                                 f"may gain more")
            else:
                facts["bend"] = "flat"
        words = ["; ".join(words) + "."]
    ips = facts["best_images_per_s"]
    words.append(f"Best throughput at batch {facts['best_batch']} "
                 f"({ips:,.0f} images/s)." if ips >= 100 else
                 f"Best throughput at batch {facts['best_batch']} ({ips:.3g} images/s).")
    if facts["first_oom"] is not None:
        if facts["largest_fit"] is not None:
            words.append(f"Largest batch that fit: {facts['largest_fit']} (OOM from batch {facts['first_oom']}).")
        else:
            words.append(f"OOM from batch {facts['first_oom']}.")
    else:
        words.append(f"No OOM up to batch {int(b.max())}.")
    facts["words"] = " ".join(words)[0].upper() + " ".join(words)[1:] + bad_words
    return facts


# ---------------------------------------------------------------------------
# data-parallel scaling

SCALING_THRESHOLD = 0.9   # a data-parallel cell below this scaling efficiency is flagged
SCALING_KEY = ["device", "engine", "network", "precision", "batch"]
SCALING_COLUMNS = SCALING_KEY + [
    "gpus", "status", "median_ms", "images_per_s", "images_per_s_1gpu", "ideal_images_per_s",
    "scaling_efficiency", "efficiency_source", "exposed_communication_ms", "exposed_share",
    "below_threshold", "baseline_status", "n_replicas", "note"]


def _g(v: float) -> str:
    """A number in a sentence: 3 significant digits, no exponent below a million."""
    return f"{v:.3g}" if abs(v) < 1000 or abs(v) >= 1e6 else f"{v:,.0f}"


def scaling_table(cells: pd.DataFrame, threshold: float = SCALING_THRESHOLD) -> pd.DataFrame:
    """Data-parallel scaling, one row per training cell with gpus > 1 that was
    attempted (status != not_run), keyed by (device, engine, network, precision,
    batch, gpus); replicas are combined first (collapse_replicas) when `cells` has
    a replica column.

    Columns: median_ms (the group's step), images_per_s (the group's: gpus × batch
    ÷ median), images_per_s_1gpu (the gpus = 1 cell of the same coordinates, NaN
    unless ok), ideal_images_per_s (gpus × images_per_s_1gpu), scaling_efficiency
    (the cube's; where the cube has none but both cells are ok, computed as
    images_per_s ÷ ideal_images_per_s, efficiency_source says which),
    exposed_communication_ms, exposed_share (of the step), below_threshold (an ok
    cell whose efficiency is below `threshold`), baseline_status (of the gpus = 1
    cell; "absent" when the cube has none) and note (why a row is flagged or has
    no efficiency, in words).  Inference cells with gpus > 1 (unsupported by
    design), single-device cells and cells never attempted are not rows.  A
    data-parallel cell that is not ok stays a row with its status and NaNs."""
    if cells.empty or "gpus" not in cells.columns:
        return pd.DataFrame(columns=SCALING_COLUMNS)
    if "replica" in cells.columns:
        cells = collapse_replicas(cells)
    train = cells[cells["phase"] == "training"]
    dp = train[(train["gpus"] > 1) & (train["status"] != "not_run")]
    if dp.empty:
        return pd.DataFrame(columns=SCALING_COLUMNS)
    base = {tuple(r[k] for k in SCALING_KEY): r for r in train[train["gpus"] == 1].to_dict("records")}
    rows = []
    for r in dp.to_dict("records"):
        b = base.get(tuple(r[k] for k in SCALING_KEY))
        base_status = b["status"] if b is not None else "absent"
        base_ips = b["images_per_s"] if b is not None and base_status == "ok" else np.nan
        g = int(r["gpus"])
        ok = r["status"] == "ok"
        median = r["median_ms"] if ok else np.nan
        ips = r["images_per_s"] if ok else np.nan
        eff = r["scaling_efficiency"] if ok else np.nan
        source = "cube" if np.isfinite(eff) else ""
        if ok and not np.isfinite(eff) and np.isfinite(base_ips) and base_ips > 0 and np.isfinite(ips):
            eff, source = ips / (g * base_ips), "computed"
        exposed = r["exposed_communication_ms"] if ok else np.nan
        share = exposed / median if np.isfinite(exposed) and np.isfinite(median) and median > 0 else np.nan
        below = bool(ok and np.isfinite(eff) and eff < threshold)
        if not ok:
            msg = str(r.get("message", "") or "")
            note = label(r["status"]) + (f": {msg}" if msg else "")
        elif below:
            comm = (f"exposed communication {_g(exposed)} ms of {_g(median)} ms step ({share:.0%})"
                    if np.isfinite(exposed) else f"exposed communication not measured; {_g(median)} ms step")
            note = f"below {threshold:g}: {comm}"
        elif not np.isfinite(eff):
            note = ("no efficiency: the cube has no gpus = 1 cell of these coordinates" if b is None else
                    f"no efficiency: the gpus = 1 cell is {label(base_status)}")
        else:
            note = ""
        rows.append({**{k: r[k] for k in SCALING_KEY}, "gpus": g, "status": r["status"], "median_ms": median,
                     "images_per_s": ips, "images_per_s_1gpu": base_ips,
                     "ideal_images_per_s": g * base_ips, "scaling_efficiency": eff, "efficiency_source": source,
                     "exposed_communication_ms": exposed, "exposed_share": share, "below_threshold": below,
                     "baseline_status": base_status, "n_replicas": int(r.get("n_replicas", 1)), "note": note})
    out = pd.DataFrame(rows, columns=SCALING_COLUMNS)
    devices = list(dict.fromkeys(cells["device"]))
    engines = list(dict.fromkeys(cells["engine"]))
    order = {
        "device": lambda s: s.map(devices.index),
        "engine": lambda s: s.map(engines.index),
        "network": lambda s: s.map(lambda v: NETWORK_ORDER.index(v) if v in NETWORK_ORDER else 99),
        "precision": lambda s: s.map(lambda v: PRECISION_ORDER.index(v) if v in PRECISION_ORDER else 99),
    }
    return out.sort_values(SCALING_KEY + ["gpus"], key=lambda s: order[s.name](s) if s.name in order else s,
                           kind="stable").reset_index(drop=True)


def geomean(values) -> float:
    v = np.asarray(list(values), dtype=float)
    if len(v) == 0 or not np.all(np.isfinite(v)) or np.any(v <= 0):
        return float("nan")
    return float(np.exp(np.mean(np.log(v))))
