#!/usr/bin/env python3
"""Before/after table of two cubes of the same cells, for a refactor that must not change results.

    PYTHONPATH=analysis /usr/bin/python3 bench/compare_cubes.py BEFORE.h5 AFTER.h5 \
        [--tolerance 2%] [--markdown FILE]

Cells are matched on every axis by the analysis package's `compare` (which
also says whether a move is beyond the confidence intervals). For each cell
the table shows both medians, their ratio (after / before), both
peak_memory_bytes and flags a cell whose median moved by more than the
tolerance (default 2%) either way, whose peak memory grew, or whose status
changed. Exit status: 1 when any cell is flagged, 0 when none is, 2 on bad
input.
"""

from __future__ import annotations

import argparse
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "analysis"))
from crossbench_analysis.compare import compare, parse_threshold  # noqa: E402
from crossbench_analysis.cube import CELL_DIMS, CubeError, load  # noqa: E402


def table(before, after, tolerance_pct: float):
    """One row per cell: the analysis comparison plus memory, ratio and flags."""
    rows = compare(before, after, threshold_pct=tolerance_pct)
    memory = ["peak_memory_bytes"]
    old = before.cells[list(CELL_DIMS) + memory]
    new = after.cells[list(CELL_DIMS) + memory]
    rows = rows.merge(old, on=list(CELL_DIMS), how="left").merge(
        new, on=list(CELL_DIMS), how="left", suffixes=("_old", "_new"))
    rows["ratio"] = rows["median_ms_new"] / rows["median_ms_old"]
    flags = []
    for r in rows.itertuples(index=False):
        why = []
        if r.status_old != r.status_new:
            why.append(f"status {r.status_old} → {r.status_new}")
        if math.isfinite(r.ratio) and abs(r.ratio - 1) * 100 > tolerance_pct:
            why.append(f"time {100 * (r.ratio - 1):+.1f}%")
        if math.isfinite(r.peak_memory_bytes_old) and math.isfinite(r.peak_memory_bytes_new) and \
                r.peak_memory_bytes_new > r.peak_memory_bytes_old:
            why.append(f"memory +{int(r.peak_memory_bytes_new - r.peak_memory_bytes_old)} B")
        flags.append("; ".join(why))
    rows["flag"] = flags
    attempted = (rows["status_old"] != "not_run") | (rows["status_new"] != "not_run")
    return rows[attempted].reset_index(drop=True)


def render(rows, tolerance_pct: float) -> str:
    head = ["network", "precision", "batch", "phase", "before ms", "after ms", "ratio",
            "before peak B", "after peak B", "flag"]
    lines = [f"{len(rows)} cells; flagged (time beyond ±{tolerance_pct:g}%, memory growth or status change): "
             f"{int((rows['flag'] != '').sum())}", "",
             "| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]

    def number(v, fmt):
        return format(v, fmt) if isinstance(v, (int, float)) and math.isfinite(v) else "–"

    for r in rows.itertuples(index=False):
        lines.append("| " + " | ".join([
            f"{r.engine} {r.network}", str(r.precision), str(r.batch), str(r.phase),
            number(r.median_ms_old, ".4g"), number(r.median_ms_new, ".4g"), number(r.ratio, ".4f"),
            number(r.peak_memory_bytes_old, ".0f"), number(r.peak_memory_bytes_new, ".0f"),
            f"**{r.flag}**" if r.flag else ""]) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--tolerance", default="2%", help="flag medians that moved more than this (default 2%%)")
    parser.add_argument("--markdown", metavar="FILE", help="also write the table to FILE")
    args = parser.parse_args(argv)
    try:
        tolerance = parse_threshold(args.tolerance)
        rows = table(load(args.before), load(args.after), tolerance)
    except (CubeError, ValueError, OSError) as error:
        print(f"compare_cubes: {error}", file=sys.stderr)
        return 2
    text = render(rows, tolerance)
    print(text)
    if args.markdown:
        pathlib.Path(args.markdown).write_text(text + "\n")
    return 1 if (rows["flag"] != "").any() else 0


if __name__ == "__main__":
    sys.exit(main())
