"""The results cube as analysis tools see it: xarray, h5py and netCDF4.

The cube comes from the C++ program `write_sample_cube` (tests/cube/), which
writes the sample of tests/cube/sample_cube.hpp; the values checked here are
those of that header. The program is found in $CROSSBENCH_BUILD_DIR (default
/work/main/build); the tests are skipped when it has not been built.

Run with Debian's Python (it has h5py, xarray, netCDF4):
    CROSSBENCH_BUILD_DIR=build /usr/bin/python3 -m pytest -q tests/python/test_cube_xarray.py
"""

import math
import os
import subprocess
from pathlib import Path

import pytest

h5py = pytest.importorskip("h5py")
xarray = pytest.importorskip("xarray")
netCDF4 = pytest.importorskip("netCDF4")
import numpy as np  # noqa: E402  (after the skips: numpy comes with them)

BUILD_DIR = Path(os.environ.get("CROSSBENCH_BUILD_DIR", "/work/main/build"))
GPU = "NVIDIA H200 (132 SMs, sm_9.0, 140.0 GiB)"
CPU = "CPU Intel(R) Xeon(R) Platinum 8480+ (16 threads, avx512_core_amx, 503.5 GiB)"
CELL_DIMS = ("device", "engine", "network", "precision", "batch", "phase", "gpus", "replica")
FLOAT_VARIABLES = ("median_ms", "mean_ms", "std_ms", "min_ms", "max_ms", "p05_ms", "p95_ms",
                   "ci_low_ms", "ci_high_ms", "images_per_s", "tflops", "peak_memory_bytes",
                   "energy_j_per_image", "mean_sm_clock_mhz", "min_sm_clock_mhz", "mean_power_w",
                   "max_temperature_c", "exposed_communication_ms", "scaling_efficiency")
VARIABLES = ("status",) + FLOAT_VARIABLES + ("throttled", "steps", "rank", "message", "decisions",
                                             "samples_ms")
STATUS_CODES = {"not_run": 0, "ok": 1, "oom": 2, "unsupported": 3, "failed": 4, "timeout": 5}

# (device, engine, network, precision, batch, phase, gpus, replica) of the sample's cells.
OK_FIVE = dict(device=GPU, engine="cudnn", network="alexnet", precision="fp32", batch=64,
               phase="inference", gpus=1, replica=0)
OK_THREE = dict(OK_FIVE, replica=1)
OOM = dict(device=GPU, engine="cudnn", network="resnet50", precision="fp32", batch=128,
           phase="training", gpus=1, replica=0)
UNSUPPORTED = dict(device=CPU, engine="onednn", network="alexnet", precision="fp16", batch=64,
                   phase="inference", gpus=1, replica=0)
FAILED = dict(device=CPU, engine="onednn", network="resnet50", precision="fp32", batch=64,
              phase="training", gpus=1, replica=1)
TIMEOUT = dict(device=GPU, engine="cudnn", network="resnet50", precision="fp16", batch=128,
               phase="inference", gpus=1, replica=1)
OK_CPU = dict(device=CPU, engine="onednn", network="resnet50", precision="fp32", batch=128,
              phase="inference", gpus=1, replica=0)
PARALLEL = dict(device=GPU, engine="cudnn", network="resnet50", precision="fp32", batch=64,
                phase="training", gpus=2, replica=0)
NOT_RUN = dict(device=CPU, engine="cudnn", network="alexnet", precision="fp32", batch=64,
               phase="training", gpus=1, replica=0)


@pytest.fixture(scope="module")
def cube_path(tmp_path_factory):
    candidates = [BUILD_DIR / "tests" / "write_sample_cube", BUILD_DIR / "write_sample_cube"]
    writer = next((path for path in candidates if path.is_file()), None)
    if writer is None:
        pytest.skip(f"{candidates[0]} is missing: build the target write_sample_cube, or set "
                    f"CROSSBENCH_BUILD_DIR to the build directory that has it")
    path = tmp_path_factory.mktemp("cube") / "sample.h5"
    subprocess.run([str(writer), str(path)], check=True)
    return path


@pytest.fixture(scope="module")
def dataset(cube_path):
    with xarray.open_dataset(cube_path) as opened:
        yield opened.load()


def test_dimensions_and_coordinates(dataset):
    # `repetition` (schema 4, --repetitions): one column, all NaN, when no cell repeated.
    assert set(dataset.dims) == set(CELL_DIMS) | {"step", "repetition"}
    assert dict(dataset.sizes) == {"device": 2, "engine": 2, "network": 2, "precision": 2,
                                   "batch": 2, "phase": 2, "gpus": 2, "replica": 2, "step": 5, "repetition": 1}
    assert np.isnan(dataset["repetition_median_ms"].values).all()
    assert list(dataset["device"].values) == [GPU, CPU]
    assert list(dataset["engine"].values) == ["cudnn", "onednn"]
    assert list(dataset["precision"].values) == ["fp32", "fp16"]
    assert list(dataset["batch"].values) == [64, 128]
    assert dataset["batch"].dtype == np.int64
    assert list(dataset["phase"].values) == ["inference", "training"]
    assert list(dataset["gpus"].values) == [1, 2]
    assert list(dataset["replica"].values) == [0, 1]
    assert list(dataset["step"].values) == [0, 1, 2, 3, 4]


def test_every_variable_is_present_over_the_cell_dimensions(dataset):
    for name in VARIABLES:
        assert name in dataset.data_vars, name
        expected = CELL_DIMS + (("step",) if name == "samples_ms" else ())
        assert dataset[name].dims == expected, name
    for name in FLOAT_VARIABLES + ("samples_ms",):
        assert dataset[name].dtype == np.float64, name
        assert "units" in dataset[name].attrs and "long_name" in dataset[name].attrs, name
    assert dataset["median_ms"].attrs["units"] == "ms"
    assert dataset["images_per_s"].attrs["units"] == "images/s"
    assert dataset["tflops"].attrs["units"] == "TFLOP/s"
    assert dataset["peak_memory_bytes"].attrs["units"] == "bytes"
    assert dataset["energy_j_per_image"].attrs["units"] == "J/image"
    assert dataset["mean_sm_clock_mhz"].attrs["units"] == "MHz"
    assert dataset["min_sm_clock_mhz"].attrs["units"] == "MHz"
    assert dataset["mean_power_w"].attrs["units"] == "W"
    assert dataset["max_temperature_c"].attrs["units"] == "degC"


def test_root_attributes(dataset):
    assert dataset.attrs["schema"] == "crossbench-cube/4"
    assert dataset.attrs["git_revision"] == "0123456789ab"
    assert dataset.attrs["job_file"] == "[matrix]\nnetworks = alexnet, resnet50\nbatches = 64, 128\n"
    assert dataset.attrs["cuda_runtime_version"] == ""
    assert dataset.attrs["hdf5_version"].count(".") == 2


def test_values_of_the_cells(dataset):
    status = dataset["status"]
    assert int(status.sel(OK_FIVE)) == STATUS_CODES["ok"]
    assert int(status.sel(OOM)) == STATUS_CODES["oom"]
    assert int(status.sel(UNSUPPORTED)) == STATUS_CODES["unsupported"]
    assert int(status.sel(FAILED)) == STATUS_CODES["failed"]
    assert int(status.sel(TIMEOUT)) == STATUS_CODES["timeout"]
    assert int(status.sel(NOT_RUN)) == STATUS_CODES["not_run"]
    assert int(status.sel(PARALLEL)) == STATUS_CODES["ok"]
    assert int((status != STATUS_CODES["not_run"]).sum()) == 8

    assert float(dataset["median_ms"].sel(OK_FIVE)) == 1.5
    assert float(dataset["min_ms"].sel(OK_FIVE)) == 1.25
    assert float(dataset["max_ms"].sel(OK_FIVE)) == 1.75
    assert float(dataset["median_ms"].sel(OK_THREE)) == 1.5
    assert float(dataset["median_ms"].sel(OK_CPU)) == 40.5
    assert float(dataset["images_per_s"].sel(OK_FIVE)) == pytest.approx(64 / 1.5e-3)
    assert float(dataset["peak_memory_bytes"].sel(OK_FIVE)) == 2.5e9
    assert int(dataset["throttled"].sel(OK_FIVE)) == 0
    # The telemetry over the timed steps (sample_cube.hpp's ok cells).
    assert float(dataset["mean_sm_clock_mhz"].sel(OK_FIVE)) == 1980.0
    assert float(dataset["min_sm_clock_mhz"].sel(OK_FIVE)) == 1755.0
    assert float(dataset["mean_power_w"].sel(OK_FIVE)) == 612.5
    assert float(dataset["max_temperature_c"].sel(OK_FIVE)) == 57.0
    assert int(dataset["steps"].sel(OK_FIVE)) == 5
    assert int(dataset["rank"].sel(OK_THREE)) == 1
    # The data-parallel cell: the group's throughput and its two variables.
    assert float(dataset["median_ms"].sel(PARALLEL)) == 30.0
    assert float(dataset["images_per_s"].sel(PARALLEL)) == pytest.approx(2 * 64 / 30e-3)
    assert float(dataset["exposed_communication_ms"].sel(PARALLEL)) == 1.25
    assert float(dataset["scaling_efficiency"].sel(PARALLEL)) == 0.95
    assert math.isnan(float(dataset["scaling_efficiency"].sel(OK_FIVE)))
    assert dataset["exposed_communication_ms"].attrs["units"] == "ms"
    assert dataset["scaling_efficiency"].attrs["units"] == "1"

    # Numbers are NaN wherever the status is not ok.
    not_ok = status != STATUS_CODES["ok"]
    for name in FLOAT_VARIABLES:
        assert bool(dataset[name].where(not_ok).isnull().all()), name
    assert int(dataset["throttled"].sel(OOM)) == -1
    assert int(dataset["rank"].sel(NOT_RUN)) == -1

    assert str(dataset["message"].sel(OOM).item()) == "out of memory"
    assert str(dataset["message"].sel(UNSUPPORTED).item()) == "onednn: fp16 needs avx512_fp16"
    assert str(dataset["message"].sel(FAILED).item()) == "NaN loss"
    assert str(dataset["message"].sel(NOT_RUN).item()) == ""
    assert str(dataset["decisions"].sel(OK_FIVE).item()).startswith("conv1 fwd=")
    assert str(dataset["decisions"].sel(OOM).item()) == ""


def test_samples_are_nan_padded(dataset):
    samples = dataset["samples_ms"]
    assert list(samples.sel(OK_FIVE).values) == [1.5, 1.25, 1.75, 1.5, 1.5]
    three = samples.sel(OK_THREE).values
    assert list(three[:3]) == [1.6, 1.4, 1.5] and all(math.isnan(x) for x in three[3:])
    timeout = samples.sel(TIMEOUT).values
    assert list(timeout[:2]) == [9.5, 9.75] and all(math.isnan(x) for x in timeout[2:])
    assert bool(samples.sel(NOT_RUN).isnull().all())
    # The median over the steps is the stored median: the samples are the raw data.
    assert float(samples.sel(OK_FIVE).median("step")) == float(dataset["median_ms"].sel(OK_FIVE))


def test_h5py_decodes_status_to_its_names(cube_path):
    with h5py.File(cube_path, "r") as file:
        status = file["status"]
        names_of = h5py.check_enum_dtype(status.dtype)
        assert names_of == STATUS_CODES
        assert isinstance(file["status_t"], h5py.Datatype), "status_t is a committed type"
        code_to_name = {code: name for name, code in names_of.items()}
        codes = status[...]
        # device 0 (GPU), cudnn, alexnet, fp32, batch 64, inference, gpus 1, replica 0 / 1
        assert code_to_name[int(codes[0, 0, 0, 0, 0, 0, 0, 0])] == "ok"
        assert code_to_name[int(codes[0, 0, 1, 0, 1, 1, 0, 0])] == "oom"
        assert code_to_name[int(codes[1, 1, 0, 1, 0, 0, 0, 0])] == "unsupported"
        assert code_to_name[int(codes[1, 1, 1, 0, 0, 1, 0, 1])] == "failed"
        assert code_to_name[int(codes[0, 0, 1, 1, 1, 0, 0, 1])] == "timeout"
        assert code_to_name[int(codes[1, 0, 0, 0, 0, 1, 0, 0])] == "not_run"
        assert code_to_name[int(codes[0, 0, 1, 0, 0, 1, 1, 0])] == "ok"  # resnet50 training on 2 GPUs
        assert file["samples_ms"].chunks == (1, 1, 1, 1, 1, 1, 1, 1, 5)
        assert file["samples_ms"].compression == "gzip"


def test_netcdf4_sees_the_enum_and_the_ranks_group(cube_path):
    with netCDF4.Dataset(cube_path) as nc:
        assert nc.getncattr("schema") == "crossbench-cube/4"
        assert "status_t" in nc.enumtypes
        assert nc.enumtypes["status_t"].enum_dict == STATUS_CODES
        assert set(VARIABLES) <= set(nc.variables)
        assert "ranks" in nc.groups
        ranks = nc.groups["ranks"]
        assert ranks.dimensions["rank_row"].size == 4
        assert {"rank", "host", "device_key", "device_index", "uuid", "pci_bus_id", "memory_bytes",
                "sm_clock_mhz", "memory_clock_mhz", "power_limit_w", "driver",
                "threads"} <= set(ranks.variables)
        assert list(ranks.variables["rank"][:]) == [0, 1, 2, 3]
        assert list(ranks.variables["host"][:]) == ["gpu-node01", "gpu-node01", "cpu-node07", "cpu-node07"]
        assert list(ranks.variables["threads"][:]) == [0, 0, 16, 16]


def test_xarray_opens_the_ranks_group(cube_path):
    with xarray.open_dataset(cube_path, group="ranks") as ranks:
        assert ranks.sizes["rank_row"] == 4
        assert list(ranks["device_key"].values) == [GPU, GPU, CPU, CPU]
        assert list(ranks["device_index"].values) == [0, 1, -1, -1]
        assert float(ranks["power_limit_w"][0]) == 700.0
        assert ranks["memory_bytes"].attrs["units"] == "bytes"
