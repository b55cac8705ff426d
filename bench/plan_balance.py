#!/usr/bin/env python3
"""How well does the planner balance the matrix over ranks?

1. For jobs/seed2017.ini and jobs/batch-sweep.ini on 2, 4 and 8 ranks:
   predicted makespan ÷ ideal (total estimated cost ÷ ranks), from
   `crossbench plan --ranks N` (no MPI needed). Target: within 5% of ideal
   for seed2017 on 4 ranks.
2. On this machine, a real 4-rank CPU run of jobs/quick.ini under mpirun:
   measured makespan (wall time of the run) ÷ the plan's predicted makespan,
   which says how good the cost model's absolute estimates are here.

Usage: /usr/bin/python3 bench/plan_balance.py [--build build] [--skip-run]
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]


def plan_figures(binary, job, ranks, device_json=None):
    command = [binary, "plan", "--job", str(REPO / "jobs" / job), "--ranks", str(ranks)]
    if device_json:
        command += ["--device-json", str(device_json)]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    match = re.search(r"total estimated ([\d.]+) s; predicted makespan ([\d.]+) s .*; ideal ([\d.]+) s", out)
    total, makespan, ideal = map(float, match.groups())
    return total, makespan, ideal


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default=str(REPO / "build"))
    parser.add_argument("--skip-run", action="store_true", help="only the plans, no 4-rank run")
    args = parser.parse_args()
    binary = str(pathlib.Path(args.build) / "crossbench")

    print(f"{'devices':<10} {'job':<16} {'ranks':>5} {'total [s]':>12} {'makespan [s]':>13} {'ideal [s]':>10} {'makespan/ideal':>15}")
    for label, device_json in [("this CPU", None), ("H200", REPO / "bench" / "devices" / "h200.json")]:
        for job in ["seed2017.ini", "batch-sweep.ini"]:
            for ranks in [2, 4, 8]:
                total, makespan, ideal = plan_figures(binary, job, ranks, device_json)
                ratio = f"{makespan / ideal:>15.3f}" if ideal > 0 else f"{'n/a':>15}"  # no engine of this build runs there
                print(f"{label:<10} {job:<16} {ranks:>5} {total:>12.1f} {makespan:>13.1f} {ideal:>10.1f} {ratio}")

    if args.skip_run:
        return 0
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    launch = ["mpirun", "--oversubscribe", "-np", "4", binary]
    plan = subprocess.run(launch + ["plan", "--job", str(REPO / "jobs" / "quick.ini")], env=env,
                          capture_output=True, text=True, check=True).stdout
    predicted = float(re.search(r"predicted makespan ([\d.]+) s", plan).group(1))
    with tempfile.TemporaryDirectory() as scratch:
        start = time.perf_counter()
        subprocess.run(launch + ["run", "--job", str(REPO / "jobs" / "quick.ini"), "--output",
                                 f"{scratch}/quick.h5", "--quiet"], env=env, check=True, capture_output=True)
        measured = time.perf_counter() - start
    print(f"\njobs/quick.ini on 4 ranks here: measured makespan {measured:.1f} s, predicted {predicted:.1f} s, "
          f"measured/predicted {measured / predicted:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
