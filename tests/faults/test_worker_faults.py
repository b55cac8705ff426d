"""Hostile workers cost one cell each, with bounded messages, in bounded time."""
import time

import pytest

from conftest import HOSTILE_WORKER
from helpers import cube_cells, journal_results


def run_hostile(tmp_path, crossbench, write_job, fault, cell_time_limit_s=20):
    extra = f"[workers]\nhostile = python3 {HOSTILE_WORKER} --fault {fault}\n"
    job = write_job(engines="hostile", cell_time_limit_s=cell_time_limit_s, extra=extra)
    output = tmp_path / f"{fault}.h5"
    start = time.time()
    result = crossbench("run", "--job", job, "--output", output, "--quiet", timeout=300)
    assert result.returncode == 0, result.stderr
    cells, _ = cube_cells(output)
    assert len(cells) == 1
    return cells[0][0], cells[0][1], time.time() - start


def test_a_well_behaved_hostile_worker_is_ok(tmp_path, crossbench, write_job):
    status, message, _ = run_hostile(tmp_path, crossbench, write_job, "ok")
    assert status == "ok", message


def test_silent_start_ends_timeout_within_the_cell_limit(tmp_path, crossbench, write_job):
    status, message, seconds = run_hostile(tmp_path, crossbench, write_job, "silent-start", cell_time_limit_s=3)
    assert status == "timeout" and "hello" in message, message
    assert seconds < 30


def test_stderr_flood_is_read_in_linear_time_and_kept_bounded(tmp_path, crossbench, write_job):
    status, message, seconds = run_hostile(tmp_path, crossbench, write_job, "stderr-flood")
    assert status == "failed"
    assert len(message) < 8192, len(message)
    assert seconds < 30, f"64 MiB of stderr took {seconds:.0f} s"


def test_stdout_flood_is_capped(tmp_path, crossbench, write_job):
    status, message, seconds = run_hostile(tmp_path, crossbench, write_job, "stdout-flood")
    assert status == "failed" and "longer than 64 MiB" in message, message
    assert seconds < 60


@pytest.mark.parametrize("fault, evidence", [("too-many-samples", "were asked for"),
                                             ("bad-field", "field 'status' is a number, not a string")])
def test_malformed_replies_are_refused_naming_the_field(tmp_path, crossbench, write_job, fault, evidence):
    status, message, _ = run_hostile(tmp_path, crossbench, write_job, fault)
    assert status == "failed" and evidence in message, message


def test_a_huge_worker_message_is_cut(tmp_path, crossbench, write_job):
    status, message, _ = run_hostile(tmp_path, crossbench, write_job, "huge-message")
    assert status == "failed" and "more bytes]" in message
    assert len(message) < 8192


def test_a_worker_starts_with_no_signal_blocked(tmp_path, crossbench, write_job):
    # The rank blocks its stop signals in every thread (src/cluster/stop_request.hpp);
    # a mask survives exec, so the worker must be started with it cleared, or
    # SIGTERM and SIGINT would never reach it.
    status, message, _ = run_hostile(tmp_path, crossbench, write_job, "signal-mask")
    assert status == "failed", message
    assert "SigBlk:" in message, message
    mask = int(message.split("SigBlk:")[1].split()[0], 16)
    assert mask == 0, f"the worker started with signals blocked: {message}"


@pytest.mark.parametrize("per_cell", ["true", "false"])
def test_every_cell_gets_a_fresh_worker_process_unless_told(tmp_path, crossbench, write_job, per_cell):
    # A framework's users run one configuration per process: by default no
    # process state (cudnn.benchmark's choices, allocator pools) crosses cells.
    extra = f"[workers]\nhostile = python3 {HOSTILE_WORKER} --fault ok\n[engine]\nworker_per_cell = {per_cell}\n"
    job = write_job(engines="hostile", batches="1, 2, 3", extra=extra)
    output = tmp_path / f"per_cell_{per_cell}.h5"
    result = crossbench("run", "--job", job, "--output", output, "--quiet", timeout=300)
    assert result.returncode == 0, result.stderr
    results = journal_results(output)
    assert [r["status"] for r in results] == ["ok"] * 3, results
    pids = {r["decisions"].split()[0] for r in results}  # "pid=N", then crossbench's worker_start= and worker_prepare=
    assert len(pids) == (3 if per_cell == "true" else 1), pids


def process_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("per_cell", ["true", "false"])
def test_nothing_a_worker_starts_outlives_its_cell(tmp_path, crossbench, write_job, per_cell):
    # Each cell's worker starts a helper in its process group (as Inductor's
    # compile pool), one in a session of its own and a double-forked daemon,
    # none of which reads stdin. After every cell none may be left (with a
    # worker kept across cells, its in-group helper is its own until the end),
    # and the escaped ones are named in the cell's decisions.
    ledger = tmp_path / "ledger"
    extra = (f"[workers]\nhostile = python3 {HOSTILE_WORKER} --fault children --ledger {ledger}\n"
             f"[engine]\nworker_per_cell = {per_cell}\n")
    job = write_job(engines="hostile", batches="1, 2, 3", extra=extra)
    output = tmp_path / f"children_{per_cell}.h5"
    result = crossbench("run", "--job", job, "--output", output, "--quiet", timeout=300)
    assert result.returncode == 0, result.stderr
    results = journal_results(output)
    assert [r["status"] for r in results] == ["ok"] * 3, results
    started = [line.split() for line in ledger.read_text().splitlines()]
    assert len(started) == 9, started
    for cell, r in enumerate(results):
        decisions = r["decisions"]
        children = dict(item.split(":") for item in decisions.split("children=")[1].split()[0].split(","))
        survivors = decisions.split("survivors=")[1].split()[0].rstrip(";")
        if per_cell == "true":
            assert survivors == "none", decisions
        else:
            assert all(kind in ("in-group", "escaped") for kind, _ in
                       (s.split(":") for s in survivors.split(",") if s != "none")), decisions
        assert "outlived the cell" in decisions, decisions
        # A worker kept across cells keeps its own children (its setsid one
        # too) until the run ends; the daemon's parent exited, so it is a stray.
        for kind in ("escaped", "daemon") if per_cell == "true" else ("daemon",):
            assert f"pid {children[kind]} (sleep, session " in decisions, (kind, decisions)
        assert f"pid {children['in-group']} " not in decisions.split("outlived the cell")[1], decisions
    left = [(kind, pid) for kind, pid in started if process_alive(int(pid))]
    assert not left, f"processes outlived the run: {left}"


def test_a_worker_that_dies_while_its_helper_holds_the_pipe_fails_at_once(tmp_path, crossbench, write_job):
    # Its output never ends (the helper holds it open): the worker's own exit
    # is the end of its output, not the cell's time limit.
    status, message, seconds = run_hostile(tmp_path, crossbench, write_job, "die-holding-pipe", cell_time_limit_s=60)
    assert status == "failed" and "exited with status 1" in message, (status, message)
    assert seconds < 30, f"the dead worker was noticed after {seconds:.0f} s"
