#!/usr/bin/env python3
"""Every attribute and dataset of two cubes that differs, by name (issue 25 item 7).

    /usr/bin/python3 cube_diff.py BEFORE.h5 AFTER.h5

bench/compare_cubes.py compares the cells' medians and memory; this lists
everything else that differs (root and group attributes, every dataset), so
that a refactor can show its cubes differ only in timings and provenance: each
line is a name and, for a short value, both values. Exit 0 always: the reader
judges which names are timings and provenance.
"""
import sys

import h5py
import numpy as np


# Dimension-scale bookkeeping: HDF5 object references, which differ between any two files.
REFERENCES = {"DIMENSION_LIST", "REFERENCE_LIST"}


def items(cube: h5py.File) -> dict:
    found = {}

    def visit(name, node):
        for attribute, value in node.attrs.items():
            if attribute not in REFERENCES:
                found[f"{name}@{attribute}"] = value
        if isinstance(node, h5py.Dataset):
            found[name] = node[()]

    for attribute, value in cube.attrs.items():
        if attribute not in REFERENCES:
            found[f"/@{attribute}"] = value
    cube.visititems(visit)
    return found


def same(a, b) -> bool:
    try:
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            a, b = np.asarray(a), np.asarray(b)
            if a.shape != b.shape:
                return False
            if a.dtype.kind == "f" and b.dtype.kind == "f":
                return bool(np.array_equal(a, b, equal_nan=True))
            return bool(np.array_equal(a, b))
        if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
            return True  # NaN, the fill value
        return bool(a == b)
    except Exception:  # noqa: BLE001 - values that cannot be compared count as different
        return False


def short(value) -> str:
    if isinstance(value, np.ndarray) and value.size > 1:
        return f"array{value.shape}"
    text = value.decode() if isinstance(value, bytes) else str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def main() -> None:
    with h5py.File(sys.argv[1], "r") as before_file, h5py.File(sys.argv[2], "r") as after_file:
        before, after = items(before_file), items(after_file)
    differing = 0
    for name in sorted(set(before) | set(after)):
        if name not in before or name not in after:
            print(f"{name}: only in {'after' if name not in before else 'before'}")
        elif not same(before[name], after[name]):
            print(f"{name}: {short(before[name])} -> {short(after[name])}")
        else:
            continue
        differing += 1
    print(f"{differing} of {len(set(before) | set(after))} names differ (dimension-scale references not compared)")


if __name__ == "__main__":
    main()
