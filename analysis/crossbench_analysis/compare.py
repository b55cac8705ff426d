"""`compare OLD NEW`: cells whose median moved beyond the combined confidence intervals.

Cells are matched on every axis (device, engine, network, precision, batch,
phase, gpus, replica): a data-parallel cell is compared with the same group
size only.  A schema-1 cube reads as gpus = 1, so comparing it with a schema-2
cube matches its cells with the single-device ones.  For a cell ok in both
cubes, with m the median and [lo, hi] its 95% CI, the change is significant
when the medians differ by more than the two CIs combined in quadrature on the
sides that face each other:

    slower:  m_new - m_old > sqrt((hi_old - m_old)^2 + (m_new - lo_new)^2)
    faster:  m_old - m_new > sqrt((m_old - lo_old)^2 + (hi_new - m_new)^2)

A *regression* is a significant slowdown larger than the threshold
(``--fail-above``, default 5%), or a cell that was ok in OLD and is OOM,
unsupported, failed or timeout in NEW.  The exit status is 1 when there is at
least one regression, else 0 (2 for an error, and 2 when no cell is attempted
in both cubes: a gate given the wrong file must not pass).  Cells not run in one of the
cubes, or absent from its axes, are listed but do not fail the comparison.

Before the table: warnings when the two cubes do not come from the same
physical GPUs (the /ranks uuid of each device key) or the same git revision
(then a move may be the hardware's or the code's, not a change of the other),
and the overall geometric mean of NEW ÷ OLD median over the cells ok in both.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .analysis import label
from .cube import CELL_DIMS, Cube

COLS = ["status", "median_ms", "ci_low_ms", "ci_high_ms"]


def parse_threshold(text: str) -> float:
    """'5%', '5' or '2.5 %' -> 5.0 / 2.5 (percent)."""
    t = str(text).strip().rstrip("%").strip()
    try:
        v = float(t)
    except ValueError:
        raise ValueError(f"--fail-above expects a percentage such as 5% (got {text!r})") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"--fail-above must be a non-negative percentage (got {text!r})")
    return v


ORIGIN = ["device_uuid", "git_revision", "settings"]


def compare(old: Cube, new: Cube, threshold_pct: float = 5.0) -> pd.DataFrame:
    """One row per cell of either cube, with verdict, change_pct, regression (bool) and
    `sides_differ`: what differs between the two measurements besides the code under
    test (physical GPU, build, settings), empty when nothing does."""
    a = pd.concat([old.cells[list(CELL_DIMS) + COLS], old.origins(old.cells)[ORIGIN]], axis=1)
    b = pd.concat([new.cells[list(CELL_DIMS) + COLS], new.origins(new.cells)[ORIGIN]], axis=1)
    m = a.merge(b, on=list(CELL_DIMS), how="outer", suffixes=("_old", "_new"), indicator="which")
    sides = []
    for r in m.itertuples(index=False):
        differ = []
        if r.which == "both" and r.status_old != "not_run" and r.status_new != "not_run":
            if r.device_uuid_old and r.device_uuid_new and r.device_uuid_old != r.device_uuid_new:
                differ.append(f"GPU {r.device_uuid_old} → {r.device_uuid_new}")
            if r.git_revision_old != r.git_revision_new:
                differ.append(f"build {r.git_revision_old} → {r.git_revision_new}")
            if r.settings_old != r.settings_new:
                differ.append("settings")
        sides.append("; ".join(differ))
    verdicts, changes, regress, sig = [], [], [], []
    for r in m.itertuples(index=False):
        so, sn = r.status_old, r.status_new
        change = np.nan
        verdict, reg, significant = "unchanged", False, False
        if r.which == "left_only":
            verdict = "only in OLD (not on NEW's axes)"
        elif r.which == "right_only":
            verdict = "only in NEW (not on OLD's axes)"
        elif so == "ok" and sn == "ok":
            mo, lo_o, hi_o = r.median_ms_old, r.ci_low_ms_old, r.ci_high_ms_old
            mn, lo_n, hi_n = r.median_ms_new, r.ci_low_ms_new, r.ci_high_ms_new
            change = (mn / mo - 1) * 100
            slow_bound = math.hypot(_nz(hi_o - mo), _nz(mn - lo_n))
            fast_bound = math.hypot(_nz(mo - lo_o), _nz(hi_n - mn))
            if mn - mo > slow_bound:
                significant = True
                verdict = "slower"
                reg = change > threshold_pct
            elif mo - mn > fast_bound:
                significant = True
                verdict = "faster"
            else:
                verdict = "within noise (CIs overlap)"
        elif so == sn:
            verdict = "unchanged" if so != "not_run" else "not run in either"
        elif so == "ok" and sn == "not_run":
            verdict = "not run in NEW"
        elif so == "ok":
            verdict = f"ok → {label(sn)}"
            reg = True
        elif sn == "ok":
            verdict = f"{label(so)} → ok"
        else:
            verdict = f"{label(so)} → {label(sn)}"
        verdicts.append(verdict)
        changes.append(change)
        regress.append(reg)
        sig.append(significant)
    out = m.drop(columns=["which"] + [f"{c}_{s}" for c in ORIGIN for s in ("old", "new")]).copy()
    out["sides_differ"] = sides
    out["change_pct"] = changes
    out["significant"] = sig
    out["verdict"] = verdicts
    out["regression"] = regress
    return out


def common_cells(table: pd.DataFrame) -> int:
    """Cells attempted (any status but not_run) in both cubes: with none, nothing was compared."""
    attempted = lambda s: s.notna() & (s != "not_run")  # noqa: E731
    return int((attempted(table["status_old"]) & attempted(table["status_new"])).sum())


def provenance_warnings(old: Cube, new: Cube) -> list[str]:
    """What differs between the runs beyond the code under test: physical GPUs, revision."""
    out = []
    ro, rn = old.attrs.get("git_revision", "?"), new.attrs.get("git_revision", "?")
    if ro != rn:
        out.append(f"WARNING: different git revisions: OLD {ro}, NEW {rn}")
    for dev in sorted(set(old.devices) & set(new.devices)):
        uo, un = _uuids(old, dev), _uuids(new, dev)
        if uo and un and uo != un:
            out.append(f"WARNING: {dev}: different physical GPUs: OLD {', '.join(sorted(uo))}, "
                       f"NEW {', '.join(sorted(un))} (device-to-device variation is part of every change)")
    return out


def _uuids(cube: Cube, device: str) -> set[str]:
    r = cube.ranks
    if r.empty or "uuid" not in r.columns or "device_key" not in r.columns:
        return set()
    return {str(u) for u in r.loc[r["device_key"] == device, "uuid"] if str(u)}


def geomean_ratio(table: pd.DataFrame) -> tuple[float, int]:
    """Geometric mean of NEW ÷ OLD median over the cells ok in both, and their count."""
    both = table[(table["status_old"] == "ok") & (table["status_new"] == "ok")]
    ratios = (both["median_ms_new"] / both["median_ms_old"]).astype(float)
    ratios = ratios[np.isfinite(ratios) & (ratios > 0)]
    if ratios.empty:
        return float("nan"), 0
    return float(np.exp(np.log(ratios).mean())), len(ratios)


def _nz(v: float) -> float:
    return 0.0 if not math.isfinite(v) else max(0.0, v)


def changed(table: pd.DataFrame) -> pd.DataFrame:
    """The rows worth showing: significant moves and status changes."""
    keep = ~table["verdict"].isin(["unchanged", "within noise (CIs overlap)", "not run in either"])
    # A cell on one cube's axes only is worth a line when that cube attempted it.
    only_old = (table["verdict"].str.startswith("only in OLD")) & (table["status_old"] == "not_run")
    only_new = (table["verdict"].str.startswith("only in NEW")) & (table["status_new"] == "not_run")
    return table[keep & ~only_old & ~only_new].reset_index(drop=True)


def render(table: pd.DataFrame, threshold_pct: float, warnings: list[str] | None = None) -> str:
    show = changed(table)
    n_ok = int(((table["status_old"] == "ok") & (table["status_new"] == "ok")).sum())
    n_reg = int(table["regression"].sum())
    lines = list(warnings or [])
    ratio, n = geomean_ratio(table)
    if n:
        moved = ("no overall change" if abs(ratio - 1) < 5e-4 else
                 f"NEW {abs(1 - ratio) * 100:.1f}% {'faster' if ratio < 1 else 'slower'}")
        lines.append(f"overall: geometric mean of NEW ÷ OLD median time over {n} cells ok in both: {ratio:.3f} "
                     f"({moved}; speedup {1 / ratio:.3f}×)")
    else:
        lines.append("overall: no cell is ok in both cubes, so no geometric mean")
    n_differ = int((table["sides_differ"] != "").sum())
    if n_differ:
        lines.append(f"WARNING: {n_differ} compared cell(s) were measured on another physical GPU, by another build "
                     f"or with other settings (column 'sides differ in'); a move there is not the code's alone")
    lines += [f"compared {len(table)} cells ({n_ok} ok in both; {int((table['verdict'] == 'within noise (CIs overlap)').sum())} within noise); "
             f"{int((table['verdict'] == 'slower').sum())} significantly slower, "
             f"{int((table['verdict'] == 'faster').sum())} significantly faster, "
             f"{int(table['verdict'].str.contains('→').sum())} changed status; "
             f"regressions (slower by more than {threshold_pct:g}% beyond the CIs, or ok → not ok): {n_reg}"]
    if show.empty:
        lines.append("no cell moved beyond its confidence intervals.")
        return "\n".join(lines)
    rows = []
    for r in show.itertuples():
        rows.append([
            "REGRESSION" if r.regression else "", r.verdict, r.device, r.engine, r.network, r.precision,
            str(r.batch), r.phase, str(r.gpus), str(r.replica),
            _ms(r.status_old, r.median_ms_old, r.ci_low_ms_old, r.ci_high_ms_old),
            _ms(r.status_new, r.median_ms_new, r.ci_low_ms_new, r.ci_high_ms_new),
            f"{r.change_pct:+.1f}%" if np.isfinite(r.change_pct) else "", r.sides_differ])
    head = ["", "verdict", "device", "engine", "network", "precision", "batch", "phase", "gpus", "replica",
            "OLD median ms ±95% CI", "NEW median ms ±95% CI", "change", "sides differ in"]
    lines.append("")
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join("---" for _ in head) + "|")
    for row in rows:
        lines.append("| " + " | ".join(x.replace("|", "\\|") for x in row) + " |")
    return "\n".join(lines)


def _ms(status, m, lo, hi) -> str:
    if not isinstance(status, str):
        return "absent"
    if status != "ok":
        return label(status)
    from .plots import ci_pct
    return f"{m:.4g} {ci_pct(m, lo, hi)}"
