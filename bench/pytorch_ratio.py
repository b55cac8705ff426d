#!/usr/bin/env python3
"""PyTorch ÷ crossbench per cell, from a `pytorch` stage's JSON and a cube.

bench/gpu_pytorch_vs_crossbench.py measures PyTorch eager on the GPU and
writes every cell's time (--out pytorch.json). This script puts those times
next to the cudnn engine's medians of any cube of the same cells, e.g. a
later build or a run with --cuda-graphs, without spending device time on
PyTorch again:

    /usr/bin/python3 bench/pytorch_ratio.py --pytorch pytorch.json --cube seed.h5 [--baseline old.h5]

Prints a Markdown table (ratio > 1: crossbench is faster), the geometric mean
and the cells where crossbench is slower; --baseline adds the ratio of an
earlier cube's times to see what a change bought. Exits 2 on cells missing
from the cube, naming them.
"""

import argparse
import json
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import cube_cells  # noqa: E402


def geometric_mean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def ratio_rows(pytorch_rows, cells, baseline=None):
    """One dict per PyTorch cell with an ok time: pytorch_ms, crossbench_ms, ratio (and baseline ones)."""
    rows, missing = [], []
    for r in pytorch_rows:
        if r.get("status", "ok") != "ok" or not r["pytorch_ms"] == r["pytorch_ms"]:
            continue
        key = (r["network"], r["precision"], r["phase"], int(r["batch"]))
        if key not in cells:
            missing.append("/".join(map(str, key)))
            continue
        row = {"network": key[0], "precision": key[1], "phase": key[2], "batch": key[3],
               "pytorch_ms": r["pytorch_ms"], "crossbench_ms": cells[key]["median_ms"],
               "ratio": r["pytorch_ms"] / cells[key]["median_ms"]}
        if baseline is not None and key in baseline:
            row["baseline_ms"] = baseline[key]["median_ms"]
            row["baseline_ratio"] = r["pytorch_ms"] / baseline[key]["median_ms"]
        rows.append(row)
    return rows, missing


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pytorch", required=True, help="JSON written by gpu_pytorch_vs_crossbench.py --out")
    parser.add_argument("--cube", required=True, help="a results cube with the cudnn engine's cells")
    parser.add_argument("--baseline", help="an earlier cube of the same cells, for a before/after column")
    parser.add_argument("--engine", default="cudnn", help="the crossbench engine whose cells are compared")
    args = parser.parse_args(argv)
    try:
        with open(args.pytorch) as handle:
            pytorch_rows = json.load(handle)
        cells = cube_cells.cudnn_cells(args.cube, args.engine)
        baseline = cube_cells.cudnn_cells(args.baseline, args.engine) if args.baseline else None
    except (OSError, ValueError, KeyError) as error:
        print(f"pytorch_ratio: {error}", file=sys.stderr)
        return 2
    rows, missing = ratio_rows(pytorch_rows, cells, baseline)
    if missing:
        print(f"pytorch_ratio: {len(missing)} cell(s) of {args.pytorch} are not measured in {args.cube}: "
              + ", ".join(missing), file=sys.stderr)
        return 2
    with_baseline = baseline is not None
    header = "| network | prec | phase | PyTorch ms | crossbench ms | ratio |"
    rule = "|---|---|---|---|---|---|"
    if with_baseline:
        header += " baseline ms | baseline ratio |"
        rule += "---|---|"
    print(header)
    print(rule)
    for r in rows:
        line = (f"| {r['network']} | {r['precision']} | {r['phase']} | {r['pytorch_ms']:.3f} | "
                f"{r['crossbench_ms']:.3f} | {r['ratio']:.3f} |")
        if with_baseline:
            line += (f" {r['baseline_ms']:.3f} | {r['baseline_ratio']:.3f} |" if "baseline_ms" in r else " | |")
        print(line)
    ratios = [r["ratio"] for r in rows]
    print(f"\ngeometric mean of PyTorch / crossbench over {len(ratios)} cells: {geometric_mean(ratios):.3f}")
    if with_baseline:
        before = [r["baseline_ratio"] for r in rows if "baseline_ratio" in r]
        print(f"baseline: {geometric_mean(before):.3f} over {len(before)} cells")
    slower = [f"{r['network']}/{r['precision']}/{r['phase']} ({r['ratio']:.3f})" for r in rows if r["ratio"] < 1]
    print(f"cells where crossbench is slower ({len(slower)}): " + (", ".join(slower) if slower else "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
