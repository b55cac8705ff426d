"""Write errors, one run per output, symlinks, hostile inputs."""
import os
import pathlib
import shutil
import signal
import subprocess
import time

import pytest

from helpers import cube_cells, journal_of, journal_results, wait_until


@pytest.mark.parametrize("failing, named", [("*.h5.tmp.*", "cannot write cube"), ("*.journal", "journal")])
def test_write_error_exits_1_naming_the_file_and_resume_completes(tmp_path, write_job, crossbench, fail_writes_shim,
                                                                   failing, named):
    job = write_job(batches="1, 2")
    output = tmp_path / "failing.h5"
    environment = dict(os.environ, LD_PRELOAD=str(fail_writes_shim), FAIL_WRITES_MATCHING=failing)
    failed = crossbench("run", "--job", job, "--output", output, "--quiet", env=environment)
    assert failed.returncode == 1, failed.stderr
    first = failed.stderr.splitlines()[0]
    assert named in first and str(output) in first and "No space left on device" in first, failed.stderr
    assert "Segmentation" not in failed.stderr and "HDF5-DIAG" not in failed.stderr
    assert not output.exists() and not list(tmp_path.glob("failing.h5.tmp.*"))
    if failing == "*.h5.tmp.*":
        assert len(journal_results(output)) == 2  # nothing finished is lost
        again = ["--resume"]
    else:
        assert not journal_of(output).exists()  # its header failed: nothing to resume, nothing in the way
        again = []
    resumed = crossbench("run", "--job", job, "--output", output, "--quiet", *again)
    assert resumed.returncode == 0, resumed.stderr
    cells, state = cube_cells(output)
    assert state == "complete" and [status for status, _ in cells] == ["ok", "ok"]


OS_ERRORS = {"ENOSPC": "No space left on device", "EROFS": "Read-only file system", "EIO": "Input/output error"}


@pytest.mark.parametrize("code", sorted(OS_ERRORS))
@pytest.mark.parametrize("failing, named", [("*.lock", "lock file"), ("*.journal", "journal"),
                                            ("*.h5.tmp.*", "cannot write cube"), ("*.jsonl", "--jsonl")])
def test_every_write_error_exits_1_naming_the_file_and_the_os_error(tmp_path, write_job, crossbench,
                                                                     fail_writes_shim, failing, named, code):
    # Exit 2 means "fix your input, do not retry"; a full, read-only or failing
    # disk is not the input's fault: a wrapper must see 1 and retry once fixed.
    job = write_job()
    output = tmp_path / "out.h5"
    jsonl = tmp_path / "cells.jsonl"
    environment = dict(os.environ, LD_PRELOAD=str(fail_writes_shim), FAIL_WRITES_MATCHING=failing,
                       FAIL_WRITES_ERRNO=code)
    failed = crossbench("run", "--job", job, "--output", output, "--quiet", "--jsonl", jsonl, env=environment)
    assert failed.returncode == 1, failed.stderr
    first = failed.stderr.splitlines()[0]
    assert named in first and OS_ERRORS[code] in first, failed.stderr
    assert "Segmentation" not in failed.stderr and "Traceback" not in failed.stderr


@pytest.mark.parametrize("code", sorted(OS_ERRORS))
def test_resume_onto_a_failing_disk_exits_1_not_2(tmp_path, write_job, crossbench, fail_writes_shim, code):
    # The lock file is the first thing a resume writes: its write error was
    # once reported as bad input (exit 2), and a wrapper never retried.
    job = write_job(batches="1, 2")
    output = tmp_path / "resumed.h5"
    environment = dict(os.environ, LD_PRELOAD=str(fail_writes_shim), FAIL_WRITES_MATCHING="*.h5.tmp.*")
    assert crossbench("run", "--job", job, "--output", output, "--quiet", env=environment).returncode == 1
    environment.update(FAIL_WRITES_MATCHING="*.lock", FAIL_WRITES_ERRNO=code)
    resumed = crossbench("run", "--job", job, "--output", output, "--quiet", "--resume", env=environment)
    assert resumed.returncode == 1, resumed.stderr
    first = resumed.stderr.splitlines()[0]
    assert "lock file" in first and str(output) in first and OS_ERRORS[code] in first, resumed.stderr
    again = crossbench("run", "--job", job, "--output", output, "--quiet", "--resume")
    assert again.returncode == 0, again.stderr
    assert cube_cells(output)[1] == "complete"


def test_export_network_onto_a_failing_disk_exits_1(tmp_path, crossbench, fail_writes_shim):
    environment = dict(os.environ, LD_PRELOAD=str(fail_writes_shim), FAIL_WRITES_MATCHING="*.json.tmp.*")
    failed = crossbench("export-network", "alexnet", "--output", tmp_path / "alexnet.json", env=environment)
    assert failed.returncode == 1 and "No space left on device" in failed.stderr, failed.stderr
    assert not list(tmp_path.iterdir())


@pytest.fixture
def small_tmpfs(tmp_path):
    mount_point = tmp_path / "full"
    mount_point.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40k", "tmpfs", str(mount_point)],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs needs root (the RLIMIT_FSIZE test covers write errors without it)")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def test_full_disk_exits_1_with_no_space_and_resume_completes(small_tmpfs, write_job, crossbench):
    job = write_job()
    output = small_tmpfs / "full.h5"
    failed = crossbench("run", "--job", job, "--output", output, "--quiet")
    assert failed.returncode == 1, failed.stderr
    first = failed.stderr.splitlines()[0]
    assert str(output) in first and "No space left on device" in first, failed.stderr
    assert len(journal_results(output)) == 1
    subprocess.run(["mount", "-o", "remount,size=4m", str(small_tmpfs)], check=True)
    resumed = crossbench("run", "--job", job, "--output", output, "--quiet", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert cube_cells(output)[1] == "complete"


def long_job(write_job, cell_time_limit_s=30):
    # One cell that runs until its time limit: a target no measurement reaches.
    return write_job(networks="alexnet", phases="training", batches="8", min_steps=1000000, max_steps=1000000,
                     target_ci=1e-9, cell_time_limit_s=cell_time_limit_s)


def test_second_run_on_a_locked_output_exits_2_naming_the_holder(tmp_path, write_job, crossbench, binary):
    job = long_job(write_job, cell_time_limit_s=20)
    output = tmp_path / "locked.h5"
    first = subprocess.Popen([str(binary), "run", "--job", job, "--output", output, "--quiet"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: journal_of(output).exists(), first, what="the journal")
        journal_before = journal_of(output).read_bytes()
        for extra in ([], ["--overwrite"], ["--resume"]):
            second = crossbench("run", "--job", job, "--output", output, "--quiet", *extra)
            assert second.returncode == 2, (extra, second.stderr)
            assert "in use by another crossbench run" in second.stderr and f"pid {first.pid}" in second.stderr
            assert journal_of(output).read_bytes() == journal_before
    finally:
        first.send_signal(signal.SIGTERM)
        first.send_signal(signal.SIGTERM)  # the second ends the running cell
        first.communicate(timeout=60)
    assert first.returncode == 3
    assert not (tmp_path / "locked.h5.lock").exists()


def test_overwrite_never_follows_a_symlinked_journal(tmp_path, write_job, crossbench):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    output = tmp_path / "sym.h5"
    journal_of(output).symlink_to(target)
    result = crossbench("run", "--job", write_job(), "--output", output, "--quiet", "--overwrite")
    assert result.returncode == 0, result.stderr
    assert target.read_text() == "keep me\n"
    assert not journal_of(output).is_symlink()


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "too-big", "directory"])
def test_job_file_must_be_a_small_regular_file(tmp_path, crossbench, kind):
    if kind == "fifo":
        path = tmp_path / "job.fifo"
        os.mkfifo(path)
    elif kind == "dev-zero":
        path = "/dev/zero"
    elif kind == "too-big":
        path = tmp_path / "big.ini"
        path.write_text("# padding\n" * 200000)
    else:
        path = tmp_path
    start = time.time()
    result = crossbench("run", "--job", path, "--output", tmp_path / "x.h5", timeout=30)
    assert result.returncode == 2 and "job file" in result.stderr, result.stderr
    assert time.time() - start < 20
    assert not (tmp_path / "x.h5.journal").exists()


def test_empty_output_is_refused(tmp_path, write_job, crossbench):
    result = crossbench("run", "--job", write_job(), "--output", "", cwd=tmp_path)
    assert result.returncode == 2 and "output" in result.stderr
    assert list(tmp_path.iterdir()) == [tmp_path / "job.ini"]


def test_export_network_never_overwrites_without_force(tmp_path, crossbench):
    output = tmp_path / "alexnet.json"
    output.write_text("mine\n")
    refused = crossbench("export-network", "alexnet", "--output", output)
    assert refused.returncode == 2 and "--force" in refused.stderr
    assert output.read_text() == "mine\n"
    link = tmp_path / "link.json"
    link.symlink_to(output)
    assert crossbench("export-network", "alexnet", "--output", link, "--force").returncode == 0
    assert output.read_text() == "mine\n" and not link.is_symlink()
    assert crossbench("export-network", "alexnet", "--output", output, "--force").returncode == 0
    assert output.read_text().startswith("{")


def test_merge_onto_a_failing_disk_exits_1(tmp_path, write_job, crossbench, fail_writes_shim):
    job = write_job()
    cubes = []
    for tag in ("site=a", "site=b"):
        cube = tmp_path / f"{tag[-1]}.h5"
        made = crossbench("run", "--job", job, "--output", cube, "--quiet", "--device-tag", tag)
        assert made.returncode == 0, made.stderr
        cubes.append(cube)
    environment = dict(os.environ, LD_PRELOAD=str(fail_writes_shim), FAIL_WRITES_MATCHING="*.h5.tmp.*",
                       FAIL_WRITES_ERRNO="EIO")
    merged = tmp_path / "all.h5"
    failed = crossbench("merge", *cubes, "-o", merged, env=environment)
    assert failed.returncode == 1, failed.stderr
    assert str(merged) in failed.stderr and "Input/output error" in failed.stderr, failed.stderr
    assert not merged.exists()
