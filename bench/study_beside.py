#!/usr/bin/env python3
"""Issue 24's comparison out of issue 29's study: every framework cell against cudnn measured beside it.

The study cube (bench/gpu_session.sh `study`) is filled over several device calls, one run segment per
call, each call on whichever H200 it lands on. A ratio of a framework cell to a cudnn cell is only worth
quoting when both were measured on the same GPU in the same call, so after each call's segment the
stage re-measures, with the warm algorithm cache (seconds a cell), the cudnn cells of the (network,
precision, phase) whose framework cells that segment finished: `beside_s<N>.h5`, N the study's segment.

  filter  JOURNAL        the --filter regex of those cudnn cells for the journal's last segment, and
                         that segment's number (two lines); nothing where the segment finished no
                         framework cell. Reads the journal's JSON lines alone (the GPU machine's
                         python has no h5py).
  table   STUDY.h5 [--beside beside_s*.h5] [--extra NAME=CUBE.h5 ...]
                         per (network, precision, phase): each framework's median [ms] (the study's
                         pytorch, pytorch-compile, jax; --extra adds e.g. max-autotune cubes (a NAME
                         given again adds that cube's cells to the same column), each
                         cell against CUBE_beside_s<N>.h5 next to it where the stage measured one
                         (STUDY_NAME), else the cube's own cudnn cells), the cudnn median measured beside it, best
                         framework / cudnn (> 1: cudnn faster; each framework against the cudnn
                         cell of its own call, the best the lowest ratio), and over the cells: how many, the
                         geometric mean, the minimum and how many cudnn wins. A framework cell
                         with no cudnn cell from its own segment is listed without a ratio.
"""
import argparse
import json
import math
import pathlib
import re
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
FRAMEWORKS = ("pytorch", "pytorch-compile", "jax")
CELL = ("network", "precision", "phase")


def journal_records(path):
    """The journal's records after its header line ("<checksum> <json>" each)."""
    records = []
    for line in pathlib.Path(path).read_text().splitlines()[1:]:
        try:
            records.append(json.loads(line.split(" ", 1)[1]))
        except (IndexError, json.JSONDecodeError):
            continue  # a torn last line: crossbench drops it too, with a warning
    return records


def last_segment_cells(path):
    """(segment, sorted (network, precision, phase, batch) of the framework cells it finished ok)."""
    records = journal_records(path)
    segment = sum(1 for r in records if r.get("type") == "segment") - 1
    cells = set()
    for r in records:
        result = r.get("result")
        if (result and result.get("segment") == segment and result.get("status") == "ok"
                and result.get("engine") in FRAMEWORKS):
            cells.add((result["network"], result["precision"], result["phase"], int(result["batch"])))
    return segment, sorted(cells)


def cudnn_filter(cells):
    """--filter for the cudnn cells of `cells`: names are engine/network/precision/bBATCH/phase/rREPLICA."""
    alternatives = "|".join(f"{n}/{p}/b{b}/{ph}" for n, p, ph, b in cells)
    return f"^cudnn/({alternatives})/"


def command_filter(args):
    segment, cells = last_segment_cells(args.journal)
    if cells:
        print(cudnn_filter(cells))
        print(segment)
    return 0


def ok_rows(path):
    """The ok cells of a cube as dicts (engine, network, precision, phase, segment, median_ms)."""
    sys.path.insert(0, str(REPO / "analysis"))
    from crossbench_analysis.cube import load

    cells = load(path).cells
    cells = cells[cells["status"] == "ok"]
    return [dict(engine=r.engine, network=r.network, precision=r.precision, phase=r.phase, segment=int(r.segment),
                 median_ms=float(r.median_ms)) for r in cells.itertuples()]


def pair_cells(study, beside, extras=()):
    """Per (network, precision, phase): each framework's median [ms] and the best framework against the
    cudnn cell of its own call. `study`: the study cube's ok rows; `beside`: {(segment, network,
    precision, phase): cudnn median [ms]} of the beside_s<segment> cubes; `extras`: (name, rows) of
    cubes with their own cudnn cells (e.g. max-autotune runs). Returns (columns, rows): rows map the
    cell to {engine: ms, "ratio": {engine: engine / its cudnn}, "cudnn": {engine: its cudnn}}."""
    columns = list(FRAMEWORKS)
    table = {}
    for row in study:
        if row["engine"] not in FRAMEWORKS:
            continue
        key = (row["network"], row["precision"], row["phase"])
        entry = table.setdefault(key, {"ratio": {}, "cudnn": {}})
        entry[row["engine"]] = row["median_ms"]
        cudnn = beside.get((row["segment"], *key))
        if cudnn is not None:
            entry["cudnn"][row["engine"]] = cudnn
            entry["ratio"][row["engine"]] = row["median_ms"] / cudnn
    for extra in extras:
        name, rows = extra[0], extra[1]
        extra_beside = extra[2] if len(extra) > 2 else {}
        if name not in columns:  # one name given twice (two cubes of one mode, e.g. one per phase): one column
            columns.append(name)
        cudnn_of = {(r["network"], r["precision"], r["phase"]): r["median_ms"] for r in rows if r["engine"] == "cudnn"}
        for row in rows:
            if row["engine"] == "cudnn":
                continue
            key = (row["network"], row["precision"], row["phase"])
            entry = table.setdefault(key, {"ratio": {}, "cudnn": {}})
            entry[name] = row["median_ms"]
            # Its own call's cudnn cell where the stage measured one beside it, else the cube's own.
            cudnn = extra_beside.get((row["segment"], *key), cudnn_of.get(key))
            if cudnn is not None:
                entry["cudnn"][name] = cudnn
                entry["ratio"][name] = row["median_ms"] / cudnn
    return columns, table


def summary(table):
    """(cells with a ratio, geometric mean, minimum, cudnn at least as fast) of each cell's best ratio (the
    framework nearest cudnn, or beyond it)."""
    best = [min(entry["ratio"].values()) for entry in table.values() if entry["ratio"]]
    if not best:
        return 0, None, None, 0
    geomean = math.exp(sum(math.log(r) for r in best) / len(best))
    return len(best), geomean, min(best), sum(1 for r in best if r >= 1.0)


def beside_medians(paths):
    """{(segment, network, precision, phase): cudnn median [ms]} of beside cubes named
    [NAME_]beside_s<N>.h5 (N: the segment of the cube they were measured beside)."""
    beside = {}
    for path in paths:
        found = re.fullmatch(r"(?:.+_)?beside_s(\d+)", pathlib.Path(path).stem)
        if not found:
            raise SystemExit(f"study_beside: {path}: expected a name [NAME_]beside_s<N>.h5 (N: the study's segment)")
        segment = int(found.group(1))
        for row in ok_rows(path):
            if row["engine"] == "cudnn":
                beside[(segment, row["network"], row["precision"], row["phase"])] = row["median_ms"]
    return beside


def command_table(args):
    beside = beside_medians(args.beside)
    extras = []
    for item in args.extra:
        name, _, path = item.partition("=")
        if not path:
            raise SystemExit(f"study_beside: --extra {item}: expected NAME=CUBE.h5")
        cube = pathlib.Path(path)
        # The stage's cudnn cells beside that cube's segments (bench/gpu_session.sh, STUDY_NAME): CUBE_beside_s<N>.h5.
        extras.append((name, ok_rows(path), beside_medians(sorted(cube.parent.glob(f"{cube.stem}_beside_s*.h5")))))
    columns, table = pair_cells(ok_rows(args.study), beside, extras)
    print("| network | precision | phase | " + " | ".join(columns) + " | best | its cudnn beside it | best ÷ cudnn |")
    print("|---|---|---|" + "---|" * len(columns) + "---|---|---|")
    for key in sorted(table):
        entry = table[key]
        measured = " | ".join(f"{entry[e]:.3f}" if e in entry else "–" for e in columns)
        if entry["ratio"]:
            best = min(entry["ratio"], key=entry["ratio"].get)
            tail = f"{best} | {entry['cudnn'][best]:.3f} | **{entry['ratio'][best]:.3f}**"
        else:
            best = min((e for e in columns if e in entry), key=lambda e: entry[e])
            tail = f"{best} | – (none beside it) | –"
        print(f"| {' | '.join(key)} | {measured} | {tail} |")
    cells, geomean, lowest, wins = summary(table)
    if cells:
        print(f"\n{cells} cells with cudnn beside the best framework: geometric mean {geomean:.3f}, "
              f"minimum {lowest:.3f}, cudnn at least as fast in {wins}")
    else:
        print("\nno framework cell has a cudnn cell measured beside it")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    filter_parser = commands.add_parser("filter", help="the cudnn --filter for the journal's last segment")
    filter_parser.add_argument("journal")
    table_parser = commands.add_parser("table", help="framework cells against cudnn beside them")
    table_parser.add_argument("study")
    table_parser.add_argument("--beside", nargs="*", default=[])
    table_parser.add_argument("--extra", action="append", default=[])
    args = parser.parse_args(argv)
    return command_filter(args) if args.command == "filter" else command_table(args)


if __name__ == "__main__":
    sys.exit(main())
