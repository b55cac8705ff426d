"""The parts of a cube that ``cube.load`` leaves out: each cell's ``decisions``
text and the ``/layer_times`` groups (DESIGN.md "The results cube").

Both are read on demand with h5py, by the report only: a cube without them
(an older writer, a run without ``--layer-times``) gives an empty result.
"""

from __future__ import annotations

import re

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
# "FLOPs of the direct count ÷ time" can exceed the device's peak.
_FEWER_MULTIPLICATIONS = re.compile(r"\b(FFT(?:_TILING)?|WINOGRAD(?:_NONFUSED)?)\b", re.IGNORECASE)
_TF32 = re.compile(r"TF32", re.IGNORECASE)


def above_peak_reason(decision_text: str, precision: str) -> str:
    """Why a cell's effective TFLOP/s can exceed the peak, from its ``decisions``."""
    algorithms = sorted({m.group(1).upper() for m in _FEWER_MULTIPLICATIONS.finditer(decision_text or "")})
    reasons = []
    if algorithms:
        reasons.append(f"{'/'.join(algorithms)} convolutions (fewer multiplications than the direct count)")
    if precision == "fp32" and _TF32.search(decision_text or ""):
        reasons.append("TF32 tensor-core math in an fp32 cell")
    if not reasons:
        return "no algorithm in `decisions` explains it: check the measurement"
    return "; ".join(reasons)
