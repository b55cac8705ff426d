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
    text = re.sub(r" ?--gpus-per-task=\d+", "", text)
    text = text.replace("#SBATCH --gpus-per-task=1\n", "")
    text = re.sub(r"--partition=[\w-]+", f"--partition={partition}", text)
    text = re.sub(r"--cpus-per-task=\d+", "--cpus-per-task=1", text)
    path = pathlib.Path(directory) / script
    path.write_text(text)
    return path


def sbatch(slurm, script, directory, environment, *options, timeout=600):
    env = dict(slurm, **environment)
    command = ["sbatch", "--wait", "--parsable", f"--output={directory}/slurm-%j.log", *options, str(script)]
    result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
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
    script.write_text(script.read_text().replace("--ntasks=4", "--ntasks=2"))
    result, log = sbatch(slurm, script, tmp_path,
                         {"CROSSBENCH": str(crossbench_binary), "CROSSBENCH_JOB": str(tmp_path / "job.ini"),
                          "CROSSBENCH_OUTPUT": str(output), "CROSSBENCH_ARGS": "--quiet",
                          "CROSSBENCH_TAG0": "partition=alpha", "CROSSBENCH_TAG1": "partition=beta"})
    assert result.returncode == 0, result.stderr + log
    with h5py.File(output, "r") as cube:
        devices = decoded(cube["device"][...])
        assert len(devices) == 2
        assert any("[partition=alpha]" in d for d in devices) and any("[partition=beta]" in d for d in devices)
        assert len(cube["ranks/rank"]) == 4
        names = {v: k for k, v in h5py.check_enum_dtype(cube["status"].dtype).items()}
        status = np.vectorize(names.get)(cube["status"][...])
        assert (status == "ok").all()  # each partition's complete matrix


def test_long_sweep_requeues_and_resumes(slurm, tmp_path, crossbench_binary):
    """USR1 (the time-limit warning) → the run stops after its cell, exits 3, the
    script requeues the job, the second start resumes the journal to the end."""
    (tmp_path / "job.ini").write_text(JOB.replace("networks = alexnet", "networks = alexnet, googlenet"))
    output = tmp_path / "sweep.h5"
    script = site_copy("long-sweep.sbatch", tmp_path)
    script.write_text(script.read_text().replace("--ntasks-per-node=4", "--ntasks-per-node=2"))
    env = dict(slurm, CROSSBENCH=str(crossbench_binary), CROSSBENCH_JOB=str(tmp_path / "job.ini"),
               CROSSBENCH_OUTPUT=str(output), CROSSBENCH_ARGS="--quiet")
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
    # Wait for the job to leave the queue for good (requeued, run again, completed).
    deadline = time.time() + 600
    while time.time() < deadline:
        state = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], env=env, capture_output=True, text=True).stdout
        if not state.strip():
            break
        time.sleep(1)
    log = "".join(p.read_text() for p in tmp_path.glob("sweep-*.log"))
    assert "requeueing" in log, log
    assert "start 2" in log, log
    with h5py.File(output, "r") as cube:
        assert decoded([cube.attrs["run_state"]])[0] == "complete", log
        names = {v: k for k, v in h5py.check_enum_dtype(cube["status"].dtype).items()}
        assert (np.vectorize(names.get)(cube["status"][...]) == "ok").all()
    results = [l for l in journal.read_text().splitlines() if '"type":"result"' in l]
    assert len(results) == 8  # every cell once, none twice
