"""`crossbench run --layer-times`: a real two-rank run of AlexNet at batch 1
(inference and training, so one cell's layer times reach rank 0 over MPI),
its printed per-layer tables, and the /layer_times groups of its cube read
through xarray and h5py; the option's bad values exit 2."""
import pathlib
import re

import h5py
import numpy as np
import pytest
import xarray
from conftest import TINY_JOB


# AlexNet as src/networks/alexnet.cpp builds it, between its input and loss layers: every layer has a row.
ALEXNET = ["conv1", "relu1", "pool1", "conv2", "relu2", "pool2", "conv3", "relu3", "conv4", "relu4", "conv5",
           "relu5", "pool5", "flatten", "drop6", "fc6", "relu6", "drop7", "fc7", "relu7", "fc8"]


def write_job(directory):
    path = pathlib.Path(directory) / "job.ini"
    path.write_text(TINY_JOB)
    return path


@pytest.fixture(scope="module")
def profiled_run(tmp_path_factory, crossbench_binary):
    import subprocess
    directory = tmp_path_factory.mktemp("layer_times")
    job = write_job(directory)
    output = directory / "cube.h5"
    command = ["mpirun", "--oversubscribe", "-np", "2", str(crossbench_binary), "run", "--job", str(job),
               "--output", str(output), "--layer-times=all", "--set", "measure.layer_time_repetitions=3"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr + result.stdout
    return result, output


def layer_tables(stdout):
    """{phase: [(layer, kind, forward, backward, share), ...]} from the printed tables, in printed order."""
    tables, current = {}, None
    for line in stdout.splitlines():
        heading = re.match(r".* \| onednn alexnet fp32 batch 1 (inference|training): layers sum", line)
        if heading:
            current = tables.setdefault(heading.group(1), [])
            continue
        row = re.match(r"^  (\S+)\s+(\S+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)$", line)
        if current is not None and row:
            current.append((row.group(1), row.group(2), float(row.group(3)), float(row.group(4)), float(row.group(5))))
    return tables


def test_printed_tables_list_every_layer_sorted_by_time(profiled_run):
    """--layer-times=all prints every layer (plain --layer-times: the 10 slowest, test_rough_edges.py)."""
    result, _ = profiled_run
    stdout = result.stdout
    assert "Layer times (--layer-times)" in stdout
    assert stdout.index("median_ms") < stdout.index("Layer times"), "the layer tables follow the results table"
    assert "median over 3 profiled steps" in stdout
    tables = layer_tables(stdout)
    assert set(tables) == {"inference", "training"}, stdout
    for phase, rows in tables.items():
        names = [row[0] for row in rows]
        assert sorted(names[i] for i in range(len(names)) if names[i] in ALEXNET) == sorted(ALEXNET), (phase, names)
        assert len(names) == len(ALEXNET) + 2 == len(set(names)), (phase, names)  # + input and loss
        totals = [row[2] + row[3] for row in rows]
        # Printed with 3 decimals: sorted by forward + backward, allowing for rounding.
        assert all(a >= b - 2e-3 for a, b in zip(totals, totals[1:])), (phase, totals)
        assert abs(sum(row[4] for row in rows) - 100.0) < 0.1 * len(rows), phase
        assert all(row[2] >= 0 and row[3] >= 0 for row in rows)
        if phase == "inference":
            assert all(row[3] == 0 for row in rows)
        else:
            assert any(row[3] > 0 for row in rows)
    # The headline table still has both cells with a median.
    assert re.search(r"onednn\s+alexnet\s+fp32\s+1\s+1 inference\s+ok\s+[0-9.]+", stdout)
    assert re.search(r"onednn\s+alexnet\s+fp32\s+1\s+1 training\s+ok\s+[0-9.]+", stdout)


def kind_sums(stdout):
    """{phase: {kind: (forward, backward, share)}} from each cell's "by kind:" line."""
    sums, current = {}, None
    for line in stdout.splitlines():
        heading = re.match(r".* \| onednn alexnet fp32 batch 1 (inference|training): layers sum", line)
        if heading:
            current = heading.group(1)
            continue
        if current is not None and line.startswith("  by kind: "):
            sums[current] = {m.group(1): (float(m.group(2)), float(m.group(3)), float(m.group(4)))
                             for m in re.finditer(r"(\S+) ([0-9.]+)\+([0-9.]+) ms \(([0-9.]+)%\)", line)}
    return sums


def test_printed_kind_sums_add_up_the_layers_of_each_kind(profiled_run):
    """After each cell's table, one line sums its layers per kind (forward + backward, share of the step),
    largest first: each kind's sums are its printed rows' sums, and the shares add up to 100%."""
    result, _ = profiled_run
    tables, sums = layer_tables(result.stdout), kind_sums(result.stdout)
    assert set(sums) == {"inference", "training"}, result.stdout
    for phase, rows in tables.items():
        kinds = sums[phase]
        assert set(kinds) == {row[1] for row in rows}, (phase, kinds)
        for kind, (forward, backward, _) in kinds.items():
            of_kind = [row for row in rows if row[1] == kind]
            # Each printed value is rounded to 3 decimals.
            assert abs(forward - sum(row[2] for row in of_kind)) <= 1e-3 * (len(of_kind) + 1), (phase, kind)
            assert abs(backward - sum(row[3] for row in of_kind)) <= 1e-3 * (len(of_kind) + 1), (phase, kind)
        assert abs(sum(share for _, _, share in kinds.values()) - 100.0) < 0.1 * len(kinds), (phase, kinds)
        totals = [forward + backward for forward, backward, _ in kinds.values()]
        assert all(a >= b - 2e-3 for a, b in zip(totals, totals[1:])), (phase, totals)
        assert "convolution" in kinds and kinds["convolution"][0] > 0, (phase, kinds)


def test_cube_holds_layer_times_that_xarray_and_h5py_read(profiled_run):
    _, output = profiled_run
    cube = xarray.open_dataset(output)
    medians = cube["median_ms"].values.ravel()
    assert medians.size == 2 and np.all(np.isfinite(medians)) and np.all(medians > 0)
    assert "layer" not in cube.dims, "the main variables keep their dimensions"
    assert cube.attrs["measure_layer_times"] == "all"
    assert cube.attrs["measure_layer_time_repetitions"] == "3"

    index = xarray.open_dataset(output, group="layer_times")
    assert index.sizes["profiled_cell"] == 2
    assert sorted(index["phase"].values.tolist()) == ["inference", "training"]
    assert set(index["network"].values.tolist()) == {"alexnet"}
    status_shape = cube["status"].shape
    for row in range(2):
        name = str(index["group"].values[row])
        position = np.unravel_index(int(name.removeprefix("cell_")), status_shape)
        phase = str(index["phase"].values[row])
        assert str(cube["phase"].values[position[5]]) == phase  # the group's number is the cell's place
        cell = xarray.open_dataset(output, group=f"layer_times/{name}")
        assert cell.attrs["network"] == "alexnet" and cell.attrs["phase"] == phase
        assert int(cell.attrs["batch"]) == 1
        assert cell["forward_ms"].dims == ("layer",)
        assert cell["forward_ms"].attrs["units"] == "ms"
        layers = cell["layer"].values.tolist()
        assert layers[1:-1] == ALEXNET, layers  # network order, the input and the loss around it
        forward, backward = cell["forward_ms"].values, cell["backward_ms"].values
        assert np.all(forward >= 0) and np.all(backward >= 0) and forward.sum() > 0
        conv = cell["kind"].values.tolist().count("convolution")
        assert conv == 5
        if phase == "inference":
            assert np.all(backward == 0)
        else:
            assert backward.sum() > 0

    with h5py.File(output, "r") as f:
        group = f["layer_times"]
        names = [n.decode() if isinstance(n, bytes) else n for n in group["group"][...]]
        for name in names:
            sub = group[name]
            assert sub["forward_ms"].shape == sub["layer"].shape == sub["kind"].shape == sub["backward_ms"].shape
            assert h5py.check_string_dtype(sub["layer"].dtype) is not None


BAD_VALUES = {
    "measure.layer_times=maybe": ["layer_times", "'maybe'", "valid: false, true, all"],
    "measure.layer_time_repetitions=0": ["layer_time_repetitions", "out of range"],
    "measure.layer_time_repetitions=many": ["layer_time_repetitions", "integer"],
}


@pytest.mark.parametrize("assignment", sorted(BAD_VALUES))
def test_bad_layer_time_settings_exit_2(assignment, tmp_path, run_crossbench):
    job = write_job(tmp_path)
    output = tmp_path / "o.h5"
    result = run_crossbench("run", "--job", job, "--set", assignment, "--output", output)
    assert result.returncode == 2, result.stderr
    for fragment in BAD_VALUES[assignment]:
        assert fragment in result.stderr, (fragment, result.stderr)
    assert not output.exists()
