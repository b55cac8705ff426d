"""Shared fixtures: where the build is, and how to run the crossbench binary."""
import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("CROSSBENCH_BUILD_DIR", REPO / "build"))

# Open MPI refuses root unless told; CI runs as root.
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")


@pytest.fixture(scope="session")
def crossbench_binary():
    binary = BUILD / "crossbench"
    if not binary.exists():
        pytest.skip(f"crossbench binary not built at {binary} (set CROSSBENCH_BUILD_DIR)")
    return binary


@pytest.fixture
def run_crossbench(crossbench_binary):
    def run(*arguments, cwd=None, timeout=300, mpi_ranks=None):
        command = [str(crossbench_binary), *map(str, arguments)]
        if mpi_ranks:
            command = ["mpirun", "--oversubscribe", "-np", str(mpi_ranks), *command]
        return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return run


# The smallest job that runs both phases on this machine's native engine (alexnet, fp32,
# batch 1, a few steps): the tests that run the binary start from it.
TINY_JOB = """
[matrix]
networks = alexnet
engines = auto
precisions = fp32
batches = 1
phases = inference, training

[measure]
warmup = 1
min_steps = 3
max_steps = 5
target_ci = 0.5
cell_time_limit_s = 60
"""


def as_text(value):
    """An HDF5 attribute (bytes or str) as str."""
    return value.decode() if isinstance(value, bytes) else str(value)
