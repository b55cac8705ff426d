"""Command line: python3 -m crossbench_analysis <command> ... (see --help)."""

from __future__ import annotations

import argparse
import errno
import sys
from pathlib import Path

from .cube import CELL_DIMS, CubeError, FLOAT_VARS, load

EXIT_ERROR = 2  # bad input: the user can fix it
EXIT_FAILURE = 1  # the system failed a write (full, read-only or failing disk): retry once fixed
STORAGE_FAILURES = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO}


def _refuse_overwrite(a, *paths) -> None:
    """No silent overwrite: an existing output file is replaced only with --force."""
    for path in paths:
        if path and Path(path).is_dir():  # --force would not help: a directory is never replaced
            raise CubeError(f"'{path}' is a directory; give a file name for the output")
    if getattr(a, "force", False):
        return
    for path in paths:
        if path and Path(path).exists():
            raise CubeError(f"'{path}' exists; replace it with --force or choose another output")


def _report(a) -> int:
    from .peaks import PeakTable
    from .report import write_report
    _refuse_overwrite(a, Path(a.output) / "report.md", Path(a.output) / "report.html")
    cube = load(a.cube)
    peaks = PeakTable.read(a.peaks) if a.peaks else None
    md, html, figs = write_report(cube, a.output, baseline=a.baseline, batch=a.batch, peaks=peaks,
                                  baseline_engine=a.baseline_engine, scaling_threshold=a.scaling_threshold)
    print(f"wrote {md}, {html} and {len(figs)} figure(s), each as PNG and SVG, in {Path(a.output) / 'figures'}")
    return 0


def _procurement(a) -> int:
    from . import procurement as p
    _refuse_overwrite(a, *(Path(a.output) / name for name in ("procurement.md", "procurement.csv", "pareto.png", "pareto.svg")))
    cube = load(a.cube)
    prices = p.read_prices(a.prices, cube.devices)
    t, workload = p.procurement(cube, prices, network=a.network, phase=a.phase, precision=a.precision,
                                batch=a.batch, engine=a.engine, all_precisions=a.all_precisions,
                                kwh_price=a.kwh_price, years=a.years)
    print(p.render(t, workload, a.currency))
    files = p.write(t, workload, a.currency, a.output)
    print(f"\nwrote {', '.join(map(str, files))}")
    return 0


def _compare(a) -> int:
    from . import compare as c
    try:
        threshold = c.parse_threshold(a.fail_above)
    except ValueError as e:
        raise CubeError(str(e)) from None
    _refuse_overwrite(a, a.csv, a.markdown)
    old, new = load(a.old), load(a.new)
    table = c.compare(old, new, threshold)
    text = c.render(table, threshold, c.provenance_warnings(old, new))
    print(text)
    # A gate fed the wrong file must not pass: with no cell attempted in both cubes nothing was compared.
    common = c.common_cells(table)
    if common == 0:
        raise CubeError(f"no cell is attempted in both '{a.old}' and '{a.new}' (devices OLD: "
                        f"{', '.join(old.devices) or 'none'}; NEW: {', '.join(new.devices) or 'none'}): "
                        "nothing was compared")
    if a.csv:
        table.to_csv(a.csv, index=False)
    if a.markdown:
        Path(a.markdown).write_text(text + "\n")
    regressions = int(table["regression"].sum())
    if regressions:
        print(f"\nFAIL: {regressions} regression(s) beyond {threshold:g}%", file=sys.stderr)
        return 1
    return 0


def _scaling(a) -> int:
    _refuse_overwrite(a, a.csv, a.markdown)
    from . import analysis as an
    cube = load(a.cube)
    table = an.scaling_table(cube.cells, a.threshold)
    if a.device:
        table = table[table["device"] == cube.resolve_device(a.device)]
    text = render_scaling(cube, table, a.threshold)
    print(text)
    if a.csv:
        table.to_csv(a.csv, index=False, float_format="%.9g")
    if a.markdown:
        Path(a.markdown).write_text(text + "\n")
    return 0


def render_scaling(cube, table, threshold: float) -> str:
    """The scaling table as Markdown, with a summary line (or why there is none)."""
    import math
    if not any(g > 1 for g in cube.gpus):
        return (f"{cube.path}: no data-parallel cells (schema {cube.schema}, gpus axis "
                f"{', '.join(map(str, cube.gpus))}): nothing to scale")
    if table.empty:
        return f"{cube.path}: no data-parallel training cell was attempted (gpus > 1 training cells are not run)"
    ok = table[table["status"] == "ok"]
    lines = [f"{len(table)} data-parallel training cell(s): {len(ok)} ok, "
             f"{int(table['below_threshold'].sum())} below {threshold:g} scaling efficiency", ""]

    def num(v, spec):
        if not (isinstance(v, float) and math.isfinite(v)):
            return ""
        return f"{v:.0f}" if spec == ".4g" and abs(v) >= 1e4 else format(v, spec)
    head = ["device", "engine", "network", "precision", "batch", "gpus", "status", "step ms", "images/s",
            "images/s gpus=1", "efficiency", "exposed comm ms", "share", "note"]
    lines += ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in table.itertuples():
        row = [r.device, r.engine, r.network, r.precision, str(r.batch), str(r.gpus), r.status,
               num(r.median_ms, ".4g"), num(r.images_per_s, ".4g"), num(r.images_per_s_1gpu, ".4g"),
               num(r.scaling_efficiency, ".3f"), num(r.exposed_communication_ms, ".4g"),
               num(r.exposed_share, ".1%"), ("FLAG " if r.below_threshold else "") + r.note]
        lines.append("| " + " | ".join(x.replace("|", "\\|") for x in row) + " |")
    return "\n".join(lines)


def _agreement(a) -> int:
    _refuse_overwrite(a, a.markdown)
    from . import agreement as ag
    lines = []
    for path in a.checks:
        try:
            with open(path) as handle:
                lines += handle.readlines()
        except UnicodeDecodeError as error:
            raise CubeError(f"{path}: not text ({error})") from None
        except OSError as error:
            raise CubeError(f"{path}: {error.strerror or error}") from None
    if a.precision not in ag.BOUNDED_PRECISIONS:
        raise CubeError(f"no stated agreement bounds for {a.precision} (stated: {', '.join(ag.BOUNDED_PRECISIONS)}; "
                        "agreement.py and DESIGN.md say why each is what it is)")
    try:
        checks = ag.read_checks(lines, a.precision)
    except ValueError as error:
        raise CubeError(f"{', '.join(a.checks)}: {error}") from None
    engines = sorted({engine for _, engine in checks})
    if a.reference not in engines:
        raise CubeError(f"{', '.join(a.checks)}: no '{a.reference}' checks (engines: {', '.join(engines) or 'none'})")
    results, problems = ag.agreements(checks, a.reference, a.precision)
    text = ag.render(results, problems, a.precision)
    print(text)
    if a.markdown:
        Path(a.markdown).write_text(text + "\n")
    differing = [r for r in results if not r.agrees]
    print(f"\n{len(results)} comparison(s) against {a.reference}: {len(results) - len(differing)} agree, "
          f"{len(differing)} differ, {len(problems)} not compared")
    return 1 if differing or problems else 0


def _export(a) -> int:
    _refuse_overwrite(a, a.csv, a.samples)
    cube = load(a.cube)
    from .report import with_provenance
    df = with_provenance(cube, cube.cells)
    if a.drop_not_run:
        df = df[df["status"] != "not_run"]
    df.to_csv(a.csv, index=False, float_format="%.9g")
    print(f"wrote {len(df)} cell rows to {a.csv}")
    if a.samples:
        s = cube.ds["samples_ms"].to_dataframe().reset_index() if "samples_ms" in cube.ds else None
        if s is None:
            raise CubeError(f"{a.cube}: the cube has no samples_ms")
        s = s.dropna(subset=["samples_ms"])
        s.to_csv(a.samples, index=False, float_format="%.9g")
        print(f"wrote {len(s)} step rows to {a.samples}")
    return 0


def _info(a) -> int:
    cube = load(a.cube)
    print(f"{cube.path}: schema {cube.schema}")
    for d in CELL_DIMS:
        print(f"  {d:10s} {len(cube.ds[d]):4d}: {', '.join(map(str, cube.axis(d)))}")
    print("  status counts: " + ", ".join(f"{k} {v}" for k, v in cube.cells["status"].value_counts().items()))
    return 0


def _demo(a) -> int:
    from .synthetic import demo_cube
    _refuse_overwrite(a, a.output)
    demo_cube(a.output)
    print(f"wrote {a.output} (made-up numbers, for trying the commands)")
    return 0


def _system_desc(a) -> int:
    from . import system_desc as sd
    cube = load(a.cube)
    names = [Path(a.output) / sd.file_name(i, d) for i, d in enumerate(cube.devices)]
    _refuse_overwrite(a, *names)
    paths = sd.write(cube, a.output)
    for path, (device, desc) in zip(paths, sd.system_descriptions(cube).items()):
        missing = desc["crossbench_cannot_fill"]
        print(f"wrote {path}: {device}: {len(sd.MLPERF_REQUIRED_FIELDS) - len(missing)} of "
              f"{len(sd.MLPERF_REQUIRED_FIELDS)} MLPerf fields filled")
    if paths:
        print("not in the cube (fill them by hand; each file's crossbench_cannot_fill says why): "
              + ", ".join(missing))
    return 0


def _efficiency(text: str) -> float:
    """An efficiency threshold: a number in (0, 1], or a percentage ('90%')."""
    t = text.strip()
    try:
        v = float(t.rstrip("%")) / (100 if t.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an efficiency such as 0.9 or 90%, got {text!r}") from None
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"an efficiency threshold is in (0, 1], got {text!r}")
    return v


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="crossbench_analysis",
                                description="Turn a crossbench results cube into figures, tables and answers.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    r = sub.add_parser("report", help="report.md + self-contained report.html with the study's figures")
    r.add_argument("cube")
    r.add_argument("-o", "--output", required=True, metavar="DIR", help="directory to write into")
    r.add_argument("--baseline", metavar="DEVICE", help="baseline device for speedups (key or unique substring; "
                   "default: the device with the most ok cells)")
    r.add_argument("--baseline-engine", metavar="ENGINE", help="baseline engine on each device (default: the native "
                   "engine, cudnn or onednn)")
    r.add_argument("--batch", type=int, help="batch of the bar figures (default 64 when run, else the batch "
                   "with the most ok cells)")
    r.add_argument("--peaks", metavar="FILE", help="peak TFLOP/s table (default: the package's peaks.csv)")
    r.add_argument("--scaling-threshold", type=_efficiency, default=0.9, metavar="E",
                   help="flag data-parallel cells whose scaling efficiency is below E (default 0.9)")
    r.set_defaults(func=_report)

    q = sub.add_parser("procurement", help="images/s per price and per watt, Pareto plot")
    q.add_argument("cube")
    q.add_argument("--prices", required=True, metavar="FILE", help="CSV 'device,price[,power_w]' (analysis/README.md)")
    q.add_argument("--network", help="one network (default: geometric mean over the study's seven)")
    q.add_argument("--phase", help="inference or training (default training when measured)")
    q.add_argument("--precision", help="one precision for every device (default: each device at its best)")
    q.add_argument("--all-precisions", action="store_true", help="one row per device and precision")
    q.add_argument("--kwh-price", type=float, default=0.15, metavar="PRICE",
                   help="price of a kWh in the prices' currency, for the cost of ownership (default 0.15)")
    q.add_argument("--years", type=float, default=3.0,
                   help="years of running flat out, for the cost of ownership (default 3)")
    q.add_argument("--batch", type=int, help="default 64 when run, else the batch with the most ok cells")
    q.add_argument("--engine", help="default: each device's fastest engine per network")
    q.add_argument("--currency", default="USD", help="name of the price unit (default USD)")
    q.add_argument("-o", "--output", default="procurement", metavar="DIR",
                   help="directory for procurement.md, procurement.csv, pareto.png (default ./procurement)")
    q.set_defaults(func=_procurement)

    c = sub.add_parser("compare", help="cells that moved beyond their CIs; exit 1 on regressions")
    c.add_argument("old")
    c.add_argument("new")
    c.add_argument("--fail-above", default="5%", metavar="PCT",
                   help="fail (exit 1) on significant slowdowns larger than this (default 5%%)")
    c.add_argument("--csv", metavar="FILE", help="also write every cell's comparison as CSV")
    c.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown")
    c.set_defaults(func=_compare)

    s = sub.add_parser("scaling", help="data-parallel scaling: efficiency and exposed communication per "
                       "training cell with gpus > 1")
    s.add_argument("cube")
    s.add_argument("--threshold", type=_efficiency, default=0.9, metavar="E",
                   help="flag cells whose scaling efficiency is below E (default 0.9)")
    s.add_argument("--device", help="one device (key or unique substring)")
    s.add_argument("--csv", metavar="FILE", help="also write the table as CSV")
    s.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown")
    s.set_defaults(func=_scaling)

    g = sub.add_parser("agreement", help="engines' output checks (`crossbench check` JSON lines) against a "
                       "reference engine's; exit 1 when one differs beyond the bounds")
    g.add_argument("checks", nargs="+", metavar="CHECK.jsonl", help="`crossbench check` output (one or more files)")
    g.add_argument("--reference", default="onednn", help="the engine the others are held to (default onednn; "
                   "cudnn on a GPU)")
    g.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown")
    g.add_argument("--precision", default="fp32", help="the precision whose checks are compared (default fp32; "
                   "each engine against the reference at the same precision)")
    g.set_defaults(func=_agreement)

    e = sub.add_parser("export", help="one tidy CSV row per cell")
    e.add_argument("cube")
    e.add_argument("--csv", required=True, metavar="FILE")
    e.add_argument("--drop-not-run", action="store_true", help="leave out cells that were not attempted")
    e.add_argument("--samples", metavar="FILE", help="also write every timed step (long format CSV)")
    e.set_defaults(func=_export)

    i = sub.add_parser("info", help="axes and status counts of a cube")
    i.add_argument("cube")
    i.set_defaults(func=_info)

    y = sub.add_parser("system-desc", help="one MLPerf-style system description (JSON) per device group, "
                       "with the fields the cube can fill; the others named under crossbench_cannot_fill")
    y.add_argument("cube")
    y.add_argument("-o", "--output", default="system-desc", metavar="DIR",
                   help="directory for system_desc_d<i>_<device>.json (default ./system-desc)")
    y.set_defaults(func=_system_desc)

    m = sub.add_parser("demo-cube", help="write a cube of made-up numbers, to try the commands")
    m.add_argument("output")
    m.set_defaults(func=_demo)
    for command in (r, q, c, s, g, e, y, m):
        command.add_argument("--force", action="store_true", help="replace output files that exist")
    return p


def _glue_negative_values(argv):
    """argparse reads "-5%" after --fail-above as an option of its own ("expected one argument"):
    such a value is glued to its flag, so that the threshold's own check names it."""
    glued = []
    for argument in argv:
        if glued and glued[-1] == "--fail-above" and argument.startswith("-"):
            glued[-1] = f"--fail-above={argument}"
        else:
            glued.append(argument)
    return glued


def main(argv=None) -> int:
    args = parser().parse_args(_glue_negative_values(sys.argv[1:] if argv is None else list(argv)))
    try:
        return args.func(args)
    except CubeError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        return 0
    except OSError as e:  # a missing directory, a full disk, no permission: a message, not a traceback
        where = f"{e.filename}: " if e.filename else ""
        print(f"error: {where}{e.strerror or e}", file=sys.stderr)
        return EXIT_FAILURE if e.errno in STORAGE_FAILURES else EXIT_ERROR
