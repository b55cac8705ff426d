#!/usr/bin/env python3
"""A hostile crossbench worker for the fault-injection suite: it speaks the
protocol (src/workers/common/protocol.py) without any framework, and
misbehaves on command.

  --fault ok                answers well: step times of 1 ms (its pid in `decisions`)
  --fault silent-start      never says hello
  --fault stderr-flood      writes 64 MiB to stderr (no newline) while running steps, then dies
  --fault stdout-flood      writes 100 MiB to stdout without a newline while running steps
  --fault too-many-samples  answers `steps` with 1000 step times whatever count it asked for
  --fault bad-field         answers `steps` with a number where `status` is a string
  --fault huge-message      fails `prepare` with a 50 MiB message
  --fault signal-mask       fails `prepare` with its blocked signals ("SigBlk: <hex mask>")
  --fault die-holding-pipe  at `steps`, starts a helper that keeps stdout open (as a compile pool), then exits 1
  --fault children          at each `prepare` starts three `sleep` processes that never read stdin: one in
                            its process group, one in a session of its own (setsid), one double-forked into
                            a session of its own (its parent exits at once); appends "<kind> <pid>" lines to
                            the --ledger file and answers `steps` with `decisions` naming them and the
                            earlier cells' children still alive ("survivors=in-group:123,...")
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "workers"))
from common.protocol import PROTOCOL  # noqa: E402


def alive(pid):
    """Whether `pid` is a live process (a zombie has ended: it only waits to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def start_children(ledger):
    """The three kinds of helper of --fault children; returns "kind:pid" texts."""
    survivors = []
    if os.path.exists(ledger):
        with open(ledger) as earlier:
            for line in earlier:
                kind, pid = line.split()
                if alive(int(pid)):
                    survivors.append(f"{kind}:{pid}")
    sleep = ["sleep", "1000"]
    in_group = subprocess.Popen(sleep, stdin=subprocess.DEVNULL)
    escaped = subprocess.Popen(sleep, stdin=subprocess.DEVNULL, start_new_session=True)
    reader, writer = os.pipe()
    middle = os.fork()
    if middle == 0:  # a daemon's double fork: setsid, fork, and the middle process exits
        os.setsid()
        grandchild = subprocess.Popen(sleep, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        os.write(writer, str(grandchild.pid).encode())
        os._exit(0)
    os.close(writer)
    daemon = int(os.read(reader, 64).decode())
    os.close(reader)
    os.waitpid(middle, 0)
    started = {"in-group": in_group.pid, "escaped": escaped.pid, "daemon": daemon}
    with open(ledger, "a") as record:
        for kind, pid in started.items():
            record.write(f"{kind} {pid}\n")
    return ("children=" + ",".join(f"{kind}:{pid}" for kind, pid in started.items())
            + " survivors=" + (",".join(survivors) or "none"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fault", default="ok")
    parser.add_argument("--ledger", default="")
    arguments = parser.parse_args()
    fault = arguments.fault
    out = sys.stdout
    children = ""

    def reply(message):
        message.setdefault("protocol", PROTOCOL)
        out.write(json.dumps(message) + "\n")
        out.flush()

    if fault == "silent-start":
        time.sleep(1e6)
    reply({"type": "hello", "framework": "hostile 1.0"})
    for line in sys.stdin:
        request = json.loads(line)
        kind = request.get("type")
        if kind == "exit":
            return
        if kind == "prepare":
            if fault == "huge-message":
                reply({"type": "prepared", "status": "failed", "message": "x" * (50 << 20)})
            elif fault == "signal-mask":
                with open("/proc/self/status") as status:
                    blocked = next(line.split()[1] for line in status if line.startswith("SigBlk:"))
                reply({"type": "prepared", "status": "failed", "message": f"SigBlk: {blocked}"})
            else:
                if fault == "children":
                    children = start_children(arguments.ledger)
                reply({"type": "prepared", "status": "ok", "peak_memory_bytes": 1.0})
        elif kind == "steps":  # since protocol 2: run `count` steps, return their times
            steps = max(request["count"], 1)
            if fault == "stderr-flood":
                chunk = "e" * (1 << 20)
                for _ in range(64):
                    sys.stderr.write(chunk)
                sys.stderr.flush()
                os._exit(1)
            if fault == "stdout-flood":
                chunk = "o" * (1 << 20)
                for _ in range(100):
                    out.write(chunk)
                out.flush()
                time.sleep(1e6)
            if fault == "die-holding-pipe":
                subprocess.Popen(["sleep", "1000"], stdin=subprocess.DEVNULL)  # inherits stdout and stderr
                os._exit(1)
            if fault == "too-many-samples":
                steps = 1000
            status = 5 if fault == "bad-field" else "ok"
            reply({"type": "stepped", "status": status, "samples_ms": [1.0] * steps, "decisions": f"pid={os.getpid()}" + (f" {children}" if children else "")})
        elif kind == "check":
            reply({"type": "checked", "status": "ok", "finite": True, "loss": 1.0})
        elif kind == "release":
            reply({"type": "released", "status": "ok"})


if __name__ == "__main__":
    main()
