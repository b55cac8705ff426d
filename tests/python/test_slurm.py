"""The sbatch scripts of slurm/ on a real one-node Slurm cluster (munge,
slurmctld, slurmd started by tests/slurm/cluster.sh and stopped afterwards,
also when a test fails). The node has no GPU, so the copies submitted here
drop the GPU request lines and name the test partition; everything else is
the script as shipped."""
import os
import pathlib
import re
import shutil
import subprocess
import time

import h5py
import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
CLUSTER = REPO / "tests" / "slurm" / "cluster.sh"

JOB = """
[matrix]
networks = alexnet
engines = auto
precisions = fp32
batches = 1, 2
phases = inference, training

[measure]
warmup = 1
min_steps = 2
max_steps = 3
target_ci = 0.5
"""


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    if not shutil.which("slurmctld") or not shutil.which("sbatch"):
        pytest.skip("Slurm is not installed (Debian: slurmctld slurmd slurm-client munge); scripts/test installs it")
    if os.geteuid() != 0:
        pytest.skip("starting slurmd and munged needs root")
    state = tmp_path_factory.mktemp("slurm")
    started = subprocess.run([str(CLUSTER), "start", str(state)], capture_output=True, text=True, timeout=120)
    try:
        assert started.returncode == 0, started.stderr
        # Two Slurm nodes on one host: Open MPI must talk TCP between them (see cluster.sh).
        environment = dict(os.environ, SLURM_CONF=started.stdout.strip().splitlines()[-1], OMPI_MCA_btl="self,tcp")
        yield environment
    finally:
        subprocess.run([str(CLUSTER), "stop", str(state)], capture_output=True, timeout=60)


def site_copy(script, directory, partition="debug"):
    """The shipped script, adapted as slurm/README.md tells a site: no GPUs here, the test partition."""
    text = (REPO / "slurm" / script).read_text()
    text = re.sub(r"#SBATCH --gpus-per-node=\d+\n", "", text)
    text = re.sub(r" ?--gpus-per-node=\d+", "", text)
    text = re.sub(r"--partition=[\w-]+", f"--partition={partition}", text)
    text = re.sub(r"--cpus-per-task=\d+", "--cpus-per-task=1", text)
    path = pathlib.Path(directory) / script
    path.write_text(text)
    return path


def cancel_every_job(slurm):
    """The test cluster is this module's alone: a job a failed test left queued or running would hold
    the nodes and fail every test after it (CI saw a hung job do so), so each submission ends with none."""
    listed = subprocess.run(["squeue", "-h", "-o", "%i"], env=slurm, capture_output=True, text=True, timeout=30)
    jobs = sorted({line.split("+")[0] for line in listed.stdout.split()})
    if jobs:
        subprocess.run(["scancel", *jobs], env=slurm, capture_output=True, timeout=30)


def sbatch(slurm, script, directory, environment, *options, timeout=600, time_limit_min=5):
    """sbatch --wait under a Slurm time limit (`time_limit_min`, well inside `timeout`): a job that never
    ends is ended by Slurm, and whatever is left is cancelled before the next test."""
    env = dict(slurm, **environment)
    command = ["sbatch", "--wait", "--parsable", f"--time={time_limit_min}", f"--output={directory}/slurm-%j.log",
               *options, str(script)]
    try:
        result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    finally:
        cancel_every_job(slurm)
    logs = "".join(p.read_text() for p in pathlib.Path(directory).glob("slurm-*.log"))
    return result, logs


def decoded(values):
    return [v.decode() if isinstance(v, bytes) else v for v in values]


def test_single_node_script(slurm, tmp_path, crossbench_binary):
    (tmp_path / "job.ini").write_text(JOB)
    output = tmp_path / "single.h5"
    result, log = sbatch(slurm, site_copy("single-node.sbatch", tmp_path), tmp_path,
                         {"CROSSBENCH": str(crossbench_binary), "CROSSBENCH_JOB": str(tmp_path / "job.ini"),
                          "CROSSBENCH_OUTPUT": str(output), "CROSSBENCH_ARGS": "--quiet"})
    assert result.returncode == 0, result.stderr + log
    assert "crossbench: job" in log and "4 tasks" in log
    with h5py.File(output, "r") as cube:
        assert len(cube["ranks/rank"]) == 4
        names = {v: k for k, v in h5py.check_enum_dtype(cube["status"].dtype).items()}
        assert set(np.vectorize(names.get)(cube["status"][...]).ravel()) == {"ok"}
        assert len(set(cube["rank"][...].ravel().tolist())) == 4  # 4 cells over 4 ranks


def test_heterogeneous_job_script(slurm, tmp_path, crossbench_binary):
    (tmp_path / "job.ini").write_text(JOB)
    output = tmp_path / "het.h5"
    script = site_copy("hetjob.sbatch", tmp_path)
    # Component 1 asks for 2 CPUs per task: its ranks must run 2 threads, component 0's 1.
    text = script.read_text().replace("--ntasks=4", "--ntasks=2")
    head, tail = text.split("#SBATCH hetjob\n")
    script.write_text(head + "#SBATCH hetjob\n" + tail.replace("--cpus-per-task=1", "--cpus-per-task=2", 1))
    environment = {"CROSSBENCH": str(crossbench_binary), "CROSSBENCH_JOB": str(tmp_path / "job.ini"),
                   "CROSSBENCH_OUTPUT": str(output), "CROSSBENCH_ARGS": "--quiet",
                   "CROSSBENCH_TAG0": "partition=alpha", "CROSSBENCH_TAG1": "partition=beta"}
    result, log = sbatch(slurm, script, tmp_path, environment, time_limit_min=3)
    if result.returncode != 0 and launcher_outlived_its_steps(log, output):
        # Slurm 22.05's srun of a heterogeneous step once never returned after both components' steps
        # had ended (slurmd: "[2.0] done with job", "[3.0] done with job" 7 s after the launch) and
        # crossbench had written the cube: the job held both nodes until its time limit (CI, 2026-12-02).
        # That is the launcher's, not the script's: the job runs once more, from a clean output.
        for leftover in (output, pathlib.Path(str(output) + ".journal"), *tmp_path.glob("slurm-*.log")):
            leftover.unlink(missing_ok=True)
        result, log = sbatch(slurm, script, tmp_path, environment, time_limit_min=3)
    assert result.returncode == 0, result.stderr + log
    with h5py.File(output, "r") as cube:
        devices = decoded(cube["device"][...])
        assert len(devices) == 2
        assert any("[partition=alpha]" in d for d in devices) and any("[partition=beta]" in d for d in devices)
        assert len(cube["ranks/rank"]) == 4
        names = {v: k for k, v in h5py.check_enum_dtype(cube["status"].dtype).items()}
        status = np.vectorize(names.get)(cube["status"][...])
        assert (status == "ok").all()  # each partition's complete matrix
        threads = dict(zip(decoded(cube["ranks/device_key"][...]), cube["ranks/threads"][...].tolist()))
    assert [threads[d] for d in sorted(threads)] == [1, 2], threads  # alpha: 1 CPU per task, beta: 2


def launcher_outlived_its_steps(log, output):
    """The job ended at its time limit after crossbench had written the whole cube: its srun never
    returned, though every task had exited."""
    return "DUE TO TIME LIMIT" in log and "crossbench: wrote" in log and output.exists()


def interrupted_sweep(slurm, tmp_path, crossbench_binary, **environment):
    """Submit the long sweep, send USR1 (the time-limit warning) once its first
    cell is in the journal, and wait until the job has left the queue for good
    (requeued, run again, completed; or stopped). Returns the cube path, the
    journal and the job's log."""
    (tmp_path / "job.ini").write_text(JOB.replace("networks = alexnet", "networks = alexnet, googlenet"))
    output = tmp_path / "sweep.h5"
    script = site_copy("long-sweep.sbatch", tmp_path)
    script.write_text(script.read_text().replace("--ntasks-per-node=4", "--ntasks-per-node=2"))
    env = dict(slurm, CROSSBENCH=str(crossbench_binary), CROSSBENCH_JOB=str(tmp_path / "job.ini"),
               CROSSBENCH_OUTPUT=str(output), CROSSBENCH_ARGS="--quiet", **environment)
    submitted = subprocess.run(["sbatch", "--parsable", f"--output={tmp_path}/sweep-%j.log", str(script)],
                               cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]
    journal = pathlib.Path(str(output) + ".journal")
    deadline = time.time() + 300
    while time.time() < deadline and not (journal.exists() and '"type":"result"' in journal.read_text()):
        time.sleep(0.2)
    assert journal.exists(), "the first start wrote no result"
    subprocess.run(["scancel", "--signal=USR1", job_id], env=env, check=True, timeout=30)
    deadline = time.time() + 600
    while time.time() < deadline:
        state = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], env=env, capture_output=True, text=True).stdout
        if not state.strip():
            break
        time.sleep(1)
    cancel_every_job(slurm)
    return output, journal, "".join(p.read_text() for p in tmp_path.glob("sweep-*.log"))


def test_long_sweep_requeues_and_resumes(slurm, tmp_path, crossbench_binary):
    """USR1 (the time-limit warning) → the run stops after its cell, exits 3, the
    script requeues the job, the second start resumes the journal to the end."""
    output, journal, log = interrupted_sweep(slurm, tmp_path, crossbench_binary)
    assert "requeueing" in log and "requeue 1 of at most 5" in log, log
    assert "start 2" in log, log
    with h5py.File(output, "r") as cube:
        assert decoded([cube.attrs["run_state"]])[0] == "complete", log
        names = {v: k for k, v in h5py.check_enum_dtype(cube["status"].dtype).items()}
        assert (np.vectorize(names.get)(cube["status"][...]) == "ok").all()
    results = [l for l in journal.read_text().splitlines() if '"type":"result"' in l]
    assert len(results) == 8  # every cell once, none twice


SCRIPTS = sorted(p.name for p in (REPO / "slurm").glob("*.sbatch"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_is_benchmark_grade(script):
    """Exclusive nodes; all of a node's GPUs visible to each task (no per-task
    GPU cgroup, so NCCL keeps CUDA IPC and NVLink); fork-safe verbs; the power
    cap of slurm/common.sh."""
    text = (REPO / "slurm" / script).read_text()
    assert "--exclusive" in text
    assert "--gpus-per-task" not in text and "--gpus-per-node=" in text
    assert "--gpu-bind=none" in text
    assert "export RDMAV_FORK_SAFE=1" in text
    assert "source \"$CROSSBENCH_SLURM_DIR/common.sh\"" in text and "crossbench_power_cap" in text


def test_long_sweep_keeps_the_signal_lead_time():
    assert "#SBATCH --signal=USR1@600" in (REPO / "slurm" / "long-sweep.sbatch").read_text()


DATA_PARALLEL_JOB = """
[matrix]
networks = alexnet
engines = auto
precisions = fp32
batches = 1
phases = training
gpus = 1, 2

[measure]
warmup = 1
min_steps = 2
max_steps = 3
target_ci = 0.5
update = sgd
learning_rate = 0.001
"""


def test_data_parallel_script(slurm, tmp_path, crossbench_binary):
    (tmp_path / "dp.ini").write_text(DATA_PARALLEL_JOB)
    output = tmp_path / "dp.h5"
    script = site_copy("data-parallel.sbatch", tmp_path)
    script.write_text(script.read_text().replace("--ntasks-per-node=4", "--ntasks-per-node=2"))
    result, log = sbatch(slurm, script, tmp_path,
                         {"CROSSBENCH": str(crossbench_binary), "CROSSBENCH_JOB": str(tmp_path / "dp.ini"),
                          "CROSSBENCH_OUTPUT": str(output), "CROSSBENCH_ARGS": "--quiet"})
    assert result.returncode == 0, result.stderr + log
    with h5py.File(output, "r") as cube:
        assert cube["gpus"][...].tolist() == [1, 2]
        names = {v: k for k, v in h5py.check_enum_dtype(cube["status"].dtype).items()}
        status = np.vectorize(names.get)(cube["status"][...])
        assert (status == "ok").all(), status
        efficiency = cube["scaling_efficiency"][...][..., 1, :]
        assert np.isfinite(efficiency).all() and (efficiency > 0).all()


def test_a_power_cap_that_cannot_be_applied_refuses_the_job(slurm, tmp_path, crossbench_binary):
    """No nvidia-smi on the test node: the job asked for 250 W, so it must not
    run uncapped under a power tag; it exits 2 with the reason, no cube."""
    (tmp_path / "job.ini").write_text(JOB)
    output = tmp_path / "capped.h5"
    result, log = sbatch(slurm, site_copy("single-node.sbatch", tmp_path), tmp_path,
                         {"CROSSBENCH": str(crossbench_binary), "CROSSBENCH_JOB": str(tmp_path / "job.ini"),
                          "CROSSBENCH_OUTPUT": str(output), "CROSSBENCH_POWER_CAP_W": "250"})
    assert result.returncode == 2, log   # sbatch --wait exits with the job's status
    assert "refused: the job asked for a power cap of 250 W" in log, log
    assert "nvidia-smi not found" in log, log
    assert not output.exists()


def test_long_sweep_stops_requeueing_at_the_cap(slurm, tmp_path, crossbench_binary):
    output, journal, log = interrupted_sweep(slurm, tmp_path, crossbench_binary, CROSSBENCH_MAX_REQUEUES="0")
    assert "not requeueing" in log and "CROSSBENCH_MAX_REQUEUES=0" in log, log
    assert "start 2" not in log, log
    with h5py.File(output, "r") as cube:
        assert decoded([cube.attrs["run_state"]])[0] != "complete", log
