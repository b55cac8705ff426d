#!/usr/bin/env python3
"""Which layers move when one cell's median moves between processes (issue 24's 1.02, DESIGN.md "Power management
is not all of it": OverFeat's step depends on where its memory lies).

    python3 bench/layer_spread.py run1.h5 run2.h5 run3.h5 ... [--engine cudnn] [--top 8]

The cubes hold the same cells, each measured with `--layer-times` (a separate pass after the timed steps, in the
same session and pool). For every cell profiled in all of them it prints the cell's median in each cube, their
max/min, and the sum of its layers' times in each cube. Then the layers ranked by how far they move: each
layer's forward + backward time in every cube, its max - min [ms], and its share of the cell's move. The move is
the slowest cube's time minus the fastest cube's, the cubes ranked by the cell's median. The last column is the
Pearson correlation of the layer's time with the cell's median over the cubes ("-" with fewer than three cubes
or where either does not vary). A layer that carries the move and correlates near 1 is one whose time follows
the process.

h5py only (bench/cube_cells.py's readers), so it runs on the GPU machine too.
"""

import argparse
import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from cube_cells import cudnn_cells, layer_times  # noqa: E402


def correlation(xs, ys):
    """Pearson's r of two equal-length lists; None with fewer than three points or no variation in either."""
    if len(xs) < 3:
        return None
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mean_x) ** 2 for x in xs)
    syy = sum((y - mean_y) ** 2 for y in ys)
    if sxx <= 0 or syy <= 0:
        return None
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / math.sqrt(sxx * syy)


def cell_spread(medians, layers_per_cube):
    """One cell: {"medians", "sums", "slowest", "fastest", "layers": [{"layer", "kind", "times", "range_ms",
    "move_ms", "share", "r"}, ...]} ranked by range. `layers_per_cube` holds each cube's
    [(layer, kind, forward_ms, backward_ms)]; the cubes must profile the same layers in the same order."""
    names = [(layer, kind) for layer, kind, _, _ in layers_per_cube[0]]
    for i, layers in enumerate(layers_per_cube[1:], start=1):
        if [(layer, kind) for layer, kind, _, _ in layers] != names:
            raise ValueError(f"cube {i + 1} profiled other layers than cube 1")
    slowest = max(range(len(medians)), key=lambda i: medians[i])
    fastest = min(range(len(medians)), key=lambda i: medians[i])
    move = medians[slowest] - medians[fastest]
    rows = []
    for position, (layer, kind) in enumerate(names):
        times = [cube[position][2] + cube[position][3] for cube in layers_per_cube]
        layer_move = times[slowest] - times[fastest]
        rows.append(dict(layer=layer, kind=kind, times=times, range_ms=max(times) - min(times), move_ms=layer_move,
                         share=layer_move / move if move > 0 else None, r=correlation(times, medians)))
    rows.sort(key=lambda row: -row["range_ms"])
    sums = [sum(f + b for _, _, f, b in cube) for cube in layers_per_cube]
    return dict(medians=medians, sums=sums, slowest=slowest, fastest=fastest, layers=rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cubes", nargs="+", type=pathlib.Path)
    parser.add_argument("--engine", default="cudnn")
    parser.add_argument("--top", type=int, default=8, help="layers shown per cell, the most moving first")
    args = parser.parse_args()
    if len(args.cubes) < 2:
        parser.error("give two cubes at least: the spread is between them")
    if args.top < 1:
        parser.error(f"--top must be at least 1, not {args.top}")
    cells = [cudnn_cells(path, args.engine) for path in args.cubes]
    profiles = [layer_times(path, args.engine) for path in args.cubes]
    for path, profile in zip(args.cubes, profiles):
        if not profile:
            sys.exit(f"layer_spread: {path} holds no layer times of engine '{args.engine}' (run with --layer-times)")
    common = sorted(set.intersection(*(set(p) & set(c) for p, c in zip(profiles, cells))))
    if not common:
        sys.exit("layer_spread: no cell is measured and profiled in every cube")
    for key in common:
        spread = cell_spread([c[key]["median_ms"] for c in cells], [p[key] for p in profiles])
        medians = spread["medians"]
        network, precision, phase, batch = key
        print(f"{network} {precision} {phase} batch {batch}: medians "
              + " ".join(f"{m:.3f}" for m in medians)
              + f" ms, max/min {max(medians) / min(medians):.4f}; layers summed "
              + " ".join(f"{s:.3f}" for s in spread["sums"])
              + f" ms; slowest cube {spread['slowest'] + 1}, fastest {spread['fastest'] + 1}")
        print(f"  {'layer':12s} {'kind':18s} " + " ".join(f"{'cube' + str(i + 1):>8s}" for i in range(len(medians)))
              + f" {'range':>8s} {'move':>8s} {'share':>6s} {'r':>6s}")
        for row in spread["layers"][:args.top]:
            share = f"{row['share']:6.2f}" if row["share"] is not None else f"{'-':>6s}"
            r = f"{row['r']:6.2f}" if row["r"] is not None else f"{'-':>6s}"
            print(f"  {row['layer']:12s} {row['kind']:18s} " + " ".join(f"{t:8.4f}" for t in row["times"])
                  + f" {row['range_ms']:8.4f} {row['move_ms']:8.4f} {share} {r}")
    print(f"\n{len(common)} cells profiled in all {len(args.cubes)} cubes")


if __name__ == "__main__":
    main()
