"""Reading what a run left behind: journal records and cube cells."""
import json
import pathlib
import subprocess
import time
import zlib

import h5py
import numpy as np


def journal_of(cube):
    return pathlib.Path(str(cube) + ".journal")


def journal_records(cube):
    """The valid records of a journal (checksums checked), in order."""
    records = []
    for line in journal_of(cube).read_text().splitlines():
        crc, _, payload = line.partition(" ")
        if f"{zlib.crc32(payload.encode()):08x}" == crc:
            records.append(json.loads(payload))
    return records


def journal_results(cube):
    return [record["result"] for record in journal_records(cube) if record["type"] == "result"]


def cube_cells(cube):
    """(status, message) of every cell of the cube."""
    with h5py.File(cube, "r") as file:
        names = {value: name for name, value in h5py.check_enum_dtype(file["status"].dtype).items()}
        status = np.vectorize(names.get)(file["status"][...]).ravel()
        messages = [m.decode() if isinstance(m, bytes) else m for m in file["message"][...].ravel()]
        state = file.attrs["run_state"]
        state = state.decode() if isinstance(state, bytes) else state
    return list(zip(status, messages)), state


def wait_until(condition, process, timeout=120, what="the condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        assert process.poll() is None, f"the run ended before {what}: {process.communicate()}"
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(child) for child in out]


def rank_pid(mpirun_pid, rank):
    for pid in children(mpirun_pid):
        environment = pathlib.Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() in environment:
            return pid
    raise AssertionError(f"rank {rank} not found among the children of mpirun {mpirun_pid}")
