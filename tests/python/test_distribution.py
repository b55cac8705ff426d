"""Distribution under real mpirun: device groups from tags (MPMD launch), every
cell once per group, streaming to rank 0's journal, resume after SIGKILL, a
clean stop on SIGTERM, and a refused resume for another job."""
import json
import os
import pathlib
import signal
import subprocess
import time

import h5py
import numpy as np
import pytest

JOB = """
# test job: many small cells
[matrix]
networks = alexnet, googlenet
engines = auto
precisions = fp32
batches = 1, 2
phases = inference, training

[measure]
warmup = 1
min_steps = 2
max_steps = 3
target_ci = 0.5
cell_time_limit_s = 120
"""
CELLS_PER_GROUP = 2 * 2 * 2

FINAL = {"ok", "oom", "unsupported", "failed", "timeout"}


def write_job(directory, text=JOB, name="dist.ini"):
    path = pathlib.Path(directory) / name
    path.write_text(text)
    return path


def mpirun(binary, parts, extra=()):
    """parts: list of (ranks, tag or None); one MPMD command line."""
    command = ["mpirun", "--oversubscribe"]
    for index, (ranks, tag) in enumerate(parts):
        if index:
            command.append(":")
        command += ["-np", str(ranks)]
        if tag is not None:
            command += ["-x", f"CROSSBENCH_DEVICE_TAG={tag}"]
        command += [str(binary), *map(str, extra)]
    return command


def journal_results(path):
    """Result records of a journal, checking every line's checksum format."""
    import zlib
    results = []
    for line in pathlib.Path(path).read_text().splitlines():
        crc, payload = line.split(" ", 1)
        assert f"{zlib.crc32(payload.encode()):08x}" == crc
        record = json.loads(payload)
        if record["type"] == "result":
            results.append(record["result"])
    return results


def statuses(cube_path):
    with h5py.File(cube_path, "r") as cube:
        names = {value: name for name, value in h5py.check_enum_dtype(cube["status"].dtype).items()}
        return np.vectorize(names.get)(cube["status"][...]), cube


def cell_key(result):
    return (result["device_key"], result["engine"], result["network"], result["precision"],
            result["batch"], result["phase"], result["replica"])


def test_two_tagged_groups_each_run_the_whole_matrix(tmp_path, crossbench_binary):
    job = write_job(tmp_path)
    output = tmp_path / "tags.h5"
    run = ["run", "--job", job, "--output", output, "--quiet"]
    plan = subprocess.run(mpirun(crossbench_binary, [(2, "site=a"), (2, "site=b")], ["plan", "--job", job]),
                          capture_output=True, text=True, timeout=120)
    assert plan.returncode == 0, plan.stderr
    assert sum(line.startswith("device ") for line in plan.stdout.splitlines()) == 2 and "[site=a]" in plan.stdout and "[site=b]" in plan.stdout
    result = subprocess.run(mpirun(crossbench_binary, [(2, "site=a"), (2, "site=b")], run),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    with h5py.File(output, "r") as cube:
        devices = [d.decode() if isinstance(d, bytes) else d for d in cube["device"][...]]
        assert len(devices) == 2
        assert any("[site=a]" in d for d in devices) and any("[site=b]" in d for d in devices)
        names = {value: name for name, value in h5py.check_enum_dtype(cube["status"].dtype).items()}
        status = np.vectorize(names.get)(cube["status"][...])
        assert (status == "ok").all(), status
        rank = cube["rank"][...]
        # Group a is ranks 0 and 1 (first MPMD part), group b ranks 2 and 3; each splits its cells over both.
        ranks_a = set(rank[devices.index([d for d in devices if "site=a" in d][0])].ravel().tolist())
        ranks_b = set(rank[devices.index([d for d in devices if "site=b" in d][0])].ravel().tolist())
        assert ranks_a == {0, 1} and ranks_b == {2, 3}
        assert len(cube["ranks/rank"]) == 4
    records = journal_results(str(output) + ".journal")
    assert len(records) == 2 * CELLS_PER_GROUP
    assert len({cell_key(r) for r in records}) == len(records)


def wait_for_results(journal, count, process, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if journal.exists() and len([l for l in journal.read_text().splitlines() if '"type":"result"' in l]) >= count:
            return
        assert process.poll() is None, "the run ended before the test could interrupt it"
        time.sleep(0.2)
    raise AssertionError("no results arrived in time")


def crossbench_children(mpirun_pid):
    out = subprocess.run(["pgrep", "-P", str(mpirun_pid)], capture_output=True, text=True).stdout.split()
    return [int(pid) for pid in out]


def rank_pid(mpirun_pid, rank):
    for pid in crossbench_children(mpirun_pid):
        environment = pathlib.Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        if f"OMPI_COMM_WORLD_RANK={rank}".encode() in environment:
            return pid
    raise AssertionError(f"rank {rank} not found among the children of mpirun {mpirun_pid}")


def test_sigkill_then_resume_measures_every_cell_once(tmp_path, crossbench_binary):
    job = write_job(tmp_path)
    output = tmp_path / "killed.h5"
    journal = pathlib.Path(str(output) + ".journal")
    command = mpirun(crossbench_binary, [(2, None)], ["run", "--job", job, "--output", output, "--quiet"])
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_results(journal, 2, process)
        os.kill(rank_pid(process.pid, 1), signal.SIGKILL)
        process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode != 0
    before = journal_results(journal)
    assert 2 <= len(before) < CELLS_PER_GROUP

    # A resume with another job is refused and changes nothing.
    other = write_job(tmp_path, JOB.replace("batches = 1, 2", "batches = 1, 4"), name="other.ini")
    journal_bytes = journal.read_bytes()
    refused = subprocess.run(mpirun(crossbench_binary, [(2, None)],
                                    ["run", "--job", other, "--output", output, "--resume", "--quiet"]),
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2
    assert "--resume refused" in refused.stderr and "matrix" in refused.stderr and "job 'other'" in refused.stderr
    assert journal.read_bytes() == journal_bytes

    resumed = subprocess.run(mpirun(crossbench_binary, [(2, None)],
                                    ["run", "--job", job, "--output", output, "--resume"]),
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    assert f"resuming: {len(before)} cells already in the journal" in resumed.stderr
    after = journal_results(journal)
    keys = [cell_key(r) for r in after]
    assert len(keys) == len(set(keys)) == CELLS_PER_GROUP, "a cell was measured twice or is missing"
    assert after[: len(before)] == before
    with h5py.File(output, "r") as cube:
        names = {value: name for name, value in h5py.check_enum_dtype(cube["status"].dtype).items()}
        status = np.vectorize(names.get)(cube["status"][...])
        assert set(status.ravel()) <= FINAL
        assert cube.attrs["run_state"] in ("complete", b"complete")


def test_sigterm_stops_cleanly_and_resume_completes(tmp_path, crossbench_binary):
    job = write_job(tmp_path)
    output = tmp_path / "term.h5"
    journal = pathlib.Path(str(output) + ".journal")
    command = mpirun(crossbench_binary, [(2, None)], ["run", "--job", job, "--output", output, "--quiet"])
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_results(journal, 1, process)
        for pid in crossbench_children(process.pid):  # as Slurm signals every task
            os.kill(pid, signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 3, stdout + stderr
    assert "--resume" in stderr  # context (what to do next) goes to stderr
    with h5py.File(output, "r") as cube:  # readable, and says it is incomplete
        state = cube.attrs["run_state"]
        state = state.decode() if isinstance(state, bytes) else state
        assert state.startswith("incomplete")
    done = len(journal_results(journal))
    assert done < CELLS_PER_GROUP
    resumed = subprocess.run(mpirun(crossbench_binary, [(2, None)],
                                    ["run", "--job", job, "--output", output, "--resume", "--quiet"]),
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr + resumed.stdout
    records = journal_results(journal)
    assert len({cell_key(r) for r in records}) == len(records) == CELLS_PER_GROUP


def test_corrupt_and_truncated_journal_lines_are_dropped_with_a_warning(tmp_path, crossbench_binary):
    job = write_job(tmp_path, JOB.replace("networks = alexnet, googlenet", "networks = alexnet"))
    output = tmp_path / "corrupt.h5"
    first = subprocess.run([str(crossbench_binary), "run", "--job", job, "--output", output, "--quiet"],
                           capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    journal = pathlib.Path(str(output) + ".journal")
    lines = journal.read_text().splitlines(keepends=True)
    results = [i for i, line in enumerate(lines) if '"type":"result"' in line]
    assert len(results) == 4, lines  # beside the header and the run segment's records
    # Flip one digit inside the second result (checksum no longer matches) and cut the last
    # result short, as a writer that died writing it would (nothing after it).
    damaged = lines[results[1]].replace('"steps":', '"steps":9', 1)
    last = lines[results[-1]]
    journal.write_text("".join(lines[:results[1]]) + damaged + "".join(lines[results[1] + 1:results[-1]]) +
                       last[: len(last) // 2])
    resumed = subprocess.run([str(crossbench_binary), "run", "--job", job, "--output", output, "--resume", "--quiet"],
                             capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert "checksum does not match" in resumed.stderr and "truncated" in resumed.stderr
    records = journal_results_tolerant(journal)
    assert len({cell_key(r) for r in records}) == 4


def journal_results_tolerant(path):
    import zlib
    results = []
    for line in pathlib.Path(path).read_text().splitlines():
        crc, _, payload = line.partition(" ")
        if f"{zlib.crc32(payload.encode()):08x}" != crc:
            continue
        record = json.loads(payload)
        if record["type"] == "result":
            results.append(record["result"])
    return results


def test_existing_output_is_not_overwritten_without_asking(tmp_path, run_crossbench):
    job = write_job(tmp_path, JOB.replace("networks = alexnet, googlenet", "networks = alexnet").replace("batches = 1, 2", "batches = 1"))
    output = tmp_path / "keep.h5"
    assert run_crossbench("run", "--job", job, "--output", output, "--quiet").returncode == 0
    before = output.read_bytes()
    again = run_crossbench("run", "--job", job, "--output", output, "--quiet")
    assert again.returncode == 2 and "--overwrite" in again.stderr and "--resume" in again.stderr
    assert output.read_bytes() == before
    assert run_crossbench("run", "--job", job, "--output", output, "--quiet", "--overwrite").returncode == 0
