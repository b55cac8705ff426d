"""Write crossbench cubes from Python (h5py), following DESIGN.md's schema.

For tests and demonstrations only: real cubes come from `crossbench run`.
``write_cube`` writes any cells given to it, laid out as the C++ writer
(src/cube/cube_writer.cpp) lays them out: schema ``crossbench-cube/2`` by
default (cells over device, engine, network, precision, batch, phase, gpus,
replica), or ``crossbench-cube/1`` (no ``gpus`` axis, no
``exposed_communication_ms`` / ``scaling_efficiency``) for back-compatibility
tests.  ``demo_cube`` writes a made-up two-device cube with a batch sweep,
every status and data-parallel training on the GPU, handy for trying the
report without a cluster (``python3 -m crossbench_analysis demo-cube OUT.h5``).
The numbers of ``demo_cube`` are invented: never quote them.
"""

from __future__ import annotations

import math

import h5py
import numpy as np

from .cube import (FLOAT_VARS, NOT_IN_SCHEMA, RANK_COLUMNS, SCHEMA_1, SCHEMA_2, SCHEMA_CELL_DIMS,
                   STATUS_NAMES)


def median_ci_indices(n: int) -> tuple[int, int]:
    """0-based positions in the sorted samples of the 95% CI of the median: exactly
    median_confidence_interval() of src/core/statistics.cpp (the Runner's rule). The number of
    samples below the median is Binomial(n, 1/2), its 95% band n/2 +- 1.96 sqrt(n)/2; the low
    bound is the order statistic of 1-based rank floor(n/2 - band), the high one of rank
    ceil(n/2 + band) + 1, each clamped to 1..n. tests/python/test_analysis.py holds this to the
    statistics the C++ writer stores."""
    half_band = 1.959963984540054 * math.sqrt(n) / 2.0
    low_rank = math.floor(n / 2.0 - half_band)
    high_rank = math.ceil(n / 2.0 + half_band) + 1.0
    return int(min(max(low_rank, 1), n)) - 1, int(min(max(high_rank, 1), n)) - 1


def _stats(samples: np.ndarray) -> dict[str, float]:
    """The statistics of src/core/statistics.cpp's summarize(), for made-up samples."""
    s = np.sort(np.asarray(samples, dtype=float))
    n = len(s)
    med = float(np.median(s))
    if n >= 2:
        lo, hi = median_ci_indices(n)
        ci_low, ci_high = float(s[lo]), float(s[hi])
    else:
        ci_low = ci_high = math.nan
    return {
        "median_ms": med, "mean_ms": float(s.mean()), "std_ms": float(s.std(ddof=1)) if n > 1 else math.nan,
        "min_ms": float(s[0]), "max_ms": float(s[-1]),
        "p05_ms": float(np.percentile(s, 5)), "p95_ms": float(np.percentile(s, 95)),
        "ci_low_ms": ci_low, "ci_high_ms": ci_high,
    }


# What the C++ writer writes as long_name / units (cube_writer.cpp, cube_layout.cpp).
AXIS_ATTRS = {
    "device": ("device key: kind, model, memory, compute units, architecture, tag", None),
    "engine": ("engine that ran the network", None),
    "network": ("network", None),
    "precision": ("arithmetic precision", None),
    "batch": ("images per step (minibatch)", "images"),
    "phase": ("inference or training", None),
    "gpus": ("devices training together (data parallel; batch is per device), 1 = single device", "1"),
    "replica": ("replica: the same cell on another device of the same key", "1"),
    "step": ("timed step", "1"),
}
AXIS_TYPES = {"batch": np.int64, "gpus": np.int32, "replica": np.int32, "step": np.int32}
FLOAT_ATTRS = {
    "median_ms": ("ms", "median time per step"),
    "mean_ms": ("ms", "mean time per step"),
    "std_ms": ("ms", "sample standard deviation (n - 1) of the time per step"),
    "min_ms": ("ms", "shortest time per step"),
    "max_ms": ("ms", "longest time per step"),
    "p05_ms": ("ms", "5th percentile of the time per step (linear interpolation)"),
    "p95_ms": ("ms", "95th percentile of the time per step (linear interpolation)"),
    "ci_low_ms": ("ms", "lower bound of the distribution-free 95% confidence interval of the median"),
    "ci_high_ms": ("ms", "upper bound of the distribution-free 95% confidence interval of the median"),
    "images_per_s": ("images/s", "throughput: batch / median time per step"),
    "tflops": ("TFLOP/s", "arithmetic rate: FLOPs per step / median time per step"),
    "peak_memory_bytes": ("bytes", "peak memory of the session: tensors, workspaces, weights"),
    "energy_j_per_image": ("J/image", "energy per image during the timed steps"),
    "mean_sm_clock_mhz": ("MHz", "mean SM clock during the timed steps"),
    "min_sm_clock_mhz": ("MHz", "lowest SM clock sampled during the timed steps"),
    "mean_power_w": ("W", "mean board power during the timed steps"),
    "max_temperature_c": ("degC", "hottest GPU temperature sampled during the timed steps"),
    "exposed_communication_ms": (
        "ms", "data parallel: median time per step spent waiting for gradient all-reduces after the backward pass"),
    "scaling_efficiency": (
        "1", "data parallel: images_per_s / (gpus * images_per_s of the gpus = 1 cell of the same coordinates)"),
}
INT_ATTRS = {  # name: (numpy type, fill, long_name)
    "throttled": (np.int8, -1,
                  "1: clocks fell or throttle reasons fired during the timed steps, 0: not, -1: unknown"),
    "steps": (np.int32, 0, "timed steps measured"),
    "rank": (np.int32, -1, "MPI rank that ran the cell, -1: none"),
}
TEXT_ATTRS = {
    "message": "why the cell is not ok; for ok cells, the stopping decision",
    "decisions": "the engine's decisions: convolution algorithms, layout, CUDA graph, ...",
}
RANK_ATTRS = {  # column: (kind, long_name, units)
    "rank": ("i4", "MPI rank", "1"),
    "host": ("str", "host name", None),
    "device_key": ("str", "device key of the rank's device", None),
    "device_index": ("i4", "device ordinal as the rank sees it, -1: the CPU", "1"),
    "uuid": ("str", "device UUID", None),
    "pci_bus_id": ("str", "PCI bus id of the device", None),
    "memory_bytes": ("f8", "device memory (GPU) or physical memory (CPU)", "bytes"),
    "sm_clock_mhz": ("f8", "maximum SM clock (GPU) or nominal core clock (CPU), 0: unknown", "MHz"),
    "memory_clock_mhz": ("f8", "memory clock, 0: unknown", "MHz"),
    "power_limit_w": ("f8", "power limit, 0: unknown", "W"),
    "driver": ("str", "driver version (GPU) or kernel release (CPU)", None),
    "threads": ("i4", "CPU threads of the rank's binding (CPU devices), 0 for GPUs", "1"),
}
# SampleBlocks (cube_layout.hpp): samples_ms is written in blocks of whole cells.
MAX_BLOCK_CELLS = 4096
MAX_BLOCK_BYTES = 16 << 20


def _string_attr(obj, name: str, value: str) -> None:
    """A text attribute as the C++ writer stores it: fixed-length, NUL-terminated,
    ASCII (UTF-8 when it holds other characters), scalar; "" is one NUL byte."""
    raw = str(value).encode("utf-8")
    tid = h5py.h5t.C_S1.copy()
    tid.set_size(max(len(raw), 1))
    tid.set_strpad(h5py.h5t.STR_NULLTERM)
    tid.set_cset(h5py.h5t.CSET_ASCII if raw.isascii() else h5py.h5t.CSET_UTF8)
    space = h5py.h5s.create(h5py.h5s.SCALAR)
    attr = h5py.h5a.create(obj.id, name.encode("utf-8"), tid, space)
    attr.write(np.array(raw if raw else b"\0", dtype=f"S{max(len(raw), 1)}"), mtype=tid)


def _describe(obj, long_name: str, units: str | None) -> None:
    _string_attr(obj, "long_name", long_name)
    if units is not None:
        _string_attr(obj, "units", units)


def _dcpl(fill=None, fill_dtype=None, never_fill=False, chunks=None, shuffle=False, deflate=None):
    """Dataset creation properties of hdf5_io.cpp: attribute creation order tracked
    and indexed, plus the fill value, fill time, chunks and filters asked for."""
    plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    plist.set_attr_creation_order(h5py.h5p.CRT_ORDER_TRACKED | h5py.h5p.CRT_ORDER_INDEXED)
    if fill is not None:
        plist.set_fill_value(np.array(fill, dtype=fill_dtype))
    if never_fill:
        plist.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
    if chunks is not None:
        plist.set_chunk(tuple(chunks))
        if shuffle:
            plist.set_shuffle()
        if deflate is not None:
            plist.set_deflate(deflate)
    return plist


def _vector(group, name: str, values, dtype):
    """A 1-D dataset as hdf5_io.cpp's create_vector / create_string_vector writes it."""
    if dtype is str:
        data = np.asarray([str(v) for v in values], dtype=object)
        tid = h5py.string_dtype("utf-8")
    else:
        data = np.asarray(values, dtype=dtype)
        tid = data.dtype
    ds = group.create_dataset(name, shape=(len(data),), dtype=tid, dcpl=_dcpl(), track_times=True)
    if len(data):
        ds[...] = data
    return ds


def _fixed_dimensions(dims: tuple[int, ...], steps: int) -> int:
    """How many leading cell dimensions one block of samples_ms fixes: as few as keep
    a block within MAX_BLOCK_CELLS and MAX_BLOCK_BYTES (cube_layout.cpp SampleBlocks)."""
    for fixed in range(len(dims)):
        cells = int(np.prod(dims[fixed:], dtype=np.int64))
        if cells <= MAX_BLOCK_CELLS and cells * steps * 8 <= MAX_BLOCK_BYTES:
            return fixed
    return len(dims)


def write_cube(path, axes: dict[str, list], cells: list[dict], ranks: list[dict] | None = None,
               attrs: dict[str, str] | None = None, schema: str | None = SCHEMA_2) -> None:
    """Write a cube as the C++ writer does.

    `axes` maps each cell dimension of the schema to its values (``gpus``
    defaults to [1]); each cell is a dict with the cell coordinates (``gpus``
    defaults to 1), `status` (name) and any per-cell variable, plus optional
    `samples_ms` (list). Cells not given are `not_run`. Numbers (and
    `throttled`) are written only for ok cells, as the C++ writer enforces.

    `schema`: ``crossbench-cube/2`` (default) or ``crossbench-cube/1`` (the layout
    without the gpus axis and the data-parallel variables; its cells must all
    have gpus = 1); any other string is written as the `schema` attribute over
    the latest layout (to test refusals), and None writes no `schema` at all."""
    # The schema-2 layout (schema 3 adds wall times and provenance that synthetic cubes do not need).
    layout = SCHEMA_1 if schema == SCHEMA_1 else SCHEMA_2
    dims = SCHEMA_CELL_DIMS[layout]
    axes = dict(axes)
    if "gpus" in dims:
        axes.setdefault("gpus", [1])
    elif axes.get("gpus", [1]) != [1]:
        raise ValueError(f"{SCHEMA_1} has no gpus axis; got gpus = {axes['gpus']}")
    float_vars = [n for n in FLOAT_VARS if n not in NOT_IN_SCHEMA[layout]]
    shape = tuple(len(axes[d]) for d in dims)
    index = {d: {v: i for i, v in enumerate(axes[d])} for d in dims}
    max_steps = max([len(c.get("samples_ms", [])) for c in cells] + [1])

    status = np.zeros(shape, dtype=np.uint8)
    floats = {n: np.full(shape, np.nan) for n in float_vars}
    ints = {n: np.full(shape, fill, dtype=t) for n, (t, fill, _) in INT_ATTRS.items()}
    texts = {n: np.full(shape, "", dtype=object) for n in TEXT_ATTRS}
    samples = np.full(shape + (max_steps,), np.nan)
    has_samples = np.zeros(shape, dtype=bool)
    seen = set()
    for c in cells:
        coords = dict(c)
        coords.setdefault("gpus", 1)
        if "gpus" not in dims and coords["gpus"] != 1:
            raise ValueError(f"{SCHEMA_1} has no gpus axis; a cell has gpus = {coords['gpus']}")
        try:
            at = tuple(index[d][coords[d]] for d in dims)
        except KeyError as e:
            raise ValueError(f"cell {c} is not on the cube's axes ({e} is not on its axis)") from None
        if at in seen:
            raise ValueError(f"cell {c} appears twice")
        seen.add(at)
        ok = c["status"] == "ok"
        status[at] = STATUS_NAMES.index(c["status"])
        for n in float_vars:
            if n in c and ok:
                floats[n][at] = c[n]
        ints["throttled"][at] = c.get("throttled", -1) if ok else -1
        ints["steps"][at] = c.get("steps", len(c.get("samples_ms", [])))
        ints["rank"][at] = c.get("rank", 0)
        for n in TEXT_ATTRS:
            texts[n][at] = c.get(n, "")
        s = c.get("samples_ms", [])
        samples[at + (slice(0, len(s)),)] = s
        has_samples[at] = len(s) > 0

    root_attrs = dict(attrs or {})
    root_attrs.pop("schema", None)
    root_attrs["hdf5_version"] = h5py.version.hdf5_version   # the writer's own fact wins
    strtype = h5py.string_dtype("utf-8")
    n_cells = int(np.prod(shape, dtype=np.int64))
    # track_order: link and attribute creation order tracked and indexed (netCDF-4 needs it).
    with h5py.File(path, "w", track_order=True) as f:
        if schema is not None:
            _string_attr(f, "schema", schema)
        for k in sorted(root_attrs):       # a std::map: by name
            _string_attr(f, k, root_attrs[k])

        scales = []
        for d in dims + ("step",):
            values = list(range(max_steps)) if d == "step" else axes[d]
            ds = _vector(f, d, values, AXIS_TYPES.get(d, str))
            ds.make_scale(d)
            _describe(ds, *AXIS_ATTRS[d])
            scales.append(ds)

        def cell_var(name, data, dtype, fill, fill_dtype):
            vlen = h5py.check_string_dtype(np.dtype(dtype) if not isinstance(dtype, h5py.Datatype)
                                           else dtype.dtype) is not None
            ds = f.create_dataset(name, shape=shape, dtype=dtype, track_times=True,
                                  dcpl=_dcpl(None if vlen else fill, fill_dtype, never_fill=not vlen))
            for i in range(len(dims)):
                ds.dims[i].attach_scale(scales[i])
            if n_cells:
                ds[...] = data
            return ds

        # status: over the committed enum status_t, with CF flags too.
        f["status_t"] = h5py.enum_dtype({n: i for i, n in enumerate(STATUS_NAMES)}, basetype="u1")
        enum_t = f["status_t"]
        v = cell_var("status", status, enum_t, 0, enum_t.dtype)
        _describe(v, "outcome of the cell", None)
        v.attrs.create("flag_values", np.arange(len(STATUS_NAMES), dtype=np.uint8))
        _string_attr(v, "flag_meanings", " ".join(STATUS_NAMES))
        for n in float_vars:
            v = cell_var(n, floats[n], np.float64, np.nan, np.float64)
            units, long_name = FLOAT_ATTRS[n]
            _describe(v, long_name, units)
            v.attrs.create("_FillValue", np.nan, dtype=np.float64)
        for n, (t, fill, long_name) in INT_ATTRS.items():
            v = cell_var(n, ints[n], t, fill, t)
            _describe(v, long_name, "1")    # no _FillValue: -1 and 0 are values here
        for n, long_name in TEXT_ATTRS.items():
            v = cell_var(n, texts[n], strtype, None, None)
            _describe(v, long_name, None)

        # samples_ms: one chunk per cell's steps, shuffled and deflated; blocks of
        # cells where nothing was measured are never written (they read as NaN).
        chunks = (1,) * len(dims) + (max_steps,) if n_cells else None
        sm = f.create_dataset("samples_ms", shape=shape + (max_steps,), dtype=np.float64, track_times=True,
                              dcpl=_dcpl(np.nan, np.float64, chunks=chunks, shuffle=True, deflate=4))
        for i, sc in enumerate(scales):
            sm.dims[i].attach_scale(sc)
        if n_cells:
            fixed = _fixed_dimensions(shape, max_steps)
            for lead in np.ndindex(*shape[:fixed]):
                if has_samples[lead].any():
                    sm[lead] = samples[lead]
        _describe(sm, "time of every timed step, NaN past the cell's last step", "ms")
        sm.attrs.create("_FillValue", np.nan, dtype=np.float64)

        g = f.create_group("ranks", track_order=True)
        _string_attr(g, "long_name", "one row per MPI rank: the facts the device key does not hold")
        ranks = ranks or []
        rr = _vector(g, "rank_row", range(len(ranks)), np.int32)
        rr.make_scale("rank_row")
        _describe(rr, "row of the ranks table", "1")
        for col in (c for c in RANK_COLUMNS if c in RANK_ATTRS):  # the schema-2 columns
            kind, long_name, units = RANK_ATTRS[col]
            default = "" if kind == "str" else 0
            vals = [r.get(col, default) for r in ranks]
            ds = _vector(g, col, vals, str if kind == "str" else np.dtype(kind))
            ds.dims[0].attach_scale(rr)
            _describe(ds, long_name, units)


def ok_cell(coords: dict, samples_ms, batch: int, **extra) -> dict:
    """An `ok` cell whose statistics are computed from `samples_ms`; images_per_s is
    the group's, gpus × batch ÷ median (gpus from `coords`, default 1)."""
    c = dict(coords, status="ok", samples_ms=list(samples_ms))
    c.update(_stats(np.asarray(samples_ms)))
    c["images_per_s"] = coords.get("gpus", 1) * batch / c["median_ms"] * 1e3
    c.update(extra)
    return c


def add_scaling_efficiency(cells: list[dict]) -> list[dict]:
    """Set `scaling_efficiency` of every ok cell with gpus > 1 (that has none) as
    crossbench run does (src/cluster/cube_assembly.cpp): images_per_s ÷ (gpus ×
    images_per_s of the ok gpus = 1 cell of the same coordinates: the same
    replica, else replica 0). Changes `cells` in place and returns it."""
    axes = ("device", "engine", "network", "precision", "batch", "phase", "replica")
    single = {tuple(c[d] for d in axes): c for c in cells
              if c.get("gpus", 1) == 1 and c["status"] == "ok"}
    for c in cells:
        g = c.get("gpus", 1)
        if g == 1 or c["status"] != "ok" or "scaling_efficiency" in c:
            continue
        key = tuple(c[d] for d in axes)
        base = single.get(key) or single.get(key[:-1] + (0,))
        if base is not None:
            c["scaling_efficiency"] = c["images_per_s"] / (g * base["images_per_s"])
    return cells


# GFLOP per image of the forward pass (DESIGN.md); training ~3x.
GFLOP = {"alexnet": 1.43, "overfeat": 5.60, "vgg11": 15.2, "vgg16": 30.9, "vgg19": 39.3,
         "googlenet": 3.17, "resnet50": 8.18, "resnet101": 15.6, "resnet152": 23.0}
# Activation memory per image [MiB] in training (made up, of the right order).
ACT_MB = {"alexnet": 20, "overfeat": 60, "vgg11": 120, "vgg16": 200, "vgg19": 220,
          "googlenet": 80, "resnet50": 160, "resnet101": 240, "resnet152": 330}
# Weights [millions]: the gradient bytes a data-parallel step all-reduces.
PARAMS_M = {"alexnet": 61.1, "overfeat": 145.9, "vgg11": 132.9, "vgg16": 138.4, "vgg19": 143.7,
            "googlenet": 7.0, "resnet50": 25.6, "resnet101": 44.5, "resnet152": 60.2}
INFERENCE_SINGLE_DEVICE = "inference is single-device: gpus > 1 applies to training cells only"


def demo_cube(path, seed: int = 7, batches=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
              networks=("alexnet", "overfeat", "vgg11", "googlenet", "resnet50", "resnet101", "resnet152"),
              steps: int = 30) -> None:
    """A made-up cube: a GPU (two engines) and a CPU, fp32 and fp16, a batch sweep,
    with OOM, unsupported, failed and not_run cells; the GPU's cudnn training cells
    at batch 32, 64 and 128 also on 2 and 4 GPUs (data parallel; the gpus > 1
    inference cells are unsupported, as crossbench records them)."""
    rng = np.random.default_rng(seed)
    gpu = "NVIDIA A100-SXM4-40GB (108 SMs, sm_8.0, 39.4 GiB)"
    cpu = "CPU Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz (2 threads, avx512_core, 15.5 GiB)"
    axes = {"device": [gpu, cpu], "engine": ["cudnn", "onednn", "pytorch"],
            "network": list(networks), "precision": ["fp32", "fp16"], "batch": list(batches),
            "phase": ["inference", "training"], "gpus": [1, 2, 4], "replica": [0]}
    dp_batches = (32, 64, 128)
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
                            c["decisions"] = "layout=NHWC" if d == gpu else "layout=nChw16c"
                            cells.append(c)
                            if d != gpu or e != "cudnn":
                                continue
                            for g in axes["gpus"][1:]:
                                dp = dict(coords, gpus=g)
                                if ph == "inference":
                                    cells.append(dict(dp, status="unsupported", message=INFERENCE_SINGLE_DEVICE))
                                    continue
                                if b not in dp_batches:
                                    continue
                                # Ring all-reduce of the fp32 gradients at ~80 GB/s, about 60%
                                # hidden behind the backward pass (2/3 of the step).
                                comm = 2 * (g - 1) / g * PARAMS_M[n] * 4e6 / 80e9 * 1e3
                                exposed = max(0.0, comm - 0.6 * (2 / 3) * t_ms) + 0.02 * g
                                t_dp = t_ms + exposed
                                sd = t_dp * np.exp(rng.normal(0, 0.01, steps))
                                cd = ok_cell(dp, sd, b, exposed_communication_ms=exposed,
                                             throttled=extra.get("throttled", -1))
                                cd["tflops"] = g * flop / (cd["median_ms"] * 1e-3) / 1e12
                                cd["peak_memory_bytes"] = mem_mb * 2**20 + PARAMS_M[n] * 4e6
                                cd["message"] = "CI half-width below 1%"
                                cd["decisions"] = (f"data parallel over ranks {','.join(map(str, range(g)))}; "
                                                   f"buckets 25 MiB; nccl")
                                cells.append(cd)
    ranks = [dict(rank=i, host="node01", device_key=gpu, device_index=i, uuid=f"GPU-0c4f{i}",
                  pci_bus_id=f"0000:{7 + 64 * i:02x}:00.0", memory_bytes=40 * 2**30, sm_clock_mhz=1410,
                  memory_clock_mhz=1215, power_limit_w=400, driver="550.54.15", threads=0) for i in range(4)]
    ranks += [dict(rank=4, host="node02", device_key=cpu, device_index=-1, uuid="", pci_bus_id="",
                  memory_bytes=16 * 2**30, sm_clock_mhz=2500, memory_clock_mhz=0, power_limit_w=0,
                  driver="6.1.0-18-amd64", threads=2)]
    attrs = {"created": "2026-01-01T00:00:00Z",
             "command_line": "mpirun -np 5 crossbench run --job jobs/batch-sweep.ini --gpus 1,2,4",
             "job_file": "[matrix]\nnetworks = ...\n", "crossbench_version": "0.1.0",
             "git_revision": "demo", "hdf5_version": "1.12.2", "note": "made-up numbers (demo_cube)"}
    write_cube(path, axes, add_scaling_efficiency(cells), ranks, attrs)
