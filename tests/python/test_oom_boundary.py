"""measure.oom_boundary: a batch sweep past memory. On this CPU a real out-of-memory: the onednn engine under
an address-space limit (prlimit --as, 3 GiB) runs alexnet training at batch 1 and 2, and runs out at 1024 and
2048 (an allocation that fails → oom). `run` (the default) runs every cell, largest first as the plan orders them; `stop`
runs the series smallest first and records 2048 oom without running, naming 1024; a resumed run learns the
boundary from its journal."""
import shutil
import subprocess

import h5py
import pytest

JOB = """
[matrix]
networks = alexnet
engines = onednn
precisions = fp32
batches = 1, 2, 1024, 2048
phases = training

[measure]
warmup = 1
min_steps = 2
max_steps = 2
target_ci = 0.5
cell_time_limit_s = 60
"""
ADDRESS_SPACE = 3 << 30  # [bytes]: batch 2 fits, batch 1024 does not
PAST = "not run: past the OOM boundary (measure.oom_boundary = stop): batch 1024"


@pytest.fixture
def limited(crossbench_binary, tmp_path):
    """Runs crossbench under the address-space limit; skips where prlimit or the onednn engine is missing."""
    if shutil.which("prlimit") is None:
        pytest.skip("prlimit (util-linux) is not installed: no way to limit the address space")
    job = tmp_path / "job.ini"
    job.write_text(JOB)

    def run(*arguments):
        command = ["prlimit", f"--as={ADDRESS_SPACE}", str(crossbench_binary), "run", "--job", str(job), *map(str, arguments)]
        return subprocess.run(command, capture_output=True, text=True, timeout=300)
    return run


def cells(cube):
    """{batch: (status, message, started_utc)} of the cube's cells."""
    with h5py.File(cube, "r") as f:
        names = {v: k for k, v in h5py.check_enum_dtype(f["status"].dtype).items()}
        batches = [int(b) for b in f["batch"][()]]
        out = {}
        for b, batch in enumerate(batches):
            at = (0, 0, 0, 0, b, 0, 0, 0)  # device, engine, network, precision, batch, ...
            out[batch] = (names[f["status"][at]], f["message"][at].decode(), f["started_utc"][at].decode())
        return out


def require_onednn(result, found):
    if found[1][0] != "ok":
        pytest.skip(f"onednn did not run here: {found[1][1]}")
    assert result.returncode == 0, result.stderr


def test_run_runs_every_cell_and_each_oom_is_its_own(limited, tmp_path):
    cube = tmp_path / "run.h5"
    result = limited("--output", cube, "--quiet")
    found = cells(cube)
    require_onednn(result, found)
    assert [found[b][0] for b in (1, 2, 1024, 2048)] == ["ok", "ok", "oom", "oom"], found
    assert PAST not in found[2048][1] and "allocating" in found[2048][1], found[2048]


def test_stop_runs_the_series_smallest_first_and_records_the_rest_at_once(limited, tmp_path):
    cube = tmp_path / "stop.h5"
    result = limited("--output", cube, "--quiet", "--set", "measure.oom_boundary=stop")
    found = cells(cube)
    require_onednn(result, found)
    assert [found[b][0] for b in (1, 2, 1024, 2048)] == ["ok", "ok", "oom", "oom"], found
    assert "allocating" in found[1024][1], found[1024]  # it ran, and ran out
    assert found[2048][1].startswith(PAST) and "batch 2048 needs more" in found[2048][1], found[2048]
    starts = [found[b][2] for b in (1, 2, 1024, 2048)]
    assert starts == sorted(starts), starts  # smallest batch first (the plan alone runs 2048 first)
    with h5py.File(cube, "r") as f:
        assert f.attrs["measure_oom_boundary"] in (b"stop", "stop")


def test_a_resumed_run_learns_the_boundary_from_its_journal(limited, tmp_path):
    cube = tmp_path / "resumed.h5"
    first = limited("--output", cube, "--quiet", "--filter", "/b1024/")
    assert first.returncode in (0, 3), first.stderr  # 3: the filter left cells not run
    resumed = limited("--output", cube, "--quiet", "--resume", "--set", "measure.oom_boundary=stop")
    found = cells(cube)
    require_onednn(resumed, found)
    assert found[1024][0] == "oom" and "allocating" in found[1024][1], found[1024]  # from the first run
    assert found[2048][0] == "oom" and found[2048][1].startswith(PAST), found[2048]
