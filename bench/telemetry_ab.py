#!/usr/bin/env python3
"""Does the Runner's telemetry thread move the numbers? The `telemetryab` stage of gpu_session.sh runs
the same cells with measure.telemetry_interval_ms = 10 (the default: an NVML sample of clocks, power and
temperature every 10 ms beside the timed steps) and = 0 (a sample at each end only), interleaved over
rounds, each run its own process; this script reads the cubes (i<interval>_r<round>.h5) and prints every
cell's median per interval (the median over the rounds, each round's beside it) and the ratio
no-thread / default. A ratio below 1 means the sampling slows the steps it measures.

  python3 bench/telemetry_ab.py /tmp/out/telemetryab/*.h5
"""
import argparse
import math
import pathlib
import re
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import cube_cells  # noqa: E402


def runs_of(paths):
    """{interval_ms: [(round, path)]} from the cube names i<interval>_r<round>.h5."""
    runs = {}
    for path in paths:
        match = re.fullmatch(r"i(\d+)_r(\d+)\.h5", pathlib.Path(path).name)
        if not match:
            raise SystemExit(f"{path}: not a telemetryab cube (i<interval>_r<round>.h5)")
        runs.setdefault(int(match.group(1)), []).append((int(match.group(2)), path))
    return {interval: sorted(found) for interval, found in runs.items()}


def medians(runs, engines):
    """{(engine, network, precision, phase, batch): {interval: [median per round]}}"""
    table = {}
    for interval, found in runs.items():
        for _, path in found:
            for engine in engines:
                try:
                    cells = cube_cells.cudnn_cells(path, engine)
                except ValueError:
                    continue  # the engine is not in this cube
                for (network, precision, phase, batch), cell in cells.items():
                    table.setdefault((engine, network, precision, phase, batch), {}).setdefault(interval, []).append(
                        cell["median_ms"])
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cubes", nargs="+")
    parser.add_argument("--engines", default="cudnn,pytorch-compile,pytorch,jax")
    args = parser.parse_args()
    runs = runs_of(args.cubes)
    if 0 not in runs or len(runs) < 2:
        raise SystemExit(f"need cubes of interval 0 and of another interval; have {sorted(runs)}")
    default = max(runs)
    table = medians(runs, args.engines.split(","))
    print(f"| engine | network | precision | phase | batch | {default} ms: median (rounds) | 0 ms: median (rounds) "
          f"| 0 / {default} |")
    print("|---|---|---|---|---|---|---|---|")
    ratios = []
    for key in sorted(table):
        by = table[key]
        if default not in by or 0 not in by:
            continue
        a, b = statistics.median(by[default]), statistics.median(by[0])
        ratios.append(b / a)
        shown = [" ".join(f"{v:.4f}" for v in by[i]) for i in (default, 0)]
        print(f"| {' | '.join(str(k) for k in key)} | {a:.4f} ({shown[0]}) | {b:.4f} ({shown[1]}) | {b / a:.4f} |")
    if ratios:
        geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"\ngeometric mean 0 / {default}: {geomean:.4f} over {len(ratios)} cells "
              f"(min {min(ratios):.4f}, max {max(ratios):.4f})")


if __name__ == "__main__":
    main()
