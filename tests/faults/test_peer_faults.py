"""A data-parallel peer lost mid-step (CPU, MPI between 2 ranks): the job
ends within a stated time, not 0, 2 or 3: Open MPI's mpirun notices the
dead rank first, ends the others and exits with 128 + the signal that killed
it (137 for SIGKILL; a rank that sees the loss itself first exits 1); its
message names the rank, its pid and the host. The journal stays intact and
--resume finishes the job (README "Exit status")."""
import os
import signal
import socket
import subprocess
import time

from conftest import job_text
from helpers import cube_cells, journal_of, journal_records, rank_pid, wait_until

# The stated time [s] from the peer's death to the end of the job: Open MPI
# notices a rank that dies and ends the rest (odls_base_sigkill_timeout, 1 s).
PEER_LOST_END_S = 30


def test_a_data_parallel_peer_lost_mid_step_ends_the_job_with_exit_1(tmp_path, binary):
    job = tmp_path / "peer.ini"
    # One data-parallel training cell that would run until its time limit.
    job.write_text(job_text(networks="alexnet", phases="training", batches="4", min_steps=1000000,
                            max_steps=1000000, target_ci=1e-9, cell_time_limit_s=30)
                   .replace("phases = training", "phases = training\ngpus = 2"))
    output = tmp_path / "peer.h5"
    process = subprocess.Popen(["mpirun", "--oversubscribe", "-np", "2", str(binary), "run", "--job", job,
                                "--output", output, "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        wait_until(lambda: journal_of(output).exists(), process, what="the journal")
        time.sleep(5.0)  # in the timed steps: both ranks inside the gradient all-reduce
        header_before = journal_of(output).read_bytes()
        lost = rank_pid(process.pid, 1)
        os.kill(lost, signal.SIGKILL)
        start = time.time()
        stdout, stderr = process.communicate(timeout=120)
        seconds = time.time() - start
        print(f"the job ended {seconds:.1f} s after its peer was killed (exit {process.returncode})")
    finally:
        if process.poll() is None:
            process.kill()
    assert seconds < PEER_LOST_END_S, f"the job took {seconds:.0f} s to end after losing a peer"
    assert process.returncode in (1, 128 + signal.SIGKILL), (process.returncode, stderr[-3000:])
    text = stdout + stderr
    assert "rank 1" in text and socket.gethostname() in text, text[-3000:]
    assert "exited on signal 9" in text or "crossbench: fatal" in text, text[-3000:]
    assert journal_of(output).read_bytes().startswith(header_before)  # appended to, never damaged
    records = journal_records(output)
    assert records and records[0]["type"] == "header", records
    # Nothing finished is lost, and the lost cell runs again (to its time limit: status timeout).
    resumed = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", str(binary), "run", "--job", job, "--output",
                              output, "--quiet", "--resume"], capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    cells, state = cube_cells(output)
    assert state == "complete" and [status for status, _ in cells] == ["timeout"], (state, cells)
