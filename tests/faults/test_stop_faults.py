"""Stop signals: one signal to any rank stops every rank (exit 3, cube
written, resumable, the signal recorded); a second signal or the grace time
ends the running cell, which is recorded not_run and runs again on resume."""
import signal
import subprocess
import time

from helpers import cube_cells, journal_of, journal_results, rank_pid, wait_until


def test_a_signal_to_one_rank_stops_every_rank(tmp_path, write_job, binary, crossbench):
    # Many short cells per rank: without the broadcast, rank 0 would run its whole share.
    job = write_job(networks="alexnet, googlenet", batches="1, 2, 3, 4", phases="inference, training",
                    min_steps=3, max_steps=3)
    output = tmp_path / "stopped.h5"
    process = subprocess.Popen(["mpirun", "--oversubscribe", "-np", "2", str(binary), "run", "--job", job,
                                "--output", output, "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: journal_of(output).exists() and len(journal_results(output)) >= 1, process, what="a result")
        import os
        os.kill(rank_pid(process.pid, 1), signal.SIGUSR1)
        stdout, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 3, stdout + stderr
    done = len(journal_results(output))
    assert done < 16, "rank 0 ran its whole share: the stop did not reach it"
    cells, state = cube_cells(output)
    assert state.startswith("incomplete: stopped by signal 10"), state
    resumed = crossbench("run", "--job", job, "--output", output, "--quiet", "--resume", ranks=2)
    assert resumed.returncode == 0, resumed.stderr
    assert len(journal_results(output)) == 16


def long_cell_job(write_job, cell_time_limit_s):
    return write_job(networks="alexnet", phases="training", batches="8", min_steps=1000000, max_steps=1000000,
                     target_ci=1e-9, cell_time_limit_s=cell_time_limit_s)


def run_and_signal(binary, job, output, signals, extra=()):
    process = subprocess.Popen([str(binary), "run", "--job", job, "--output", output, "--quiet", *extra],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: journal_of(output).exists(), process, what="the journal")
    time.sleep(1.0)  # inside the cell
    start = time.time()
    for number in signals:
        process.send_signal(number)
        time.sleep(0.2)
    stdout, stderr = process.communicate(timeout=120)
    return process.returncode, time.time() - start, stdout + stderr


def test_a_second_signal_interrupts_the_running_cell(tmp_path, write_job, binary, crossbench):
    job = long_cell_job(write_job, cell_time_limit_s=60)
    output = tmp_path / "interrupted.h5"
    code, seconds, text = run_and_signal(binary, job, output, [signal.SIGTERM, signal.SIGTERM])
    assert code == 3, text
    assert seconds < 30, f"the running cell was not interrupted ({seconds:.0f} s)"
    cells, state = cube_cells(output)
    assert cells[0][0] == "not_run" and "interrupted by signal 15" in cells[0][1], cells
    assert state.startswith("incomplete: stopped by signal 15")
    assert journal_results(output) == []  # not journaled: it runs again on resume


def test_the_grace_time_interrupts_the_running_cell_and_resume_reruns_it(tmp_path, write_job, binary, crossbench):
    job = long_cell_job(write_job, cell_time_limit_s=8)
    output = tmp_path / "grace.h5"
    code, seconds, text = run_and_signal(binary, job, output, [signal.SIGUSR1], extra=["--stop-grace-s", "1"])
    assert code == 3, text
    assert seconds < 6, f"the grace time did not end the cell ({seconds:.0f} s)"
    cells, _ = cube_cells(output)
    assert cells[0][0] == "not_run" and "grace time" in cells[0][1], cells
    resumed = crossbench("run", "--job", job, "--output", output, "--quiet", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert len(journal_results(output)) == 1
    assert cube_cells(output)[1] == "complete"


def test_stop_signals_at_any_moment_of_the_steps_never_corrupt_the_heap(tmp_path, write_job, binary):
    # A signal frame pushed onto a thread inside oneDNN's JIT kernels once
    # corrupted their stack data and then the heap (about 1 run in 9 aborted).
    # glibc's checking allocator makes such corruption abort at once.
    import os
    import random
    job = long_cell_job(write_job, cell_time_limit_s=8)
    environment = {**os.environ, "MALLOC_CHECK_": "3", "MALLOC_PERTURB_": "165"}
    chance = random.Random(2017)
    for attempt in range(6):
        output = tmp_path / f"signalled{attempt}.h5"
        process = subprocess.Popen([str(binary), "run", "--job", job, "--output", output, "--quiet",
                                    "--stop-grace-s", "0.5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, env=environment)
        wait_until(lambda: journal_of(output).exists(), process, what="the journal")
        time.sleep(chance.uniform(0.0, 1.5))
        process.send_signal(signal.SIGUSR1)
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 3, f"attempt {attempt}: exit {process.returncode}\n{stdout}{stderr}"
