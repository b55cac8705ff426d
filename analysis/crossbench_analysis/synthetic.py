"""Write crossbench cubes from Python (h5py), following DESIGN.md's schema.

For tests and demonstrations only: real cubes come from `crossbench run`.
``write_cube`` writes any cells given to it; ``demo_cube`` writes a made-up
two-device cube with a batch sweep and every status, handy for trying the
report without a cluster (``python3 -m crossbench_analysis demo-cube OUT.h5``).
The numbers of ``demo_cube`` are invented: never quote them.
"""

from __future__ import annotations

import math
from pathlib import Path

import h5py
import numpy as np

from .cube import CELL_DIMS, FLOAT_VARS, RANK_COLUMNS, STATUS_NAMES


def _stats(samples: np.ndarray) -> dict[str, float]:
    s = np.sort(np.asarray(samples, dtype=float))
    n = len(s)
    med = float(np.median(s))
    # Distribution-free CI of the median (normal approximation of the binomial).
    half = 1.96 * math.sqrt(n) / 2
    lo = max(0, int(math.floor(n / 2 - half)))
    hi = min(n - 1, int(math.ceil(n / 2 + half)))
    return {
        "median_ms": med, "mean_ms": float(s.mean()), "std_ms": float(s.std(ddof=1)) if n > 1 else 0.0,
        "min_ms": float(s[0]), "max_ms": float(s[-1]),
        "p05_ms": float(np.percentile(s, 5)), "p95_ms": float(np.percentile(s, 95)),
        "ci_low_ms": float(s[lo]), "ci_high_ms": float(s[hi]),
    }


def write_cube(path, axes: dict[str, list], cells: list[dict], ranks: list[dict] | None = None,
               attrs: dict[str, str] | None = None, schema: str = "crossbench-cube/1") -> None:
    """Write a cube. `axes` maps each of CELL_DIMS to its values; each cell is a dict
    with the cell coordinates, `status` (name) and any per-cell variable, plus
    optional `samples_ms` (list). Cells not given are `not_run`."""
    shape = tuple(len(axes[d]) for d in CELL_DIMS)
    index = {d: {v: i for i, v in enumerate(axes[d])} for d in CELL_DIMS}
    max_steps = max([len(c.get("samples_ms", [])) for c in cells] + [1])

    status = np.zeros(shape, dtype=np.uint8)
    floats = {n: np.full(shape, np.nan) for n in FLOAT_VARS}
    throttled = np.full(shape, -1, dtype=np.int8)
    steps = np.zeros(shape, dtype=np.int32)
    rank = np.full(shape, -1, dtype=np.int32)
    message = np.full(shape, "", dtype=object)
    samples = np.full(shape + (max_steps,), np.nan)
    for c in cells:
        at = tuple(index[d][c[d]] for d in CELL_DIMS)
        status[at] = STATUS_NAMES.index(c["status"])
        for n in FLOAT_VARS:
            if n in c:
                floats[n][at] = c[n]
        throttled[at] = c.get("throttled", -1)
        steps[at] = c.get("steps", len(c.get("samples_ms", [])))
        rank[at] = c.get("rank", 0)
        message[at] = c.get("message", "")
        s = c.get("samples_ms", [])
        samples[at + (slice(0, len(s)),)] = s

    strtype = h5py.string_dtype("utf-8")
    with h5py.File(path, "w", track_order=True) as f:
        if schema is not None:
            f.attrs["schema"] = schema
        for k, v in (attrs or {}).items():
            f.attrs[k] = v
        f["status_t"] = h5py.enum_dtype({n: i for i, n in enumerate(STATUS_NAMES)}, basetype="u1")
        scales = {}
        for d in CELL_DIMS:
            vals = axes[d]
            if d == "batch":
                data = np.asarray(vals, dtype=np.int64)
            elif d == "replica":
                data = np.asarray(vals, dtype=np.int32)
            else:
                data = np.asarray(vals, dtype=object)
            ds = f.create_dataset(d, data=data, dtype=strtype if data.dtype == object else data.dtype)
            ds.make_scale(d)
            scales[d] = ds
        sd = f.create_dataset("step", data=np.arange(max_steps, dtype=np.int32))
        sd.make_scale("step")
        scales["step"] = sd

        def var(name, data, dtype=None, dims=CELL_DIMS):
            ds = f.create_dataset(name, data=data, dtype=dtype)
            for i, d in enumerate(dims):
                ds.dims[i].attach_scale(scales[d])
            return ds

        var("status", status, dtype=f["status_t"])
        for n in FLOAT_VARS:
            var(n, floats[n])
        var("throttled", throttled)
        var("steps", steps)
        var("rank", rank)
        var("message", message, dtype=strtype)
        var("samples_ms", samples, dims=CELL_DIMS + ("step",))

        g = f.create_group("ranks", track_order=True)
        ranks = ranks or []
        rr = g.create_dataset("rank_row", data=np.arange(len(ranks), dtype=np.int32))
        rr.make_scale("rank_row")
        for col in RANK_COLUMNS:
            vals = [r.get(col, "" if col in ("host", "device_key", "uuid", "pci_bus_id", "driver") else 0)
                    for r in ranks]
            if col in ("host", "device_key", "uuid", "pci_bus_id", "driver"):
                ds = g.create_dataset(col, data=np.asarray(vals, dtype=object), dtype=strtype)
            elif col in ("rank", "device_index", "threads"):
                ds = g.create_dataset(col, data=np.asarray(vals, dtype=np.int32))
            else:
                ds = g.create_dataset(col, data=np.asarray(vals, dtype=np.float64))
            ds.dims[0].attach_scale(rr)


def ok_cell(coords: dict, samples_ms, batch: int, **extra) -> dict:
    """An `ok` cell whose statistics are computed from `samples_ms`."""
    c = dict(coords, status="ok", samples_ms=list(samples_ms))
    c.update(_stats(np.asarray(samples_ms)))
    c["images_per_s"] = batch / c["median_ms"] * 1e3
    c.update(extra)
    return c


# GFLOP per image of the forward pass (DESIGN.md); training ~3x.
GFLOP = {"alexnet": 1.43, "overfeat": 5.60, "vgg11": 15.2, "vgg16": 30.9, "vgg19": 39.3,
         "googlenet": 3.17, "resnet50": 8.18, "resnet101": 15.6, "resnet152": 23.0}
# Activation memory per image [MiB] in training (made up, of the right order).
ACT_MB = {"alexnet": 20, "overfeat": 60, "vgg11": 120, "vgg16": 200, "vgg19": 220,
          "googlenet": 80, "resnet50": 160, "resnet101": 240, "resnet152": 330}


def demo_cube(path, seed: int = 7, batches=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
              networks=("alexnet", "overfeat", "vgg11", "googlenet", "resnet50", "resnet101", "resnet152"),
              steps: int = 30) -> None:
    """A made-up cube: a GPU (two engines) and a CPU, fp32 and fp16, a batch sweep,
    with OOM, unsupported, failed and not_run cells."""
    rng = np.random.default_rng(seed)
    gpu = "NVIDIA A100-SXM4-40GB (108 SMs, sm_8.0, 39.4 GiB)"
    cpu = "CPU Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz (2 threads, avx512_core, 15.5 GiB)"
    axes = {"device": [gpu, cpu], "engine": ["cudnn", "onednn", "pytorch"],
            "network": list(networks), "precision": ["fp32", "fp16"], "batch": list(batches),
            "phase": ["inference", "training"], "replica": [0]}
    dev = {gpu: dict(tflops={"fp32": 19.5, "fp16": 312.0}, eff=0.45, mem=40 * 1024, bend=128, j=0.25),
           cpu: dict(tflops={"fp32": 2.0}, eff=0.5, mem=16 * 1024, bend=32, j=None)}
    cells = []
    for d in axes["device"]:
        engines = ["cudnn", "pytorch"] if d == gpu else ["onednn", "pytorch"]
        for e in engines:
            for n in networks:
                for p in axes["precision"]:
                    for ph in axes["phase"]:
                        for b in batches:
                            coords = dict(device=d, engine=e, network=n, precision=p, batch=b, phase=ph,
                                          replica=0)
                            info = dev[d]
                            if p not in info["tflops"]:
                                cells.append(dict(coords, status="unsupported",
                                                  message=f"{e}: {p} needs native bf16/fp16 support, "
                                                          f"which this CPU lacks"))
                                continue
                            mult = 3.0 if ph == "training" else 1.0
                            mem_mb = ACT_MB[n] * b * (1.0 if ph == "training" else 0.3) * (
                                0.5 if p == "fp16" else 1.0)
                            if mem_mb > info["mem"]:
                                cells.append(dict(coords, status="oom",
                                                  message=f"out of memory allocating {mem_mb:.0f} MiB"))
                                continue
                            if e == "pytorch" and n == "googlenet" and ph == "training" and b == 512:
                                cells.append(dict(coords, status="failed",
                                                  message="worker exited with signal 11"))
                                continue
                            flop = GFLOP[n] * 1e9 * mult * b
                            peak = info["tflops"][p] * 1e12
                            # Efficiency rises with batch, saturates, then falls past `bend`.
                            eff = info["eff"] * (b / (b + 4.0)) * (1.0 if e != "pytorch" else 0.85)
                            if b > info["bend"]:
                                eff *= (info["bend"] / b) ** 0.15
                            t_ms = flop / (peak * eff) * 1e3 + 0.05
                            s = t_ms * np.exp(rng.normal(0, 0.01, steps))
                            extra = {}
                            if info["j"] is not None:
                                extra["energy_j_per_image"] = info["j"] * GFLOP[n] * mult / 8
                                extra["mean_sm_clock_mhz"] = 1410.0
                                extra["throttled"] = 1 if (n == "vgg11" and b >= 256) else 0
                            c = ok_cell(coords, s, b, **extra)
                            c["tflops"] = flop / (c["median_ms"] * 1e-3) / 1e12
                            c["peak_memory_bytes"] = mem_mb * 2**20
                            c["message"] = "CI half-width below 1%"
                            cells.append(c)
    ranks = [dict(rank=0, host="node01", device_key=gpu, device_index=0, uuid="GPU-0c4f", pci_bus_id="0000:07:00.0",
                  memory_bytes=40 * 2**30, sm_clock_mhz=1410, memory_clock_mhz=1215, power_limit_w=400,
                  driver="550.54.15", threads=0),
             dict(rank=1, host="node02", device_key=cpu, device_index=-1, uuid="", pci_bus_id="",
                  memory_bytes=16 * 2**30, sm_clock_mhz=2500, memory_clock_mhz=0, power_limit_w=0,
                  driver="6.1.0-18-amd64", threads=2)]
    attrs = {"created": "2026-01-01T00:00:00Z", "command_line": "crossbench run --job jobs/batch-sweep.ini",
             "job_file": "[matrix]\nnetworks = ...\n", "crossbench_version": "0.1.0",
             "git_revision": "demo", "hdf5_version": "1.12.2", "note": "made-up numbers (demo_cube)"}
    write_cube(path, axes, cells, ranks, attrs)
