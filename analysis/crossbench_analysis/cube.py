"""Load a crossbench results cube (DESIGN.md "The results cube") with h5py.

The cube is HDF5 (netCDF-4 compatible).  This module reads it defensively:

* a file that is not HDF5, has no ``schema`` root attribute, or has a schema
  this package does not know is refused with :class:`CubeError`;
* ``status`` is decoded through its committed HDF5 enum (by name, so the
  numbering may change without breaking us), falling back to the numbering of
  ``include/crossbench/cell.hpp`` for a plain integer dataset;
* strings come back as ``str`` whether stored variable-length or fixed-length;
* a variable's axes are taken from its attached dimension scales when present,
  so a writer that stores a variable in another axis order still loads.

Schemas: ``crossbench-cube/4`` (schema 3 plus run segments: ``/segments``,
read into ``cube.segments``, one dict of attributes per segment, i.e. per
mpirun or resume; each cell's ``segment`` and, for merged cubes, ``source``;
and ``/ranks`` rows of every segment with the columns ``segment``, ``source``,
``cpu_set`` and ``numa_node``: a cell's device is the row (segment, rank)),
``crossbench-cube/3`` (schema 2 plus each cell's wall times
``preparation_s``, ``search_s``, ``timed_s``, ``started_utc``, ``finished_utc``,
the system description in ``/ranks`` and, for merged cubes, ``/sources``: each
input's root attributes and ranks, read into ``cube.sources``),
``crossbench-cube/2`` (cells over device, engine, network, precision,
batch, phase, gpus, replica) and ``crossbench-cube/1`` (the same without the
``gpus`` axis).  A schema-1 cube is read as a cube whose ``gpus`` axis is
``[1]`` (every cell single-device) and whose ``exposed_communication_ms`` and
``scaling_efficiency`` are NaN, so everything downstream sees one layout.

``load(path)`` returns a :class:`Cube`: the per-cell variables as an
``xarray.Dataset`` (``cube.ds``), one tidy row per cell as a
``pandas.DataFrame`` (``cube.cells``), the ``/ranks`` table (``cube.ranks``)
and the root attributes (``cube.attrs``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import xarray as xr

SCHEMA_1 = "crossbench-cube/1"
SCHEMA_2 = "crossbench-cube/2"
SCHEMA_3 = "crossbench-cube/3"
SCHEMA_4 = "crossbench-cube/4"
KNOWN_SCHEMAS = (SCHEMA_1, SCHEMA_2, SCHEMA_3, SCHEMA_4)
LATEST_SCHEMA = SCHEMA_4

# Cell axes, in the order of the (latest) schema: what `Cube.ds` and `Cube.cells` have.
CELL_DIMS = ("device", "engine", "network", "precision", "batch", "phase", "gpus", "replica")
# Cell axes as each schema stores them in the file.
SCHEMA_CELL_DIMS = {
    SCHEMA_1: ("device", "engine", "network", "precision", "batch", "phase", "replica"),
    SCHEMA_2: CELL_DIMS,
    SCHEMA_3: CELL_DIMS,
    SCHEMA_4: CELL_DIMS,
}
GPUS_DIM = "gpus"
REPETITION_DIM = "repetition"
REPETITION_VAR = "repetition_median_ms"
# A cell whose repetitions' medians spread by more than this fraction of their median is
# unstable (TorchBench's stability gate, in spirit): 5% is compare's default --fail-above,
# so a cell noisier than that across fresh sessions cannot support a 5% regression gate.
STABILITY_THRESHOLD = 0.05
STEP_DIM = "step"
INT_AXES = {"batch": np.int64, "gpus": np.int32, "replica": np.int32, STEP_DIM: np.int32}

# Status names, in the numbering of include/crossbench/cell.hpp (the cube's enum).
STATUS_NAMES = ("not_run", "ok", "oom", "unsupported", "failed", "timeout")
NON_OK_STATUSES = tuple(s for s in STATUS_NAMES if s != "ok")
# How a status is written on figures and in tables.
STATUS_LABELS = {
    "not_run": "not run",
    "ok": "ok",
    "oom": "OOM",
    "unsupported": "unsupported",
    "failed": "failed",
    "timeout": "timeout",
}

FLOAT_VARS = (
    "median_ms", "mean_ms", "std_ms", "min_ms", "max_ms", "p05_ms", "p95_ms",
    "ci_low_ms", "ci_high_ms", "images_per_s", "tflops", "peak_memory_bytes",
    "energy_j_per_image", "mean_sm_clock_mhz", "min_sm_clock_mhz", "mean_power_w", "max_temperature_c",
    "exposed_communication_ms", "scaling_efficiency",
)
# Schema 3: wall seconds of every cell, whatever its status (never masked by status).
WALL_VARS = ("preparation_s", "search_s", "timed_s")
WALL_TEXT_VARS = ("started_utc", "finished_utc")
# Variables a schema does not have: filled (NaN) on load, not reported as missing.
# Schema 4: the run segment (/segments) and the merged input (/sources) of every cell, -1: unknown / none.
SEGMENT_VARS = ("segment", "source")
NOT_IN_SCHEMA = {
    SCHEMA_1: ("exposed_communication_ms", "scaling_efficiency") + WALL_VARS + WALL_TEXT_VARS + SEGMENT_VARS,
    SCHEMA_2: WALL_VARS + WALL_TEXT_VARS + SEGMENT_VARS,
    SCHEMA_3: SEGMENT_VARS,
    SCHEMA_4: (),
}
# Variables added to the layout without a schema change: a cube of any schema written before them
# lacks them; filled (NaN) on load and not reported as missing.
OPTIONAL_VARS = ("min_sm_clock_mhz", "mean_power_w", "max_temperature_c")
INT_VARS = {"throttled": -1, "steps": 0, "rank": -1, "segment": -1, "source": -1}  # name -> value when absent
STRING_VARS = ("message",) + WALL_TEXT_VARS
REQUIRED_VARS = ("status", "median_ms")
CELL_VARS = ("status",) + FLOAT_VARS + WALL_VARS + tuple(INT_VARS) + STRING_VARS

RANK_COLUMNS = (
    "rank", "host", "device_key", "device_index", "uuid", "pci_bus_id", "memory_bytes",
    "sm_clock_mhz", "memory_clock_mhz", "power_limit_w", "driver", "threads",
    # schema 3: the system description
    "application_sm_clock_mhz", "application_memory_clock_mhz", "clock_policy", "ecc",
    "cpu_model", "os", "kernel", "container",
    # schema 4: run segments, merged inputs, CPU placement
    "segment", "source", "cpu_set", "numa_node",
)


# Recorded settings that change the numbers besides measure_* (the options schema's
# rows marked changes_numbers, under their cube attribute names).
NUMBER_SETTINGS = ("seed", "update", "learning_rate", "engine_algorithm_policy", "engine_workspace_limit_mb",
                   "engine_layout", "engine_cuda_graphs", "engine_graph_api", "engine_search_l2", "engine_search_tie",
                   "engine_search_warmup_ms", "engine_search_in_step", "engine_pool_spacer_mb", "engine_fuse", "engine_conv_statistics",
                   "engine_compile_mode", "engine_jax_timing",
                   "engine_worker_per_cell",
                   "data_parallel_bucket_mb")


class CubeError(Exception):
    """The file cannot be read as a crossbench cube; the message says why."""


@dataclass
class Cube:
    path: Path
    schema: str
    attrs: dict[str, str]
    ds: xr.Dataset                     # per-cell variables (+ samples_ms over step)
    ranks: pd.DataFrame                # one row per rank of /ranks
    missing_vars: list[str] = field(default_factory=list)  # optional variables the file lacks
    # Merged cubes (/sources): per input, its root attributes and its ranks table.
    sources: list[dict] = field(default_factory=list)
    # Schema 4 (/segments): per run segment (one mpirun or one resume), its attributes.
    segments: list[dict] = field(default_factory=list)
    _cells: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def cells(self) -> pd.DataFrame:
        """One tidy row per cell of the axes (every status, ``not_run`` included)."""
        if self._cells is None:
            self._cells = _tidy(self.ds)
        return self._cells

    @property
    def measured(self) -> pd.DataFrame:
        """The cells whose status is not ``not_run``."""
        c = self.cells
        return c[c["status"] != "not_run"].reset_index(drop=True)

    def axis(self, name: str) -> list:
        return [x.item() if hasattr(x, "item") else x for x in self.ds[name].values]

    @property
    def gpus(self) -> list[int]:
        """The data-parallel group sizes on the `gpus` axis ([1] for a schema-1 cube)."""
        return [int(g) for g in self.ds[GPUS_DIM].values]

    @property
    def devices(self) -> list[str]:
        return [str(d) for d in self.ds["device"].values]

    def origins(self, cells: pd.DataFrame) -> pd.DataFrame:
        """Per row of `cells` (same index): what measured it. ``host`` and
        ``device_uuid`` (the /ranks row (segment, rank), or rank alone before
        schema 4), ``git_revision`` (its segment's, else its source's, else the
        root's), ``segment`` and ``source`` (-1: unknown / not merged) and
        ``settings`` (the recorded settings that change the numbers, as one text:
        its source's in a merged cube, else the root's)."""
        out = pd.DataFrame(index=cells.index)
        seg = cells["segment"].astype(int) if "segment" in cells.columns else pd.Series(-1, index=cells.index)
        src = cells["source"].astype(int) if "source" in cells.columns else pd.Series(-1, index=cells.index)
        rank = cells["rank"].astype(int) if "rank" in cells.columns else pd.Series(-1, index=cells.index)
        r = self.ranks
        by_key: dict = {}
        if "rank" in r.columns:
            segs = r["segment"].astype(int) if "segment" in r.columns else pd.Series(-1, index=r.index)
            for row, sg in zip(r.itertuples(index=False), segs):
                by_key[(int(sg), int(row.rank))] = row
        def row_of(sg, rk):
            return by_key.get((sg, rk)) or by_key.get((-1, rk))
        rows = [row_of(int(a), int(b)) for a, b in zip(seg, rank)]
        out["host"] = [str(getattr(x, "host", "")) if x is not None else "" for x in rows]
        out["device_uuid"] = [str(getattr(x, "uuid", "")) if x is not None else "" for x in rows]

        def attrs_of(sg, sc) -> dict:
            if 0 <= sg < len(self.segments):
                return self.segments[sg]
            if 0 <= sc < len(self.sources):
                return self.sources[sc]["attrs"]
            return self.attrs
        def settings_of(sc) -> str:
            a = self.sources[sc]["attrs"] if 0 <= sc < len(self.sources) else self.attrs
            return "; ".join(f"{k}={a[k]}" for k in sorted(a) if k in NUMBER_SETTINGS or k.startswith("measure_")
                             and k not in ("measure_layer_times", "measure_layer_time_repetitions"))
        out["git_revision"] = [attrs_of(int(a), int(b)).get("git_revision", "?") for a, b in zip(seg, src)]
        out["segment"] = seg.values
        out["source"] = src.values
        out["settings"] = [settings_of(int(b)) for b in src]
        return out

    def stability(self, threshold: float = STABILITY_THRESHOLD) -> pd.DataFrame:
        """One row per ok cell measured in two or more repetitions (--repetitions): its
        repetitions' medians, their spread (max - min) / median of the medians, and
        `unstable` when the spread exceeds `threshold`. Empty without repetitions."""
        columns = list(CELL_DIMS) + ["repetitions", "medians_ms", "spread", "unstable"]
        if REPETITION_VAR not in self.ds:
            return pd.DataFrame(columns=columns)
        arr = self.ds[REPETITION_VAR].values
        flat = arr.reshape(-1, arr.shape[-1])
        index = pd.MultiIndex.from_product([self.ds[d].values for d in CELL_DIMS], names=list(CELL_DIMS))
        rows = []
        for key, medians in zip(index, flat):
            m = medians[np.isfinite(medians)]
            if len(m) < 2:
                continue
            spread = float((m.max() - m.min()) / np.median(m))
            rows.append(dict(zip(CELL_DIMS, key), repetitions=len(m), medians_ms=[float(x) for x in m],
                             spread=spread, unstable=spread > threshold))
        return pd.DataFrame(rows, columns=columns)

    def mixed_runs(self) -> list[str]:
        """What a reader must know before comparing cells of this cube: the cube's
        segments differ (another build, other physical GPUs), a resume was allowed
        onto another build or with an engine-scoped setting changed, or a merged cube's inputs differ in revision, settings
        or completeness. Empty when none."""
        out = []
        if self.attrs.get("segments_differ"):
            out.append(f"its {len(self.segments)} run segments differ in: {self.attrs['segments_differ']}")
        if self.attrs.get("allowed_build_change"):
            out.append(f"a resume was allowed onto another build (--allow-build-change): "
                       f"{self.attrs['allowed_build_change']}")
        if self.attrs.get("allowed_setting_change"):
            out.append(f"a resume was allowed with an engine-scoped setting changed (--allow-setting-change; that "
                       f"engine's earlier cells ran again): {self.attrs['allowed_setting_change']}")
        if self.sources:
            revs = sorted({s["attrs"].get("git_revision", "?") for s in self.sources})
            if len(revs) > 1:
                out.append(f"its {len(self.sources)} merged inputs come from {len(revs)} revisions: {', '.join(revs)}")
            incomplete = [s["attrs"].get("path", f"source {i}") for i, s in enumerate(self.sources)
                          if s["attrs"].get("run_state", "complete") != "complete"]
            if incomplete:
                out.append(f"merged input(s) incomplete: {', '.join(incomplete)}")
            keys = sorted({k for s in self.sources for k in s["attrs"]
                           if k in NUMBER_SETTINGS or k.startswith("measure_")})
            differ = [k for k in keys if len({s["attrs"].get(k, "(not recorded)") for s in self.sources}) > 1]
            if differ:
                out.append(f"merged inputs measured with different settings: {', '.join(differ)}")
        return out

    def resolve_device(self, text: str) -> str:
        """A device key from the key itself or a unique (case-insensitive) substring."""
        return resolve_name(text, self.devices, "device")


def resolve_name(text: str, choices: list[str], what: str) -> str:
    if text in choices:
        return text
    hits = [c for c in choices if text.lower() in c.lower()]
    if len(hits) == 1:
        return hits[0]
    listing = "; ".join(repr(c) for c in choices)
    if not hits:
        raise CubeError(f"no {what} matches {text!r}; the cube's {what}s are: {listing}")
    raise CubeError(f"{what} {text!r} is ambiguous: it matches {', '.join(map(repr, hits))}")


# ---------------------------------------------------------------------------
# decoding helpers

def _text(value) -> str:
    """An attribute or element as str (bytes, numpy scalars, 1-element arrays)."""
    if isinstance(value, np.ndarray):
        if value.size == 1:
            value = value.reshape(-1)[0]
        else:
            return ", ".join(_text(v) for v in value.reshape(-1))
    if isinstance(value, (bytes, np.bytes_)):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.generic):
        return str(value.item())
    return str(value)


def _is_string_dataset(dset: h5py.Dataset) -> bool:
    return h5py.check_string_dtype(dset.dtype) is not None or dset.dtype.kind in ("S", "U", "O")


def _read_strings(dset: h5py.Dataset) -> np.ndarray:
    if h5py.check_string_dtype(dset.dtype) is not None:
        data = dset.asstr(errors="replace")[()]
    else:
        data = dset[()]
    arr = np.asarray(data, dtype=object)
    out = np.empty(arr.shape, dtype=object)
    flat_in, flat_out = arr.reshape(-1), out.reshape(-1)
    for i, v in enumerate(flat_in):
        flat_out[i] = _text(v)
    return out


def _read_status(dset: h5py.Dataset) -> np.ndarray:
    """Status names (object array of str) from the enum, an integer or a string dataset."""
    if _is_string_dataset(dset):
        names = _read_strings(dset)
        bad = sorted({n for n in names.reshape(-1) if n not in STATUS_NAMES})
        if bad:
            raise CubeError(f"'status' holds unknown status names {bad}; known: {list(STATUS_NAMES)}")
        return names
    enum = h5py.check_enum_dtype(dset.dtype)
    codes = np.asarray(dset[()])
    if enum is not None:
        by_value = {int(v): str(k) for k, v in enum.items()}
        unknown_names = sorted(set(by_value.values()) - set(STATUS_NAMES))
        if unknown_names:
            raise CubeError(f"the 'status' enum has members {unknown_names} this analysis does not know "
                            f"(known: {list(STATUS_NAMES)})")
    elif codes.dtype.kind in "iu":
        by_value = dict(enumerate(STATUS_NAMES))
    else:
        raise CubeError(f"'status' has type {dset.dtype}, neither an enum, an integer nor a string")
    out = np.empty(codes.shape, dtype=object)
    flat_codes, flat_out = codes.reshape(-1), out.reshape(-1)
    for i, c in enumerate(flat_codes):
        try:
            flat_out[i] = by_value[int(c)]
        except KeyError:
            raise CubeError(f"'status' holds the value {int(c)}, which is not a member of its enum "
                            f"{by_value}") from None
    return out


def _dims_of(dset: h5py.Dataset, expected: tuple[str, ...]) -> tuple[str, ...]:
    """The axis names of a variable: its attached dimension scales, else `expected`."""
    names = []
    for i, dim in enumerate(dset.dims):
        name = None
        try:
            if len(dim) > 0:
                name = dim[0].name.rsplit("/", 1)[-1]
        except Exception:  # unattached or unreadable scale: fall back
            name = None
        if not name and dim.label:
            name = dim.label
        names.append(name)
    if all(names) and set(names) == set(expected) and len(names) == len(expected):
        return tuple(names)
    if len(dset.shape) != len(expected):
        raise CubeError(f"variable {dset.name!r} has {len(dset.shape)} axes; the schema says "
                        f"{len(expected)} ({', '.join(expected)})")
    return expected


def _read_var(f: h5py.File, name: str, expected_dims: tuple[str, ...], shape: dict[str, int]):
    dset = f[name]
    if not isinstance(dset, h5py.Dataset):
        raise CubeError(f"{name!r} is a group, the schema says it is a variable")
    dims = _dims_of(dset, expected_dims)
    want = tuple(shape[d] for d in dims)
    if tuple(dset.shape) != want:
        raise CubeError(f"variable {name!r} has shape {tuple(dset.shape)}; its axes "
                        f"{dims} have lengths {want}")
    if name == "status":
        data = _read_status(dset)
    elif _is_string_dataset(dset):
        data = _read_strings(dset)
    else:
        data = np.asarray(dset[()])
    if dims != expected_dims:
        data = np.transpose(data, [dims.index(d) for d in expected_dims])
    return data


def _read_axis(f: h5py.File, name: str, dims: tuple[str, ...] = CELL_DIMS) -> np.ndarray:
    if name not in f:
        raise CubeError(f"the cube has no {name!r} axis (dimension scale); a crossbench cube "
                        f"of its schema has {', '.join(dims + (STEP_DIM,))}")
    dset = f[name]
    if not isinstance(dset, h5py.Dataset) or dset.ndim != 1:
        raise CubeError(f"axis {name!r} is not a 1-D dataset")
    if _is_string_dataset(dset):
        return _read_strings(dset).astype(object)
    values = np.asarray(dset[()])
    if name in INT_AXES:
        return values.astype(INT_AXES[name])
    return values


# ---------------------------------------------------------------------------

def load(path: str | os.PathLike) -> Cube:
    """Read `path` as a crossbench cube; raises CubeError with the reason if it is not one."""
    path = Path(path)
    if not path.exists():
        raise CubeError(f"{path}: no such file")
    if path.is_dir():
        raise CubeError(f"{path}: is a directory, not a cube file")
    try:
        is_hdf5 = h5py.is_hdf5(str(path))
    except OSError as e:
        raise CubeError(f"{path}: cannot read: {e}") from None
    if not is_hdf5:
        raise CubeError(f"{path}: not an HDF5 file, so not a crossbench cube")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise CubeError(f"{path}: not a readable HDF5 file, so not a crossbench cube ({e})") from None
    with f:
        if "schema" not in f.attrs:
            raise CubeError(f"{path}: an HDF5 file but not a crossbench cube (it has no 'schema' "
                            f"root attribute; expected one of {', '.join(KNOWN_SCHEMAS)})")
        schema = _text(f.attrs["schema"])
        if schema not in KNOWN_SCHEMAS:
            raise CubeError(f"{path}: cube schema {schema!r} is not known to this analysis "
                            f"(it reads {', '.join(KNOWN_SCHEMAS)}); use a crossbench_analysis "
                            f"from the same crossbench version as the cube")
        attrs = {str(k): _text(v) for k, v in f.attrs.items()}
        try:
            return _load_open(path, f, schema, attrs)
        except CubeError as e:
            raise CubeError(f"{path}: {e}") from None
        except (KeyError, ValueError, TypeError, OSError) as e:
            raise CubeError(f"{path}: malformed crossbench cube: {e}") from None


def _load_open(path: Path, f: h5py.File, schema: str, attrs: dict[str, str]) -> Cube:
    file_dims = SCHEMA_CELL_DIMS[schema]
    coords = {d: _read_axis(f, d, file_dims) for d in file_dims}
    shape = {d: len(v) for d, v in coords.items()}
    for req in REQUIRED_VARS:
        if req not in f:
            raise CubeError(f"the cube lacks the variable {req!r}")

    # A schema without the gpus axis: every cell is single-device (gpus = 1).
    add_gpus = GPUS_DIM not in file_dims
    gpus_at = CELL_DIMS.index(GPUS_DIM)

    def to_cell_dims(arr: np.ndarray) -> np.ndarray:
        return np.expand_dims(arr, gpus_at) if add_gpus else arr

    data_vars = {}
    missing = []
    file_shape = tuple(shape[d] for d in file_dims)
    for name in CELL_VARS:
        if name in f:
            arr = _read_var(f, name, file_dims, shape)
            if name in FLOAT_VARS or name in WALL_VARS:
                arr = arr.astype(np.float64)
            elif name in INT_VARS:
                arr = arr.astype(np.int64)
        else:
            if name not in NOT_IN_SCHEMA[schema] and name not in OPTIONAL_VARS:
                missing.append(name)
            if name in FLOAT_VARS or name in WALL_VARS:
                arr = np.full(file_shape, np.nan)
            elif name in INT_VARS:
                arr = np.full(file_shape, INT_VARS[name], dtype=np.int64)
            else:
                arr = np.full(file_shape, "", dtype=object)
        data_vars[name] = (CELL_DIMS, to_cell_dims(arr))

    # Numbers are NaN where status != ok (DESIGN.md); enforce it so that no
    # writer slip can ever plot a failed cell as a measurement.
    not_ok = data_vars["status"][1] != "ok"
    for name in FLOAT_VARS:
        a = data_vars[name][1]
        a[not_ok] = np.nan

    if "samples_ms" in f:
        if STEP_DIM in f:
            coords[STEP_DIM] = _read_axis(f, STEP_DIM, file_dims)
        else:
            coords[STEP_DIM] = np.arange(f["samples_ms"].shape[-1], dtype=np.int32)
        shape[STEP_DIM] = len(coords[STEP_DIM])
        samples = _read_var(f, "samples_ms", file_dims + (STEP_DIM,), shape).astype(np.float64)
        samples = to_cell_dims(samples)
        samples[not_ok] = np.nan
        data_vars["samples_ms"] = (CELL_DIMS + (STEP_DIM,), samples)
    else:
        missing.append("samples_ms")

    # Schema 4, --repetitions: each repetition's median over the cell axes and `repetition`.
    if REPETITION_VAR in f and REPETITION_DIM in f:
        coords[REPETITION_DIM] = _read_axis(f, REPETITION_DIM, file_dims).astype(np.int32)
        shape[REPETITION_DIM] = len(coords[REPETITION_DIM])
        reps = _read_var(f, REPETITION_VAR, file_dims + (REPETITION_DIM,), shape).astype(np.float64)
        reps = to_cell_dims(reps)
        reps[not_ok] = np.nan
        data_vars[REPETITION_VAR] = (CELL_DIMS + (REPETITION_DIM,), reps)

    if add_gpus:
        coords[GPUS_DIM] = np.array([1], dtype=np.int32)
    ds = xr.Dataset(data_vars=data_vars, coords=coords, attrs=attrs)
    ranks = _read_ranks(f)
    return Cube(path=path, schema=schema, attrs=attrs, ds=ds, ranks=ranks, missing_vars=missing,
                sources=_read_sources(f), segments=_read_segments(f))


def _read_segments(f: h5py.File) -> list[dict]:
    """/segments/segment_<i> (schema 4): the attributes of each run segment, in order."""
    if "segments" not in f or not isinstance(f["segments"], h5py.Group):
        return []
    out = []
    while f"segment_{len(out)}" in f["segments"]:
        g = f["segments"][f"segment_{len(out)}"]
        out.append({str(k): _text(v) for k, v in g.attrs.items()})
    return out


def _read_sources(f: h5py.File) -> list[dict]:
    """/sources/source_<i> of a merged cube: {"attrs": {...}, "ranks": DataFrame} per input."""
    if "sources" not in f or not isinstance(f["sources"], h5py.Group):
        return []
    sources = []
    i = 0
    while f"source_{i}" in f["sources"]:
        g = f["sources"][f"source_{i}"]
        sources.append({"attrs": {str(k): _text(v) for k, v in g.attrs.items()}, "ranks": _read_ranks(g)})
        i += 1
    return sources


def _read_ranks(f: h5py.Group) -> pd.DataFrame:
    if "ranks" not in f or not isinstance(f["ranks"], h5py.Group):
        return pd.DataFrame(columns=list(RANK_COLUMNS))
    g = f["ranks"]
    cols = {}
    n = None
    for name, obj in g.items():
        if not isinstance(obj, h5py.Dataset) or obj.ndim != 1 or name == "rank_row":
            continue
        cols[name] = _read_strings(obj) if _is_string_dataset(obj) else np.asarray(obj[()])
        n = len(cols[name]) if n is None else n
    cols = {k: v for k, v in cols.items() if len(v) == n}
    df = pd.DataFrame(cols)
    ordered = [c for c in RANK_COLUMNS if c in df.columns] + [c for c in df.columns if c not in RANK_COLUMNS]
    df = df[ordered]
    if "rank" in df.columns:
        by = [c for c in ("source", "segment") if c in df.columns] + ["rank"]
        df = df.sort_values(by, kind="stable").reset_index(drop=True)
    return df


def _tidy(ds: xr.Dataset) -> pd.DataFrame:
    names = [n for n in CELL_VARS if n in ds]
    df = ds[names].to_dataframe().reset_index()
    df = df[list(CELL_DIMS) + names]
    for d in ("batch", "gpus", "replica"):
        df[d] = df[d].astype(np.int64)
    for d in ("device", "engine", "network", "precision", "phase", "status") + STRING_VARS:
        df[d] = df[d].astype(str)
    return df
