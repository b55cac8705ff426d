#!/usr/bin/env python3
"""Reproducibility of the cudnn engine across separate processes (issue 15, points 2 and 4).

    python3 bench/repro_cubes.py run1.h5 run2.h5 run3.h5 [--logs cold.log warm.log] [--limit 1.02] [--engine cudnn]

For every cell measured in all the cubes: the medians, max ÷ min of them (the
target is <= 1.02), whether the plans agree (the cell's `decisions` with every
measured time taken out: the same algorithms, layouts and fusions), and the
algorithm cache's hits and misses per cube, and each cube's mean SM clock over the timed steps
(a T after it: a power or thermal throttle reason fired; the H200's throttled cells are where the
spread was largest, bench/results/2026-12-03/call38) and, where the cell searched, the SM clock
while it did (min..mean, the decisions' search_sm_clock), and each cube's hottest GPU temperature over the
timed steps (- where the cube did not record it), and, where the cubes measured each cell in
several fresh sessions (--repetitions), each cube's max/min of its sessions' medians (the spread inside one
process; - where measured once: bench/results/2026-12-07 found the processes' spread there); last/1st and its geometric mean
compare two settings (e.g. --layout nchw then nhwc). With --logs: the wall time each
seed log records (gpu_session.sh's seed stage ends its log with
"seed wall_s N"). Exit 1 when a cell's spread exceeds --limit.

h5py only (bench/cube_cells.py's reader), so it runs on the GPU machine too.
"""

import argparse
import math
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from cube_cells import cudnn_cells  # noqa: E402

CACHE_USE = re.compile(r"algo_cache=\S*?\(hits=(\d+),misses=(\d+)\)")
WALL = re.compile(r"^seed wall_s (\d+(?:\.\d+)?)", re.MULTILINE)
# The SM clock while the cell's measured search ran (a cudnn cell that searched): min..mean [MHz].
SEARCH_CLOCK = re.compile(r" ?search_sm_clock=(\d+)\.\.(\d+)MHz\([^)]*\)")
# What the Graph API's set-up cost the process (graphs created, plans built, runtime-compiled builds [s]):
# a search builds every candidate, a replay only its choices, so it is no part of the plan.
GRAPH_API_SETUP = re.compile(r" ?graph_api_setup=[^\s;]+")
# The CUDA JIT cache the runtime-compiled builds found (its last field: default, disabled or a path).
JIT_CACHE = re.compile(r"graph_api_setup=[^\s;]*,jit_cache=([^\s;,]+)")
# Where a session's pool lies (engine.pool_spacer_mb: "pool_spacer=1024MiB(session 1 of the cell)"): no part of the plan.
POOL_SPACER = re.compile(r" ?pool_spacer=\d+MiB\([^)]*\)")
SETUP_FIELDS = re.compile(r"graph_api_setup=create:([\d.]+)s,build:(\d+)/([\d.]+)s,runtime_compiled:(\d+)/([\d.]+)s"
                          r"(?:,restored:(\d+)/([\d.]+)s,kept:(\d+))?(?:,configured:(\d+)/([\d.]+)s)?")


def plan_of(decisions):
    """The decisions without what is measured: the choice itself, comparable across runs."""
    text = GRAPH_API_SETUP.sub("", SEARCH_CLOCK.sub("", CACHE_USE.sub("", decisions)))
    text = POOL_SPACER.sub("", text)  # where the pool lies, not what runs (engine.pool_spacer_mb)
    text = re.sub(r"\{[^}]*\}", "", text)           # re-timed candidates' medians
    text = re.sub(r"\[[^\]]*\]", "", text)           # losing candidates, refusals and their times
    # Every measured time, the names beside it kept: a Graph API engine configuration
    # ("graph(eng51_k2=0_... 0.22ms<0.28ms ...)") or a cuBLASLt configuration is part of the plan.
    text = re.sub(r"\d+(\.\d+)?(e-?\d+)?ms\b", "", text)
    text = re.sub(r"\s*(<=|>=|<|>)\s*", " ", text)
    text = re.sub(r"\b(search_arena|pool|workspace)=[\d.]+ ?[KMGT]?i?B\b", "", text)  # sizes follow the plan
    return " ".join(text.split())


def clock_text(cell):
    """The cell's mean SM clock over its timed steps, T when throttled, - when not recorded."""
    clock = cell.get("mean_sm_clock_mhz", float("nan"))
    text = "-" if math.isnan(clock) else f"{clock:.0f}"
    return text + ("T" if cell.get("throttled", -1) == 1 else "")


def temperature_text(cell):
    """The hottest GPU temperature sampled over the cell's timed steps [C]; - when not recorded."""
    temperature = cell.get("max_temperature_c", float("nan"))
    return "-" if math.isnan(temperature) else f"{temperature:.0f}"


def sessions_text(cell):
    """max/min of the cell's repetitions' medians within one cube (--repetitions); - where measured once."""
    medians = cell.get("repetition_medians_ms", [])
    return f"{max(medians) / min(medians):.3f}" if len(medians) > 1 else "-"


def search_clock_text(decisions):
    """The SM clock while the cell searched, min..mean [MHz]; - where it did not search (or did not say)."""
    found = SEARCH_CLOCK.search(decisions)
    return f"{found.group(1)}..{found.group(2)}" if found else "-"


def graph_api_setup_totals(decisions):
    """The cells' Graph API set-up summed (cudnn's graph_api_setup token): create [s], plans built, their [s],
    the runtime-compiled (NVRTC) ones and their [s], plans restored, their [s], plans kept, graphs created
    from their cached configuration (engine.graph_from_cache) and their [s]; None where no cell says it (a CPU
    cube, a build before the token)."""
    totals, found = [0.0, 0, 0.0, 0, 0.0, 0, 0.0, 0, 0, 0.0], False
    kinds = (float, int, float, int, float, int, float, int, int, float)
    for text in decisions:
        match = SETUP_FIELDS.search(text)
        if not match:
            continue
        found = True
        for i, (kind, value) in enumerate(zip(kinds, match.groups())):
            totals[i] += kind(value) if value is not None else 0
    return totals if found else None


def setup_text(totals):
    create_s, built, build_s, runtime, runtime_s, restored, restore_s, kept, configured, configure_s = totals
    return (f"Graph API set-up: create {create_s:.1f} s, {built} plans built in {build_s:.1f} s (runtime-compiled "
            f"{runtime} in {runtime_s:.1f} s), {restored} restored in {restore_s:.2f} s, {kept} kept"
            + (f", {configured} graphs created from their cached configuration in {configure_s:.2f} s"
               if configured else ""))


def spread_table(cubes, limit, engine="cudnn"):
    cells = [cudnn_cells(path, engine) for path in cubes]
    common = sorted(set.intersection(*(set(c) for c in cells)))
    rows, worst = [], 1.0
    for key in common:
        medians = [c[key]["median_ms"] for c in cells]
        ratio = max(medians) / min(medians)
        worst = max(worst, ratio)
        same_plan = len({plan_of(c[key]["decisions"]) for c in cells}) == 1
        uses = [CACHE_USE.search(c[key]["decisions"]) for c in cells]
        cache = " ".join(f"{u.group(1)}/{u.group(2)}" if u else "-" for u in uses)
        clocks = " ".join(clock_text(c[key]) for c in cells)
        search_clocks = " ".join(search_clock_text(c[key]["decisions"]) for c in cells)
        temperatures = " ".join(temperature_text(c[key]) for c in cells)
        sessions = " ".join(sessions_text(c[key]) for c in cells)
        rows.append((key, medians, ratio, same_plan, cache, clocks, search_clocks, temperatures, sessions))
    print(f"{'network':10} {'precision':9} {'phase':9} {'batch':>5}  "
          + "  ".join(f"{'cube' + str(i + 1):>8}" for i in range(len(cubes)))
          + f"  {'max/min':>7}  {'last/1st':>8}  plan  cache hits/misses  SM clock [MHz]  search SM clock [MHz]  max temp [C]"
          + "  sessions max/min")
    for (network, precision, phase, batch), medians, ratio, same_plan, cache, clocks, search_clocks, temperatures, \
            sessions in rows:
        flag = "" if ratio <= limit else "  <-- over " + str(limit)
        print(f"{network:10} {precision:9} {phase:9} {batch:5}  " + "  ".join(f"{m:8.3f}" for m in medians)
              + f"  {ratio:7.4f}  {medians[-1] / medians[0]:8.4f}  {'same' if same_plan else 'DIFF':4}  {cache}"
              + f"  {clocks}  {search_clocks}  {temperatures}  {sessions}{flag}")
    over = sum(1 for r in rows if r[2] > limit)
    if rows:  # e.g. cube1 = --layout nchw, cube2 = --layout nhwc: below 1, the last is faster
        geomean = math.exp(sum(math.log(r[1][-1] / r[1][0]) for r in rows) / len(rows))
        print(f"\ngeometric mean of last/first cube's medians: {geomean:.4f}")
    print(f"\n{len(rows)} cells in all {len(cubes)} cubes; worst max/min {worst:.4f}; "
          f"{over} over {limit}; {sum(1 for r in rows if not r[3])} with different plans")
    # What each process's Graph API graphs cost it (the headline sessions' decisions): where the warm wall goes.
    for i, c in enumerate(cells):
        totals = graph_api_setup_totals(cell["decisions"] for cell in c.values())
        if totals is not None:
            caches = sorted({m.group(1) for cell in c.values() for m in [JIT_CACHE.search(cell["decisions"])] if m})
            print(f"cube{i + 1}: {setup_text(totals)}" + (f" (CUDA JIT cache: {', '.join(caches)})" if caches else ""))
    missing = set.union(*(set(c) for c in cells)) - set(common)
    if missing:
        print(f"{len(missing)} cells not measured in every cube: "
              + ", ".join("/".join(map(str, k)) for k in sorted(missing)))
    return over


def wall_times(logs):
    for log in logs:
        found = WALL.findall(pathlib.Path(log).read_text(errors="replace"))
        print(f"{log}: " + (f"{float(found[-1]):.0f} s wall" if found else "no 'seed wall_s' line"))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cubes", nargs="*", help="cubes of the same cells from separate processes")
    parser.add_argument("--logs", nargs="*", default=[], help="seed stage logs: their wall times")
    parser.add_argument("--limit", type=float, default=1.02, help="max/min of the medians allowed per cell")
    parser.add_argument("--engine", default="cudnn", help="the engine whose cells are compared")
    args = parser.parse_args()
    if args.logs:
        wall_times(args.logs)
    if len(args.cubes) >= 2:
        return 1 if spread_table(args.cubes, args.limit, args.engine) else 0
    if args.cubes:
        parser.error("give at least two cubes to compare")
    return 0


if __name__ == "__main__":
    sys.exit(main())
