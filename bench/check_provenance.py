"""Checks a GPU cube's provenance against what nvidia-smi says about the same
GPUs (issue 16): the full UUID, the enforced power limit, the driver, the
application clocks and ECC, and every cell's wall times. Prints each check;
exit 1 when one fails.

    python3 bench/check_provenance.py CUBE.h5
"""
import datetime
import subprocess
import sys

from crossbench_analysis import cube as cube_module


def nvidia_smi():
    fields = "uuid,power.limit,driver_version,clocks.applications.graphics,clocks.applications.memory,ecc.mode.current"
    lines = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    rows = [[value.strip() for value in line.split(",")] for line in lines]
    return {row[0]: row for row in rows}


def main(path):
    cube = cube_module.load(path)
    smi = nvidia_smi()
    failures = []

    def check(what, ok, detail):
        print(f"{'ok  ' if ok else 'FAIL'} {what}: {detail}")
        if not ok:
            failures.append(what)

    check("schema", cube.schema == "crossbench-cube/4", cube.schema)
    check("git revision", len(cube.attrs.get("git_revision", "")) >= 12, cube.attrs.get("git_revision"))
    for _, rank in cube.ranks.iterrows():
        uuid = rank["uuid"]
        check(f"rank {rank['rank']} uuid has 40 characters", len(uuid) == 40, uuid)
        row = smi.get(uuid)
        check(f"rank {rank['rank']} uuid is nvidia-smi's", row is not None, uuid)
        if row is None:
            continue
        _, power, driver, sm_clock, memory_clock, ecc = row
        check("enforced power limit", abs(float(rank["power_limit_w"]) - float(power)) < 1.0, f"{rank['power_limit_w']} W vs {power} W")
        check("driver", driver in rank["driver"], f"{rank['driver']!r} vs {driver}")
        if sm_clock not in ("[N/A]", "N/A"):
            check("application SM clock", abs(float(rank["application_sm_clock_mhz"]) - float(sm_clock)) < 1, f"{rank['application_sm_clock_mhz']} vs {sm_clock}")
            check("application memory clock", abs(float(rank["application_memory_clock_mhz"]) - float(memory_clock)) < 1,
                  f"{rank['application_memory_clock_mhz']} vs {memory_clock}")
        expected_ecc = {"Enabled": "on", "Disabled": "off"}.get(ecc, "unsupported")
        check("ECC", rank["ecc"] == expected_ecc, f"{rank['ecc']} vs {ecc}")
        check("clock policy", rank["clock_policy"].startswith("auto boost"), rank["clock_policy"])
        for column in ("cpu_model", "os", "kernel"):
            check(column, bool(rank[column]), rank[column])
    for _, cell in cube.measured.iterrows():
        start = datetime.datetime.strptime(cell["started_utc"], "%Y-%m-%dT%H:%M:%S.%fZ")
        end = datetime.datetime.strptime(cell["finished_utc"], "%Y-%m-%dT%H:%M:%S.%fZ")
        check(f"{cell['network']} {cell['phase']} wall times",
              cell["preparation_s"] >= 0 and cell["timed_s"] > 0 and start <= end,
              f"preparation {cell['preparation_s']:.3f} s, search {cell['search_s']}, timed {cell['timed_s']:.3f} s, "
              f"{cell['started_utc']} .. {cell['finished_utc']}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
