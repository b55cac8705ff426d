"""Data-parallel training through the command line, under real mpirun with 4
ranks on this CPU (oneDNN engine, MPI communicator): the cube's `gpus` axis,
the group's throughput, scaling efficiency and exposed communication, the plan's
co-scheduling, and the cells a run cannot form."""
import pathlib

import h5py
import numpy as np
import pytest
import xarray as xr

JOB = """
[matrix]
networks = alexnet
engines = onednn
precisions = fp32
batches = 1
phases = inference, training
gpus = 1, 2, 4

[measure]
warmup = 1
min_steps = 3
max_steps = 4
target_ci = 0.5
cell_time_limit_s = 300
update = sgd
learning_rate = 0.001
"""


def write_job(directory, text=JOB):
    path = pathlib.Path(directory) / "dp.ini"
    path.write_text(text)
    return path


def status_names(cube):
    names = {value: name for name, value in h5py.check_enum_dtype(cube["status"].dtype).items()}
    return np.vectorize(names.get)(cube["status"][...])


@pytest.fixture(scope="module")
def four_rank_run(tmp_path_factory, crossbench_binary):
    import subprocess
    directory = tmp_path_factory.mktemp("dp")
    job = write_job(directory)
    cube = directory / "dp.h5"
    completed = subprocess.run(["mpirun", "--oversubscribe", "-np", "4", "-x", "OMP_NUM_THREADS=1",
                                str(crossbench_binary), "run", "--job", str(job), "--output", str(cube)],
                               capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed, cube


def test_the_cube_has_a_gpus_axis_with_1_2_and_4_filled(four_rank_run):
    completed, cube_path = four_rank_run
    data = xr.open_dataset(cube_path)
    assert list(data["gpus"].values) == [1, 2, 4]
    assert data["status"].dims == ("device", "engine", "network", "precision", "batch", "phase", "gpus", "replica")
    with h5py.File(cube_path, "r") as cube:
        status = status_names(cube)
        training = list(cube["phase"].asstr()[...]).index("training")
        inference = list(cube["phase"].asstr()[...]).index("inference")
        assert list(status[0, 0, 0, 0, 0, training, :, 0]) == ["ok", "ok", "ok"], completed.stdout
        # Inference stays single-device: its gpus > 1 cells say so.
        assert list(status[0, 0, 0, 0, 0, inference, :, 0]) == ["ok", "unsupported", "unsupported"]
        message = cube["message"].asstr()[0, 0, 0, 0, 0, inference, 1, 0]
        assert "single-device" in message


def test_group_throughput_efficiency_and_exposed_communication(four_rank_run):
    _, cube_path = four_rank_run
    data = xr.open_dataset(cube_path).sel(phase="training", replica=0).squeeze()
    median = data["median_ms"].values
    images = data["images_per_s"].values
    # images/s of a group: gpus * batch (1 per device) per median step.
    np.testing.assert_allclose(images, np.array([1, 2, 4]) * 1000.0 / median, rtol=1e-9)
    efficiency = data["scaling_efficiency"].values
    assert np.isnan(efficiency[0])
    np.testing.assert_allclose(efficiency[1:], images[1:] / (np.array([2, 4]) * images[0]), rtol=1e-9)
    exposed = data["exposed_communication_ms"].values
    assert np.isnan(exposed[0])
    assert np.all(exposed[1:] >= 0) and np.all(exposed[1:] <= median[1:])
    with h5py.File(cube_path, "r") as cube:
        decisions = cube["decisions"].asstr()[0, 0, 0, 0, 0, 1, 2, 0]
        assert decisions.startswith("data parallel over ranks 0,1,2,3"), decisions
        assert "buckets" in decisions and "mpi" in decisions
        schema = cube.attrs["schema"]
        assert (schema.decode() if isinstance(schema, bytes) else schema) == "crossbench-cube/4"


def test_the_table_shows_gpus_and_scaling(four_rank_run):
    completed, _ = four_rank_run
    header = next(line for line in completed.stdout.splitlines() if line.startswith("device"))
    assert "gpus" in header and "scaling" in header and "comm_ms" in header


def test_plan_says_which_ranks_train_which_cell_together(run_crossbench, tmp_path):
    job = write_job(tmp_path)
    result = run_crossbench("plan", "--ranks", "4", "--job", job, "--gpus", "1,2,4,8")
    assert result.returncode == 0, result.stderr
    assert "data parallel with ranks 0,1,2,3" in result.stdout
    assert "data-parallel cells (run first" in result.stdout
    # Two disjoint pairs would be co-scheduled; gpus = 8 cannot form on 4 ranks.
    assert "unsupported: data parallel over 8 devices needs 8 ranks" in result.stdout


def test_two_pairs_run_side_by_side_on_four_ranks(run_crossbench, tmp_path):
    job = write_job(tmp_path, JOB.replace("networks = alexnet", "networks = alexnet, googlenet")
                    .replace("gpus = 1, 2, 4", "gpus = 2"))
    result = run_crossbench("plan", "--ranks", "4", "--job", job)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if "/g2/" in line and "ranks" in line and "data parallel" not in line]
    groups = {line.split("ranks")[-1].strip() for line in lines}
    assert groups == {"0,1", "2,3"}, result.stdout


@pytest.mark.parametrize("value", ["0", "two", "1,1"])
def test_bad_gpus_values_are_refused(run_crossbench, tmp_path, value):
    job = write_job(tmp_path)
    result = run_crossbench("run", "--job", job, "--gpus", value, "--output", tmp_path / "x.h5")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "gpus" in result.stderr
    assert not (tmp_path / "x.h5").exists()


def test_a_group_out_of_time_ends_together_and_the_next_cells_run(tmp_path, crossbench_binary):
    """Both ranks of a group take the time-limit decision together: the cell is
    `timeout` on every rank (no rank left waiting in an all-reduce) and the
    single-device cells after it run."""
    import subprocess
    job = write_job(tmp_path, JOB.replace("gpus = 1, 2, 4", "gpus = 1, 2")
                    .replace("cell_time_limit_s = 300", "cell_time_limit_s = 1.5")
                    .replace("min_steps = 3", "min_steps = 50").replace("max_steps = 4", "max_steps = 60"))
    cube_path = tmp_path / "limit.h5"
    completed = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", "-x", "OMP_NUM_THREADS=1",
                                str(crossbench_binary), "run", "--job", str(job), "--output", str(cube_path)],
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    with h5py.File(cube_path, "r") as cube:
        status = status_names(cube)
        training = list(cube["phase"].asstr()[...]).index("training")
        assert status[0, 0, 0, 0, 0, training, 1, 0] == "timeout", completed.stdout
        message = cube["message"].asstr()[0, 0, 0, 0, 0, training, 1, 0]
        assert "time limit" in message, message
        # Every other cell was attempted and ended with a final status.
        assert "not_run" not in set(status.ravel()), completed.stdout
