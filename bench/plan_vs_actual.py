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
                                    }
    return cells


def compare(plan, cubes, tolerance=TOLERANCE):
    """Rows (name, engine, predicted_s, actual_s, ratio, within, source, status, compile) for every
    planned cell a cube holds, and the cells the plan has that no cube holds."""
    actual = {}
    for path in cubes:
        actual.update(actual_cells(path))  # a later cube's cell replaces an earlier one's
    rows, missing = [], []
    for cell in plan["cells"]:
        if cell.get("unsupported"):
            continue
        found = actual.get(cell["name"])
        if found is None:
            missing.append(cell["name"])
            continue
        predicted = float(cell["estimated_s"])
        ratio = found["actual_s"] / predicted if predicted > 0 else math.nan
        rows.append(dict(name=cell["name"], engine=cell["engine"], predicted_s=predicted,
                         actual_s=found["actual_s"], ratio=ratio,
                         within=bool(abs(ratio - 1) <= tolerance) if ratio == ratio else False,
                         source=cell.get("estimate_source", ""), status=found["status"],
                         compile=found["compile"]))
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
    lines = [f"| cell | status | compile | source | predicted [s] | actual [s] | actual / predicted | within {tolerance:.0%} |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['status']} | {r['compile'] or '-'} | {r['source']} | {r['predicted_s']:.1f} | "
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
    args = parser.parse_args(argv)
    with open(args.plan) as handle:
        try:
            plan = json.load(handle)
        except json.JSONDecodeError as error:
            parser.error(f"{args.plan} is not the JSON of `crossbench plan --json`: {error}")
    if "cells" not in plan:
        parser.error(f"{args.plan} has no 'cells': not the JSON of `crossbench plan --json`")
    rows, missing = compare(plan, args.cubes, args.tolerance)
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
