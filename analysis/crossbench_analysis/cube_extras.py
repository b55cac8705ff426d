"""The parts of a cube that ``cube.load`` leaves out: each cell's ``decisions``
text and the ``/layer_times`` groups (DESIGN.md "The results cube").

Both are read on demand with h5py, by the report only: a cube without them
(an older writer, a run without ``--layer-times``) gives an empty result.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import h5py
import numpy as np
import pandas as pd

from .cube import CELL_DIMS, Cube, _read_strings, _text

LAYER_COLUMNS = ["device", "engine", "network", "precision", "batch", "phase", "gpus", "replica",
                 "layer", "kind", "forward_ms", "backward_ms"]


def decisions(cube: Cube) -> pd.DataFrame:
    """One row per cell (the cell axes and ``decisions``), "" where the cube has none."""
    with h5py.File(cube.path, "r") as f:
        if "decisions" not in f:
            return pd.DataFrame(columns=list(CELL_DIMS) + ["decisions"])
        text = _read_strings(f["decisions"])
    if text.ndim == len(CELL_DIMS) - 1:            # schema 1: no gpus axis
        text = np.expand_dims(text, CELL_DIMS.index("gpus"))
    index = pd.MultiIndex.from_product([cube.axis(d) for d in CELL_DIMS], names=list(CELL_DIMS))
    return pd.DataFrame({"decisions": text.reshape(-1)}, index=index).reset_index()


def layer_times(cube: Cube) -> pd.DataFrame:
    """One row per (profiled cell, layer): forward and backward time [ms] in
    network order, with the cell's coordinates."""
    rows = []
    with h5py.File(cube.path, "r") as f:
        if "layer_times" not in f or "group" not in f["layer_times"]:
            return pd.DataFrame(columns=LAYER_COLUMNS)
        index = f["layer_times"]
        for name in _read_strings(index["group"]).reshape(-1):
            g = index[name]
            coords = {k: _text(g.attrs[k]) for k in ("device", "engine", "network", "precision", "phase")}
            ints = {k: int(np.asarray(g.attrs.get(k, [1 if k == "gpus" else 0])).reshape(-1)[0])
                    for k in ("batch", "gpus", "replica")}
            layers = _read_strings(g["layer"]).reshape(-1)
            kinds = _read_strings(g["kind"]).reshape(-1) if "kind" in g else [""] * len(layers)
            forward = np.asarray(g["forward_ms"][()], dtype=float)
            backward = np.asarray(g["backward_ms"][()], dtype=float) if "backward_ms" in g else np.zeros(len(layers))
            for layer, kind, fw, bw in zip(layers, kinds, forward, backward):
                rows.append(dict(coords, **ints, layer=layer, kind=kind, forward_ms=fw, backward_ms=bw))
    return pd.DataFrame(rows, columns=LAYER_COLUMNS)


# Algorithms that do fewer multiplications than a direct convolution, so that
# "FLOPs of the direct count ÷ time" can exceed the device's peak (cuDNN's names,
# as the engine writes them in `decisions`).
FEWER_MULTIPLICATIONS = ("FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED")
# cuDNN math modes that use tensor cores (algorithms.cpp: math_type_name): in an
# fp32 tensor's convolution that is TF32.
TENSOR_CORE_MATH = ("tc", "tc-conv")
_BRACKETED = re.compile(r"\([^()]*\)|\[[^\[\]]*\]|\{[^{}]*\}")
_FIELD = re.compile(r"(?:^|[\s;,:])([a-z_]+)=([^\s;,]*)")
_ALGORITHM = re.compile(r"^([A-Za-z0-9_]+)(?:/([a-z-]+))?")


@dataclass
class DecisionFields:
    """The fields of a cell's ``decisions`` that say how it computed: the recipe's
    name (``recipe=fp32-strict``), the algorithm and math mode chosen for each
    convolution direction, and the fully-connected GEMM's compute type. Only the
    choices count: the candidate lists (``{...}``, ``[...]``) and the recipe's
    description (``(...)``) are prose about them, not choices."""
    recipe: str = ""
    algorithms: list = field(default_factory=list)    # (direction, algorithm, math), one per convolution direction
    fc_compute: str = ""                               # "32F", "32F_FAST_TF32"; "" when not recorded
    matmul_precision: str = ""                         # JAX: "float32", "tensorfloat32"


def decision_fields(text: str) -> DecisionFields:
    stripped = text or ""
    while True:   # innermost groups first: a description may hold a bracketed part
        shorter = _BRACKETED.sub("", stripped)
        if shorter == stripped:
            break
        stripped = shorter
    out = DecisionFields()
    for key, value in _FIELD.findall(stripped):
        if key == "recipe":
            out.recipe = value
        elif key in ("fwd", "bwd_data", "bwd_filter"):
            m = _ALGORITHM.match(value)
            if m and value != "-":
                out.algorithms.append((key, m.group(1).upper(), m.group(2) or ""))
        elif key == "fc":
            out.fc_compute = value.split("/", 1)[-1]
        elif key == "matmul_precision":
            out.matmul_precision = value
    return out


def above_peak_reason(decision_text: str, precision: str) -> str:
    """Why a cell's effective TFLOP/s can exceed the peak, from the recipe and the
    algorithms its ``decisions`` record (never from words of their descriptions:
    "TF32 off everywhere" is the strict recipe's description, not TF32)."""
    f = decision_fields(decision_text)
    algorithms = sorted({a for _, a, _ in f.algorithms if a in FEWER_MULTIPLICATIONS})
    reasons = []
    if algorithms:
        reasons.append(f"{'/'.join(algorithms)} convolutions (fewer multiplications than the direct count)")
    if precision == "fp32":
        tf32 = []
        if f.recipe and f.recipe != "fp32-strict":
            tf32.append(f"recipe={f.recipe}")
        tensor_core = sorted({f"{d}={a}/{m}" for d, a, m in f.algorithms if m in TENSOR_CORE_MATH})
        if tensor_core:
            tf32.append(f"{len(tensor_core)} convolution choice(s) with tensor-core math, e.g. {tensor_core[0]}")
        if "TF32" in f.fc_compute.upper():
            tf32.append(f"fc={f.fc_compute}")
        if f.matmul_precision == "tensorfloat32":
            tf32.append("matmul_precision=tensorfloat32")
        if tf32:
            reasons.append("TF32 tensor-core math in an fp32 cell (" + ", ".join(tf32) + ")")
    if not reasons:
        return "no algorithm in `decisions` explains it: check the measurement"
    return "; ".join(reasons)
