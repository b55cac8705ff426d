"""Hostile input gets a message that shows it: every byte visible, no
impossible device planned for, no misleading advice."""
import json
import subprocess

import pytest

from conftest import HOSTILE_WORKER, job_text
from helpers import cube_cells


@pytest.fixture
def device_file(tmp_path, binary):
    listed = subprocess.run([str(binary), "list", "devices", "--json"], capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    description = json.loads(listed.stdout)
    description = description[0] if isinstance(description, list) else description

    def write(**changes):
        path = tmp_path / "device.json"
        path.write_text(json.dumps({**description, **changes}))
        return path
    return write


@pytest.mark.parametrize("changes, named", [({"compute_units": 0}, "compute_units"),
                                            ({"peak_fp32_tflops": 0}, "peak_fp32_tflops"),
                                            ({"peak_fp32_tflops": -1.5}, "peak_fp32_tflops"),
                                            ({"memory_bytes": 0}, "memory_bytes")])
def test_plan_refuses_a_device_it_cannot_plan_for(write_job, crossbench, device_file, changes, named):
    result = crossbench("plan", "--job", write_job(), "--ranks", "2", "--device-json", device_file(**changes))
    assert result.returncode == 2 and named in result.stderr, result.stderr
    assert crossbench("plan", "--job", write_job(), "--ranks", "2", "--device-json", device_file()).returncode == 0


def test_an_empty_worker_name_is_named_as_such(tmp_path, write_job, crossbench):
    result = crossbench("run", "--job", write_job(), "--output", tmp_path / "x.h5", "--set", "workers.=x")
    assert result.returncode == 2, result.stderr
    assert "names no worker engine" in result.stderr and "native engine" not in result.stderr, result.stderr


def test_a_nul_byte_and_a_byte_order_mark_are_shown_not_hidden(tmp_path, crossbench):
    # what() is a C string: a NUL used to cut the message there; a byte-order
    # mark was echoed as an invisible character.
    job = tmp_path / "nul.ini"
    job.write_bytes(job_text().encode().replace(b"[measure]", b"[measure]\nbad\x00key = 1\n\xef\xbb\xbfother = 2"))
    result = crossbench("run", "--job", job, "--output", tmp_path / "x.h5")
    assert result.returncode == 2, result.stderr
    assert "bad\\0key" in result.stderr, result.stderr
    assert "\x00" not in result.stderr and "\ufeff" not in result.stderr


def test_a_job_file_that_starts_with_a_byte_order_mark_is_read(tmp_path, crossbench):
    # Editors on Windows start UTF-8 files with one; it is not part of the first line.
    job = tmp_path / "bom.ini"
    job.write_bytes(b"\xef\xbb\xbf" + job_text().lstrip().encode())
    result = crossbench("plan", "--job", job, "--ranks", "1")
    assert result.returncode == 0, result.stderr


def test_a_bom_inside_a_job_file_is_named(tmp_path, crossbench):
    job = tmp_path / "bom_inside.ini"
    job.write_bytes(job_text().encode().replace(b"[measure]", b"[measure]\n\xef\xbb\xbfwarmup2 = 1"))
    result = crossbench("run", "--job", job, "--output", tmp_path / "x.h5")
    assert result.returncode == 2 and "<BOM>warmup2" in result.stderr, result.stderr


def test_the_hello_timeout_says_seconds_as_written(tmp_path, write_job, crossbench):
    extra = f"[workers]\nhostile = python3 {HOSTILE_WORKER} --fault silent-start\n"
    job = write_job(engines="hostile", cell_time_limit_s=3, extra=extra)
    output = tmp_path / "hello.h5"
    result = crossbench("run", "--job", job, "--output", output, "--quiet")
    assert result.returncode == 0, result.stderr
    (status, message), = cube_cells(output)[0]
    assert status == "timeout" and "time limit of 3 s" in message, message
