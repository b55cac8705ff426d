"""What `crossbench plan` predicted for each cell against the wall time the cell took (issue 29 item 5).

    crossbench plan ... --json > plan.json            (on the GPU machine, or here with
                                                       --ranks 1 --device-json DEVICE.json)
    python3 bench/plan_vs_actual.py plan.json CUBE.h5 [CUBE.h5 ...] [--markdown OUT.md]

A cell's actual wall time is its `finished_utc - started_utc` in the cube (preparation, compile or
search, warm-up, timed steps, check: everything the plan's estimate covers). Every planned cell
that some cube holds with a start and an end is compared; `plan --calibrate` cubes are the usual
input of the plan, and a cube the plan was calibrated on predicts itself, so compare against the
run that came after. Prints one row per cell (predicted, actual, actual / predicted, whether within
the tolerance, the estimate's source and the cell's compile state from its decisions), then per
engine and in all: cells compared, how many within the tolerance, and the summed seconds.

--cache-as-found: the plan reads a compile cache as warm or cold for every cell of an engine (its
directory holds entries or not); a run that prewarms some cells (bench/study_prewarm.py) finds
some cells' compiles in the cache and not others'. This compares each framework cell with the
estimate for the state its compile found, from the hit counts in its decisions (pytorch-compile:
fx_graph_cache misses=0; jax: every compile a persistent-cache hit): a hit costs
warm_compile_seconds() of the plan's cold compile (a quarter, at least 4.5 s), a miss the cold one, or where the
plan expected another batch of the cell's series in the cache (`(another batch cached)`), what the plan said. --held-out leaves out the
cells whose estimate a --calibrate cube recorded (they predict themselves).

h5py, not the analysis package: like the other bench scripts it must run on the GPU machine too.
"""
import argparse
import datetime
import json
import math
import re
import sys

import h5py

TOLERANCE = 0.25  # issue 29: the plan predicts a worker cell's wall time within 25%
COMPILE_STATE = re.compile(r"compile_cache=\S+ \((warm|cold)")
TORCH_HITS = re.compile(r"fx_graph_cache hits=(\d+) misses=(\d+)")
JAX_HITS = re.compile(r"persistent cache hits=(\d+) of (\d+) compiles")
# A compile the cache holds costs this fraction of a cold one (src/cluster/cost_model.hpp, kWarmCompileFraction).
WARM_COMPILE_FRACTION = 0.25
WARM_COMPILE_FLOOR_S = 4.5  # cost_model.hpp: kWarmCompileFloorSeconds


def warm_compile_seconds(cold_s):
    """cost_model.cpp's warm_compile_seconds(): a quarter of the cold compile, at least the floor, at most cold."""
    return min(cold_s, max(WARM_COMPILE_FLOOR_S, cold_s * WARM_COMPILE_FRACTION))



def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def _utc(text):
    """An ISO 8601 UTC time as the cube writes it ("2026-12-02T14:45:42.254Z"), or None."""
    text = _text(text).strip()
    if not text:
        return None
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def cell_name(engine, network, precision, batch, phase, replica):
    """The plan's name of a single-device cell (engine/network/precision/b<batch>/phase/r<replica>)."""
    return f"{engine}/{network}/{precision}/b{batch}/{phase}/r{replica}"


def compile_state(decisions):
    """"warm" / "cold" as a framework cell's decisions say of its compile cache
    ("compile_cache=DIR (warm: ..." / "(cold: ..."), "" where they say neither (a native engine)."""
    found = COMPILE_STATE.search(decisions)
    return found.group(1) if found else ""


def compile_found(decisions):
    """"hit" where the cell's compile came from the cache (pytorch-compile: FX graph cache hits and no
    miss; jax: every compile a persistent-cache hit), "miss" where it compiled, "" where the decisions
    count neither (a native engine, an older worker)."""
    torch = TORCH_HITS.search(decisions)
    if torch:
        hits, misses = int(torch.group(1)), int(torch.group(2))
        return "hit" if hits > 0 and misses == 0 else "miss"
    jax = JAX_HITS.search(decisions)
    if jax:
        hits, compiles = int(jax.group(1)), int(jax.group(2))
        return "hit" if compiles > 0 and hits == compiles else "miss"
    return ""


def as_found(cell, found):
    """The plan's estimate of `cell` [s] for the compile state the run found ("hit" / "miss"): its
    compile (model search_s, scaled as the estimate is) at warm_compile_seconds() of cold on a hit."""
    estimate = float(cell["estimated_s"])
    model = cell.get("model") or {}
    search_s = float(model.get("search_s") or 0.0)
    kind = cell.get("search_kind", "")
    planned_series = "(another batch cached)" in kind  # plans from 2026-12-04 on: cold_compile_s said
    if not found or search_s <= 0 or not ("(cold)" in kind or "(warm cache)" in kind or planned_series):
        return estimate
    total = sum(float(model.get(k) or 0.0) for k in ("preparation_s", "search_s", "steps_s", "finish_s"))
    scale = estimate / total if total > 0 else 1.0
    planned_warm = "(warm cache)" in kind
    cold_s = float(model.get("cold_compile_s") or 0.0)  # plans from 2026-12-03 on say it
    if cold_s <= 0:
        cold_s = search_s / WARM_COMPILE_FRACTION if planned_warm else search_s
    # A miss compiles what the plan expected of a cold cache: cold, or cheaper where an earlier batch of the
    # cell's series filled it (the plan's own estimate then).
    miss_s = search_s if planned_series else cold_s
    found_s = warm_compile_seconds(cold_s) if found == "hit" else miss_s
    return estimate + (found_s - search_s) * scale


def actual_cells(path):
    """{plan name: {"actual_s", "status", "compile"}} for every single-device cell of the cube that
    has a start and an end time."""
    cells = {}
    with h5py.File(path, "r") as cube:
        names = {d: [_text(v) for v in cube[d][()]]
                 for d in ("engine", "network", "precision", "batch", "phase", "replica")}
        gpus = [int(g) for g in cube["gpus"][()]] if "gpus" in cube else [1]
        if 1 not in gpus:
            return cells
        single = gpus.index(1)
        started, finished = cube["started_utc"][()], cube["finished_utc"][()]
        status = cube["status"][()]
        status_names = {value: name for name, value in (h5py.check_enum_dtype(cube["status"].dtype) or {}).items()}
        decisions = cube["decisions"][()] if "decisions" in cube else None
        for device in range(started.shape[0]):
            for e, engine in enumerate(names["engine"]):
                for n, network in enumerate(names["network"]):
                    for p, precision in enumerate(names["precision"]):
                        for b, batch in enumerate(names["batch"]):
                            for ph, phase in enumerate(names["phase"]):
                                for r, replica in enumerate(names["replica"]):
                                    at = (device, e, n, p, b, ph, single, r)
                                    begin, end = _utc(started[at]), _utc(finished[at])
                                    if begin is None or end is None:
                                        continue
                                    text = _text(decisions[at]) if decisions is not None else ""
                                    cells[cell_name(engine, network, precision, batch, phase, replica)] = {
                                        "actual_s": (end - begin).total_seconds(),
                                        "status": status_names.get(int(status[at]), str(int(status[at]))),
                                        "compile": compile_state(text),
                                        "found": compile_found(text),
                                    }
    return cells


def compare(plan, cubes, tolerance=TOLERANCE, cache_as_found=False, held_out=False):
    """Rows (name, engine, predicted_s, actual_s, ratio, within, source, status, compile, found) for every
    planned cell a cube holds, and the cells the plan has that no cube holds. `cache_as_found`: each
    cell's estimate for the compile state it found (as_found); `held_out`: no recorded estimate."""
    actual = {}
    for path in cubes:
        actual.update(actual_cells(path))  # a later cube's cell replaces an earlier one's
    rows, missing = [], []
    for cell in plan["cells"]:
        if cell.get("unsupported"):
            continue
        if held_out and cell.get("estimate_source", "").startswith("recorded"):
            continue
        found = actual.get(cell["name"])
        if found is None:
            missing.append(cell["name"])
            continue
        predicted = as_found(cell, found.get("found", "")) if cache_as_found else float(cell["estimated_s"])
        ratio = found["actual_s"] / predicted if predicted > 0 else math.nan
        rows.append(dict(name=cell["name"], engine=cell["engine"], predicted_s=predicted,
                         actual_s=found["actual_s"], ratio=ratio,
                         within=bool(abs(ratio - 1) <= tolerance) if ratio == ratio else False,
                         source=cell.get("estimate_source", ""), status=found["status"],
                         compile=found["compile"], found=found.get("found", "")))
    return rows, missing


def summary(rows):
    """{engine or "all": (cells, within, predicted_s, actual_s)}."""
    out = {}
    for key in sorted({r["engine"] for r in rows}) + ["all"]:
        chosen = [r for r in rows if key in ("all", r["engine"])]
        out[key] = (len(chosen), sum(r["within"] for r in chosen), sum(r["predicted_s"] for r in chosen),
                    sum(r["actual_s"] for r in chosen))
    return out


def markdown(rows, missing, tolerance=TOLERANCE):
    lines = [f"| cell | status | compile (cache / found) | source | predicted [s] | actual [s] | actual / predicted | within {tolerance:.0%} |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        state = "/".join(x for x in (r["compile"], r.get("found", "")) if x) or "-"
        lines.append(f"| {r['name']} | {r['status']} | {state} | {r['source']} | {r['predicted_s']:.1f} | "
                     f"{r['actual_s']:.1f} | {r['ratio']:.2f} | {'yes' if r['within'] else '**no**'} |")
    lines += ["", "| engine | cells | within | predicted [s] | actual [s] | actual / predicted |", "|---|---|---|---|---|---|"]
    for key, (count, within, predicted, actual) in summary(rows).items():
        ratio = actual / predicted if predicted > 0 else math.nan
        lines.append(f"| {key} | {count} | {within} | {predicted:.0f} | {actual:.0f} | {ratio:.2f} |")
    lines += ["", f"{len(rows)} planned cells compared; {len(missing)} planned cells in no cube."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan", help="`crossbench plan ... --json` output")
    parser.add_argument("cubes", nargs="+", help="results cubes holding the planned cells")
    parser.add_argument("--tolerance", type=float, default=TOLERANCE, help="the fraction a prediction may miss by")
    parser.add_argument("--markdown", help="also write the table here")
    parser.add_argument("--cache-as-found", action="store_true",
                        help="estimate each framework cell for the compile-cache state it found (hit or miss)")
    parser.add_argument("--held-out", action="store_true",
                        help="leave out the cells whose estimate a --calibrate cube recorded")
    args = parser.parse_args(argv)
    with open(args.plan) as handle:
        try:
            plan = json.load(handle)
        except json.JSONDecodeError as error:
            parser.error(f"{args.plan} is not the JSON of `crossbench plan --json`: {error}")
    if "cells" not in plan:
        parser.error(f"{args.plan} has no 'cells': not the JSON of `crossbench plan --json`")
    rows, missing = compare(plan, args.cubes, args.tolerance, args.cache_as_found, args.held_out)
    if not rows:
        print(f"no planned cell is in {', '.join(args.cubes)}", file=sys.stderr)
        return 2
    text = markdown(rows, missing, args.tolerance)
    print(text, end="")
    if args.markdown:
        with open(args.markdown, "w") as handle:
            handle.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
