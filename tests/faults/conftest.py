"""The fault-injection suite (README "Testing"): crossbench under kills,
signals, a full disk, a second run on the same output, damaged journals,
hostile workers and hostile inputs. Run by pytest in CI; prints its own
"fault-injection suite: N passed, N failed" line."""
import os
import pathlib
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("CROSSBENCH_BUILD_DIR", REPO / "build")).resolve()
HOSTILE_WORKER = pathlib.Path(__file__).resolve().parent / "hostile_worker.py"

os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")

_outcomes = {"passed": 0, "failed": 0, "skipped": 0}


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _outcomes[report.outcome] = _outcomes.get(report.outcome, 0) + 1


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"fault-injection suite: {_outcomes['passed']} passed, {_outcomes['failed']} failed"
                                + (f", {_outcomes['skipped']} skipped" if _outcomes["skipped"] else ""))


@pytest.fixture(scope="session")
def binary():
    path = BUILD / "crossbench"
    if not path.exists():
        pytest.skip(f"crossbench binary not built at {path} (set CROSSBENCH_BUILD_DIR)")
    return path


def job_text(networks="alexnet", batches="1", phases="inference", engines="auto", cell_time_limit_s=60,
             min_steps=2, max_steps=3, target_ci=0.5, extra=""):
    return f"""
[matrix]
networks = {networks}
engines = {engines}
precisions = fp32
batches = {batches}
phases = {phases}

[measure]
warmup = 1
min_steps = {min_steps}
max_steps = {max_steps}
target_ci = {target_ci}
cell_time_limit_s = {cell_time_limit_s}
{extra}
"""


@pytest.fixture
def write_job(tmp_path):
    def write(name="job.ini", **settings):
        path = tmp_path / name
        path.write_text(job_text(**settings))
        return path
    return write


@pytest.fixture
def crossbench(binary):
    def run(*arguments, timeout=300, ranks=None, **popen):
        command = [str(binary), *map(str, arguments)]
        if ranks:
            command = ["mpirun", "--oversubscribe", "-np", str(ranks), *command]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout, **popen)
    return run


@pytest.fixture(scope="session")
def fail_writes_shim(tmp_path_factory):
    """An LD_PRELOAD library that fails writes to matching files (fail_writes.c: ENOSPC, EROFS, EIO)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler for the write-failure shim")
    library = tmp_path_factory.mktemp("shim") / "fail_writes.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", "-o", str(library),
                    str(pathlib.Path(__file__).parent / "fail_writes.c"), "-ldl"], check=True)
    return library
