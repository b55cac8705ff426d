#!/usr/bin/env python3
"""Compile the study's next framework cells ahead, in parallel, before a device call times them.

A framework cell's own cost is mostly its compile (torch.compile 8-114 s, JAX 7-17 s on the H200,
README "plan"), paid once per cell, one cell after another, while the GPU waits. The compile
caches (`engine.compile_cache`: Inductor's FX graph, AOTAutograd and Triton caches; JAX's
persistent compilation cache) make a later compile of the same step 0.25-0.27 of cold
(torch.compile on the H200). This script fills the run's cache for the cells the timed run is
about to reach: PROCESSES crossbench processes side by side, each compiling its share of the
remaining pytorch-compile and jax cells (one timed step each, after one warm-up step), until
BUDGET seconds have passed. The timed run that follows (`bench/gpu_session.sh study`) then finds
them warm: what it times is unchanged, its untimed compile is shorter, and each cell's
`decisions` say warm or cold. The side runs' own cubes (`--out`) keep their cold compile times
(`preparation_s`) as evidence of the cold cost.

Which cells: `crossbench plan --json` of the same matrix as the resumed run plans it, that is of the
cells the journal has no result for (what `--resume` skips; planned again with their --filter, since a
series some of whose batches are done is ordered among the remaining cells), the compiling engines
only, in the plan's order (the order the run's scheduler takes them: longest estimate with empty
caches first, whatever the caches hold, each series smallest batch first under measure.oom_boundary =
stop), dealt round-robin to the processes. A process that does
not finish by the budget is stopped: whatever it compiled is in the cache already. With
--run-s (the seconds the timed run will have after the prewarm), only the compiling cells the
timed run can reach are compiled: the remaining cells of every engine in the scheduler's order,
each at the plan's estimate (a prewarmed cell's compile at WARM_COMPILE_FRACTION of it), and
those that start within REACH x run-s (the plan over-estimates the native engines' cells, which
replay an algorithm cache). The prewarm then ends when they are compiled, not at the budget:
calls 25-26 compiled 15 cells ahead where the timed run reached 5. A chosen cell whose modelled cold
compile alone exceeds the budget is named in a warning: the prewarm cannot finish it, and the timed
run, reaching it first, would spend its time compiling the rest (call 64).

With --ready-file, it writes there the --filter-style regular expression of the chosen cells a process
finished (`ok`), for the timed run's `--first`; an empty file where none finished.

usage: study_prewarm.py --journal CUBE.journal --cache DIR --out DIR [--processes 3] [--budget-s 150] [--run-s S]
                        [--ready-file FILE] -- CROSSBENCH_COMMAND... run MATRIX_ARGS...
The command after `--` is the study's own run command without its --output, --resume, cache and
measure settings (they are replaced here); `run` must appear in it.
"""
import argparse
import json
import os
import pathlib
import re
import shlex
import signal
import subprocess
import sys
import time

COMPILING = ("pytorch-compile", "jax")
# The per-cell settings of a prewarm process: one warm-up step and one timed step are enough for
# the compile (and the CUDA graph capture of reduce-overhead) to happen.
PREWARM_SETTINGS = ["--set", "measure.warmup=1", "--set", "measure.min_steps=1", "--set", "measure.max_steps=1"]
# A compile the cache holds costs this fraction of a cold one (src/cluster/cost_model.hpp,
# kWarmCompileFraction: torch.compile on the H200 0.25-0.27).
WARM_COMPILE_FRACTION = 0.25
# The timed run reaches further than the plan's estimates say: they over-estimate the native
# engines' cells (a replayed algorithm cache: 0.18 of the estimate over segments 0-5 of the study).
REACH = 1.5
REPLACED_FLAGS = ("--output", "--compile-cache", "--algo-cache", "--stop-grace-s", "--filter")
REPLACED_BARE = ("--resume", "--allow-build-change", "--allow-setting-change")


# JAX preallocates 75% of the GPU's memory per process by default: four prewarm processes with a JAX
# cell each held all but 356 MiB of the H200's 140 GiB (call 31), and the GPU tests beside them failed
# to allocate. The prewarm's cells are untimed (they fill the compile cache), so their workers
# allocate on demand; the timed run keeps JAX's default. A value the caller set is kept.
PREWARM_ENVIRONMENT = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


def prewarm_environment():
    environment = dict(os.environ)
    for name, value in PREWARM_ENVIRONMENT.items():
        environment.setdefault(name, value)
    return environment


def journal_cells(journal, counts):
    """(engine, network, precision, batch, phase) of every cell the journal holds a result for whose
    status `counts` accepts; none where the journal does not exist."""
    cells = set()
    path = pathlib.Path(journal)
    if not path.exists():
        return cells
    for line in path.read_text().splitlines()[1:]:
        try:
            record = json.loads(line.split(" ", 1)[1])
        except (IndexError, json.JSONDecodeError):
            continue  # a torn last line
        result = record.get("result")
        if result and counts(result.get("status")):
            cells.add((result["engine"], result["network"], result["precision"], int(result["batch"]),
                       result["phase"]))
    return cells


def finished_cells(journal):
    """The cells the journal holds a result for (any status but not_run: what --resume does not run again)."""
    return journal_cells(journal, lambda status: status != "not_run")


def ready_cells(cells, journals):
    """Of `cells` (in the run's order), those a prewarm process ran `ok` (its journals): their compiles are
    in the cache whole. The timed run takes them first (`crossbench run --first`), so that a cell the prewarm
    did not finish, which the run's order may put first, does not keep them waiting (call 64)."""
    ran = set()
    for journal in journals:
        ran |= journal_cells(journal, lambda status: status == "ok")
    return [key for key in cells if key in ran]


def matrix_arguments(run_arguments):
    """The run's matrix arguments without what the prewarm replaces (its output, resume, caches,
    measure settings): the flags and `--set measure.*` pairs."""
    kept = []
    i = 0
    while i < len(run_arguments):
        argument = run_arguments[i]
        if argument in REPLACED_BARE:
            i += 1
            continue
        if argument in REPLACED_FLAGS:
            i += 2
            continue
        if argument == "--set" and i + 1 < len(run_arguments) and run_arguments[i + 1].startswith("measure."):
            i += 2
            continue
        kept.append(argument)
        i += 1
    return kept


def plan_of(command, arguments):
    plan_command = command + ["plan"] + arguments + ["--json"]
    done = subprocess.run(plan_command, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(plan_command[:12])} ... exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout)


def planned_remaining(command, matrix, journal):
    """(the plan of the cells the run has still to measure, as the run plans them, the journal's finished
    cells). The run plans only the cells its journal lacks (--resume), and a series some of whose batches
    are done is ordered among those that remain: so the cells are planned a second time, as the run will,
    filtered to the remaining ones."""
    finished = finished_cells(journal)
    plan = plan_of(command, matrix)
    if finished:
        remaining = [key for key in plan_keys(plan) if key not in finished]
        if not remaining:
            return {"cells": []}, finished
        plan = plan_of(command, matrix + ["--filter", cell_filter(remaining)])  # matrix has no --filter of its own
    return plan, finished


def remaining_cells(command, matrix, journal, run_s=None):
    """The compiling cells the run has still to measure, in the run's order; with `run_s`, only
    those the timed run reaches (module docstring)."""
    plan, finished = planned_remaining(command, matrix, journal)
    return select_cells(plan, finished, run_s)


def compiles_past_the_budget(plan, keys, budget_s):
    """The chosen cells (`keys`) whose modelled cold compile alone [s] (the plan's model.cold_compile_s)
    exceeds the prewarm's budget: a prewarm cannot finish them, side by side still less, and the
    timed run, which takes them in its order, then compiles the rest of them first (call 64: two
    GoogLeNet max-autotune cells, 349 s each alone, in a 230 s prewarm; nothing was measured).
    [(key, cold_s)], in the plan's order."""
    chosen = set(keys)
    past = []
    for cell in plan["cells"]:
        key = (cell["engine"], cell["network"], cell["precision"], int(cell["batch"]), cell["phase"])
        cold_s = float(cell.get("model", {}).get("cold_compile_s") or 0.0)
        if key in chosen and cold_s > budget_s:
            past.append((key, cold_s))
    return past


def plan_keys(plan):
    return [(cell["engine"], cell["network"], cell["precision"], int(cell["batch"]), cell["phase"])
            for cell in plan["cells"]]


def select_cells(plan, finished, run_s=None):
    """From `crossbench plan --json` output: the compiling cells not in `finished`, in the plan's order,
    which is the order the run takes them (longest estimate first; with measure.oom_boundary = stop
    each series smallest batch first, so the batches a series' first oom ends are compiled last); with
    `run_s`, only those whose start, in that order over every engine's remaining cells (prewarmed
    compiles at WARM_COMPILE_FRACTION), lies within REACH x run_s."""
    remaining = []
    for cell in plan["cells"]:
        key = (cell["engine"], cell["network"], cell["precision"], int(cell["batch"]), cell["phase"])
        if not cell.get("unsupported") and key not in finished:
            remaining.append((float(cell["estimated_s"]), key, cell))
    chosen, start = [], 0.0
    for estimate, key, cell in remaining:
        compiling = key[0] in COMPILING
        if run_s is not None:
            if start > REACH * run_s:
                break
            if compiling:
                search_s = float(cell.get("model", {}).get("search_s") or 0.0)
                estimate -= search_s * (1.0 - WARM_COMPILE_FRACTION)
            start += estimate
        if compiling:
            chosen.append(key)
    return chosen


def cell_filter(keys):
    """A --filter regular expression matching exactly these cells (engine/network/precision/bB/phase/)."""
    names = [f"{re.escape(e)}/{re.escape(n)}/{re.escape(p)}/b{b}/{re.escape(ph)}/" for e, n, p, b, ph in keys]
    return "^(" + "|".join(names) + ")"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--journal", required=True, help="the study cube's journal (cells already measured)")
    parser.add_argument("--cache", required=True, help="the run's compile cache directory (engine.compile_cache)")
    parser.add_argument("--out", required=True, help="where each process writes its cube and log")
    parser.add_argument("--processes", type=int, default=3, help="crossbench processes side by side (default 3)")
    parser.add_argument("--budget-s", type=float, default=150.0, help="wall-clock budget [s] (default 150)")
    parser.add_argument("--run-s", type=float, help="the seconds the timed run has after the prewarm: compile "
                        "only the cells it reaches (default: every remaining compiling cell, until the budget)")
    parser.add_argument("--ready-file", help="write the regular expression of the cells compiled whole here, for "
                        "the timed run's --first (an empty file: none)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- CROSSBENCH_COMMAND... run MATRIX_ARGS...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if "run" not in command:
        parser.error("the command after -- must contain `run` (the study's run command)")
    if args.processes < 1 or args.budget_s <= 0 or (args.run_s is not None and args.run_s <= 0):
        parser.error("--processes must be at least 1, --budget-s and --run-s positive")
    split = command.index("run")
    crossbench, run_arguments = command[:split], command[split + 1:]
    matrix = matrix_arguments(run_arguments)
    begin = time.monotonic()
    if args.ready_file:
        pathlib.Path(args.ready_file).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.ready_file).write_text("")  # none ready until a process has run a cell ok
    try:
        plan, finished = planned_remaining(crossbench, matrix, args.journal)
        cells = select_cells(plan, finished, args.run_s)
    except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError) as error:
        print(f"prewarm: no plan, nothing compiled ahead: {error}")
        return 0
    for key, cold_s in compiles_past_the_budget(plan, cells, args.budget_s):
        print(f"prewarm: warning: {'/'.join(map(str, key))} compiles for {cold_s:.0f} s cold alone (the plan's "
              f"model), past the {args.budget_s:.0f} s budget: the timed run will compile the rest of it when it "
              "reaches it; give it a call of its own, or a longer prewarm")
    if not cells:
        print("prewarm: no compiling cell left to measure" + ("" if args.run_s is None else
                                                               f" within the timed run's reach ({args.run_s:.0f} s)"))
        return 0
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shares = [cells[k::args.processes] for k in range(args.processes)]
    processes = []
    for k, share in enumerate(shares):
        if not share:
            continue
        log = open(out / f"prewarm_{k}.log", "w")
        process_command = crossbench + ["run"] + matrix + PREWARM_SETTINGS + [
            "--filter", cell_filter(share), "--compile-cache", args.cache, "--stop-grace-s", "1",
            "--output", str(out / f"prewarm_{k}.h5")]
        log.write(shlex.join(process_command) + "\n")
        log.write("environment: " + " ".join(f"{name}={value}" for name, value in PREWARM_ENVIRONMENT.items()) + "\n")
        log.flush()
        # A session (process group) of its own: its workers go with it at the end, whatever happens.
        processes.append((k, share, log, subprocess.Popen(process_command, stdout=log, stderr=subprocess.STDOUT,
                                                          env=prewarm_environment(), start_new_session=True)))
    reach = "" if args.run_s is None else f" within the timed run's reach ({args.run_s:.0f} s)"
    print(f"prewarm: {len(cells)} compiling cells left{reach}; {len(processes)} processes, {args.budget_s:.0f} s; first: "
          + ", ".join("/".join(map(str, key)) for key in cells[:len(processes)]))
    stopped = 0
    for k, share, log, process in processes:
        remaining = max(0.0, args.budget_s - (time.monotonic() - begin))
        try:
            process.wait(timeout=remaining)
        except subprocess.TimeoutExpired:
            # SIGTERM: crossbench ends its running cell (its compile so far is in the cache) and exits.
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            stopped += 1
        log.close()
    # Nothing of the prewarm may run beside the timed cells: every process group goes, workers included.
    for _, _, _, process in processes:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    compiled = 0
    for k, share, _, _ in processes:
        text = (out / f"prewarm_{k}.log").read_text(errors="replace")
        compiled += len(re.findall(r"^\[\s*\d+/\d+\].* ok ", text, flags=re.M))
    print(f"prewarm: {compiled} cells compiled ahead in {time.monotonic() - begin:.0f} s "
          f"({stopped} processes stopped at the budget); cubes and logs in {out}")
    if args.ready_file:
        ready = ready_cells(cells, [out / f"prewarm_{k}.h5.journal" for k, _, _, _ in processes])
        pathlib.Path(args.ready_file).write_text(cell_filter(ready) if ready else "")
        if ready:
            print(f"prewarm: the timed run takes first the {len(ready)} cells compiled whole: "
                  + ", ".join("/".join(map(str, key)) for key in ready))
    return 0


if __name__ == "__main__":
    sys.exit(main())
