"""Peak TFLOP/s per device and precision: the editable table peaks.csv, then the cube.

A GPU's peak comes from peaks.csv (see the comments at its top).  A CPU's peak
comes from the cube when its /ranks table records one (``peak_<precision>_tflops``
or ``peak_tflops``), else from a row of peaks.csv that matches its model, else
it is unknown (None) and efficiency is reported as "unknown".
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

DEFAULT_PEAKS = Path(__file__).with_name("peaks.csv")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
# The mixed-precision recipes compute in 16 bits: their peak is that of their 16-bit arithmetic.
ARITHMETIC = {"amp-fp16": "fp16", "amp-bf16": "bf16"}


@dataclass(frozen=True)
class Peak:
    tflops: float | None     # None: unknown
    source: str              # "peaks.csv: H100", "cube /ranks", "unknown"


def _normalise(text: str) -> str:
    return " " + re.sub(r"[^0-9a-z]+", " ", text.lower()).strip() + " "


def _pattern(match: str) -> re.Pattern:
    # Not preceded by a letter/digit; not followed by a digit (so "A10" does not
    # match "A100", while "Tesla K40" matches "Tesla K40c").
    return re.compile(r"(?<![0-9a-z])" + re.escape(_normalise(match).strip()) + r"(?![0-9])")


class PeakTable:
    def __init__(self, rows: list[dict]):
        self.rows = rows

    @classmethod
    def read(cls, path: str | Path | None = None) -> "PeakTable":
        path = Path(path) if path else DEFAULT_PEAKS
        lines = [ln for ln in path.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
        rows = []
        for r in csv.DictReader(lines):
            match = (r.get("match") or "").strip()
            if not match:
                continue
            row = {"match": match, "pattern": _pattern(match), "note": (r.get("note") or "").strip()}
            for p in PRECISIONS:
                v = (r.get(p) or "").strip()
                row[p] = float(v) if v else None
            rows.append(row)
        return cls(rows)

    def row_for(self, device_key: str) -> dict | None:
        text = _normalise(device_key)
        hits = [r for r in self.rows if r["pattern"].search(text)]
        if not hits:
            return None
        return max(hits, key=lambda r: len(r["match"]))

    def peak(self, device_key: str, precision: str, ranks: pd.DataFrame | None = None) -> Peak:
        precision = ARITHMETIC.get(precision, precision)
        cube_peak = _peak_from_ranks(device_key, precision, ranks)
        if cube_peak is not None:
            return Peak(cube_peak, "cube /ranks")
        row = self.row_for(device_key)
        if row is not None and row.get(precision) is not None:
            return Peak(row[precision], f"peaks.csv: {row['match']}")
        return Peak(None, "unknown")


def _peak_from_ranks(device_key: str, precision: str, ranks: pd.DataFrame | None) -> float | None:
    if ranks is None or ranks.empty or "device_key" not in ranks.columns:
        return None
    rows = ranks[ranks["device_key"] == device_key]
    for col in (f"peak_{precision}_tflops", "peak_tflops" if precision == "fp32" else None):
        if col and col in rows.columns:
            vals = pd.to_numeric(rows[col], errors="coerce").dropna()
            vals = vals[vals > 0]
            if len(vals) and math.isfinite(vals.max()):
                return float(vals.max())
    return None
