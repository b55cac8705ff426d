#!/usr/bin/env python3
"""Issue 29 item 4's table: every framework row against its standalone loop, from the committed harness checks.

Reads every `frameworks*.json` that `bench/gpu_framework_overhead.py` wrote (`bash bench/gpu_session.sh
frameworks`) under the given folders, and prints one markdown row per cell the issue names (eager,
reduce-overhead, max-autotune and JAX on resnet50, vgg11, googlenet and alexnet, tf32 and bf16, both phases):
the pairs measured (crossbench's median / the standalone loop's median, each pair one fresh process a side),
their median, the values the standalone loop read, and the calls they came from. A cell is within the target
when the median ratio is within 3% (0.97-1.03); a cell with no pair is listed as not measured, so the table
says what remains.

Before the `--data` option (calls up to 48) the standalone PyTorch loops drew uniform random values on the
device while crossbench's workers read their synthetic ones; the tf32 step's time depends on the values (call
51: 2.3% on alexnet tf32 inference), so pairs are labelled by their values and the median prefers the pairs on
the worker's values where a cell has any. Pairs whose file does not name the standalone loop's clock
(`standalone_timing`: CUDA events for PyTorch, queued steps for JAX, since calls 39 and 44) came from an earlier
harness, whose clocks differed from the workers' (issue 26); they are shown apart and not counted.

The last column names the GPUs of the pairs counted: the pair's own `gpu` field where the file has one, else
the `gpu.txt` (`nvidia-smi -L`) nearest above it within the root, else "?". Pairs from different cards
are not told apart in the median: the ratio compares two loops on one card, but a reader must know which.

  python3 bench/harness_table.py bench/results [--markdown out.md]
"""
import argparse
import json
import pathlib
import statistics
import sys

VARIANTS = ("eager", "reduce-overhead", "max-autotune", "jax")
NETWORKS = ("resnet50", "vgg11", "googlenet", "alexnet")
PRECISIONS = ("tf32", "bf16")
PHASES = ("inference", "training")
TOLERANCE = 0.03  # issue 29 item 4: within 3%


def call_of(path):
    """The folder naming the call (call39, call48/a -> call48/a), relative to the results root."""
    parts = path.parts
    for i, part in enumerate(parts):
        if part.startswith("call"):
            return "/".join(parts[i - 1:-1])  # date/callNN[/sub]
    return "/".join(parts[-3:-1])


def values_of(row):
    """The values the standalone loop read: the worker's (synthetic) or its own (random)."""
    data = row.get("standalone_data")
    if data is None:
        return "random" if row.get("variant") != "jax" else "worker's"  # JAX's loop always fed the worker's arrays
    return "worker's" if data == "synthetic" else data


def card_of(name):
    """The card's short name in an `nvidia-smi -L` line or a device name: "H200", "H100", or the name itself."""
    for card in ("H200", "H100", "A100", "L40S", "V100"):
        if card in name:
            return card
    return name.strip() or "?"


def gpu_of(path, root, row):
    """The GPU a pair ran on: its row's `gpu`, else the nearest gpu.txt above its file within `root`."""
    if row.get("gpu"):
        return card_of(row["gpu"])
    root = pathlib.Path(root).resolve()
    folder = path.resolve().parent
    while True:
        listing = folder / "gpu.txt"
        if listing.is_file():
            lines = [line for line in listing.read_text().splitlines() if line.startswith("GPU ")]
            return card_of(lines[0].split(":", 1)[1].split("(UUID")[0]) if lines else "?"
        if folder == root or root not in folder.parents:
            return "?"
        folder = folder.parent


def read_pairs(roots):
    """Every finished pair: (variant, network, precision, phase) -> [(ratio, values, call)], those of the
    current harness and those of the earlier one apart."""
    pairs, earlier = {}, {}
    for root in roots:
        for path in sorted(pathlib.Path(root).rglob("frameworks*.json")):
            try:
                rows = json.loads(path.read_text())
            except (OSError, json.JSONDecodeError) as error:
                raise SystemExit(f"harness_table: {path}: not a frameworks.json ({error})")
            if not isinstance(rows, list):
                raise SystemExit(f"harness_table: {path}: expected a list of pairs")
            for row in rows:
                crossbench, standalone = row.get("crossbench_ms"), row.get("standalone_ms")
                if row.get("standalone_status", "ok") != "ok" or not crossbench or not standalone:
                    continue
                key = (row["variant"], row["network"], row["precision"], row["phase"])
                current = bool(row.get("standalone_timing"))
                (pairs if current else earlier).setdefault(key, []).append(
                    (crossbench / standalone, values_of(row), call_of(path), gpu_of(path, root, row)))
    return pairs, earlier


def cell_summary(found):
    """The median ratio of a cell's pairs, on the worker's values where it has any; the values it used."""
    own = [p for p in found if p[1] == "worker's"]
    used = own or found
    return (statistics.median(p[0] for p in used), ("worker's" if own else used[0][1]), len(used),
            ", ".join(sorted({p[3] for p in used})))


def table(pairs, earlier):
    lines = ["| variant | network | precision | phase | pairs | median crossbench / standalone | values | within 3% | calls "
             "| earlier harness (not counted) | GPU |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    measured = within = 0
    for variant in VARIANTS:
        for network in NETWORKS:
            for precision in PRECISIONS:
                for phase in PHASES:
                    found = pairs.get((variant, network, precision, phase), [])
                    old = " ".join(f"{p[0]:.3f}" for p in earlier.get((variant, network, precision, phase), []))
                    if not found:
                        lines.append(f"| {variant} | {network} | {precision} | {phase} | 0 | not measured | | | | {old} | |")
                        continue
                    median, values, used, gpus = cell_summary(found)
                    ok = abs(median - 1.0) <= TOLERANCE
                    measured += 1
                    within += ok
                    ratios = " ".join(f"{p[0]:.3f}" for p in found)
                    calls = ", ".join(sorted({p[2] for p in found}))
                    lines.append(f"| {variant} | {network} | {precision} | {phase} | {len(found)} ({ratios}) | "
                                 f"{median:.3f} (of {used}) | {values} | {'yes' if ok else '**no**'} | {calls} | {old} | {gpus} |")
    total = len(VARIANTS) * len(NETWORKS) * len(PRECISIONS) * len(PHASES)
    lines.append("")
    lines.append(f"{measured} of {total} cells measured, {within} of them within 3%; {total - measured} not measured.")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("roots", nargs="+", help="folders searched for frameworks*.json (e.g. bench/results)")
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parser.parse_args(argv)
    for root in args.roots:
        if not pathlib.Path(root).is_dir():
            parser.error(f"{root}: no such folder")
    text = table(*read_pairs(args.roots))
    print(text)
    if args.markdown:
        pathlib.Path(args.markdown).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
