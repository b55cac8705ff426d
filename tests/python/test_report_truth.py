"""The report says nothing false and loses no device (issue 27): above-peak
reasons from the recipe and the chosen algorithms, never from words of their
descriptions; full device keys in tables, figure titles and the legend; the
matrix that ran; wide tables that scroll; every figure also as SVG; JAX's peak
memory attributed to its cell; and the MLPerf-style system description."""
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "analysis"))

from crossbench_analysis import cube_extras, system_desc  # noqa: E402
from crossbench_analysis.cube import CELL_DIMS, load  # noqa: E402
from crossbench_analysis.report import Report  # noqa: E402
from crossbench_analysis.synthetic import demo_cube  # noqa: E402

# The cuDNN engine's strict-fp32 cells on the H200 (exhaustive search): its
# decisions read "recipe=fp32-strict (...; TF32 off everywhere)" and choose FFT
# and Winograd algorithms for many convolutions.
CUBE20 = REPO / "bench" / "results" / "2026-12-01" / "cube20" / "cube20.h5"


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def strict_fp32_decisions():
    with h5py.File(CUBE20, "r") as f:
        engines = [_text(e) for e in f["engine"][()]]
        precisions = [_text(p) for p in f["precision"][()]]
        decisions = f["decisions"][()]
    e, p = engines.index("cudnn"), precisions.index("fp32")
    texts = [_text(t) for t in np.take(np.take(decisions, [e], axis=1), [p], axis=3).reshape(-1)]
    return [t for t in texts if t]


def test_strict_fp32_cell_with_fft_and_winograd_is_explained_by_its_algorithms_not_tf32():
    texts = strict_fp32_decisions()
    both = [t for t in texts if "fwd=FFT" in t and "WINOGRAD_NONFUSED/fma" in t]
    assert both, "cube20 has a strict fp32 cuDNN cell that chose FFT and Winograd"
    for text in texts:
        assert "TF32 off everywhere" in text        # the description that the old regex took for TF32
        fields = cube_extras.decision_fields(text)
        assert fields.recipe == "fp32-strict"
        assert all(math in ("fma", "") for _, _, math in fields.algorithms), "strict fp32 chose FMA math only"
        reason = cube_extras.above_peak_reason(text, "fp32")
        assert "TF32" not in reason, reason
    reason = cube_extras.above_peak_reason(both[0], "fp32")
    assert reason.startswith("FFT") and "WINOGRAD_NONFUSED" in reason and "fewer multiplications" in reason


def test_only_chosen_algorithms_count_not_the_candidates():
    # FFT appears only among the re-timed candidates ({...}) and in a lost cuBLAS try ([...]).
    text = ("recipe=fp32-strict (fp32 tensors and math; TF32 off everywhere) fc=cublas/32F; "
            "conv1:fwd=IMPLICIT_PRECOMP_GEMM/fma+bias+relu[im2col_gemm 0.8ms>=0.6ms]{IMPLICIT_PRECOMP_GEMM/fma 0.64, "
            "FFT/fma 0.9},bwd_data=-,bwd_filter=ALGO_0/fma{ALGO_0/fma 0.77, WINOGRAD_NONFUSED/fma 0.9}")
    assert "check the measurement" in cube_extras.above_peak_reason(text, "fp32")


@pytest.mark.parametrize("text, field", [
    ("recipe=tf32 (fp32 tensors, TF32 tensor-core math) conv1:fwd=IMPLICIT_GEMM/tc", "recipe=tf32"),
    ("recipe=fp32-strict (x) conv1:fwd=IMPLICIT_GEMM/tc", "fwd=IMPLICIT_GEMM/tc"),
    ("recipe=fp32-strict (x) fc=cublas/32F_FAST_TF32", "fc=32F_FAST_TF32"),
    ("jax 0.4 jit recipe=fp32-strict (x) [fp32 params; matmul_precision=tensorfloat32] "
     "matmul_precision=tensorfloat32", "matmul_precision=tensorfloat32"),
])
def test_tf32_in_an_fp32_cell_is_named_by_the_field_that_shows_it(text, field):
    reason = cube_extras.above_peak_reason(text, "fp32")
    assert "TF32 tensor-core math in an fp32 cell" in reason and field in reason, reason
    assert "TF32" not in cube_extras.above_peak_reason(text, "tf32")


LONG = "NVIDIA H200 (132 SMs, sm_90, 140 GiB) [site=a-very-long-site-name-for-the-cluster power=500W]"
LONG_B = LONG.replace("site=a-", "site=b-")


@pytest.fixture(scope="module")
def tagged_report(tmp_path_factory):
    """A report of two devices whose keys differ only in their tags, far past 40
    characters: every table and figure must tell them apart."""
    out = tmp_path_factory.mktemp("tagged")
    path = out / "tagged.h5"
    demo_cube(path)
    cube = load(path)
    with h5py.File(path, "r+") as f:   # rename the demo's two devices (a string dimension scale)
        names = [LONG, LONG_B] + [_text(d) for d in f["device"][()]][2:]
        f["device"][...] = np.array(names, dtype=object)
        if "ranks" in f and "device_key" in f["ranks"]:
            keys = [_text(k) for k in f["ranks"]["device_key"][()]]
            mapping = dict(zip(cube.devices, names))
            f["ranks"]["device_key"][...] = np.array([mapping.get(k, k) for k in keys], dtype=object)
    report = Report(load(path), out)
    doc = report.build()
    (out / "report.md").write_text(doc.markdown(out))
    (out / "report.html").write_text(doc.html())
    return doc, out


def test_device_keys_are_never_cut(tagged_report):
    doc, out = tagged_report
    md = (out / "report.md").read_text()
    assert LONG in md and LONG_B in md
    assert not re.search(r"site=[ab]-very-long[^\]|]*…", md), "a device key was cut"
    # Every figure title names its device whole (the title wraps instead).
    svgs = [p.read_text() for p in doc.vector_figures]
    assert any("site=a-very-long-site-name-for-the-cluster" in s.replace("\n", " ") or "power=500W" in s
               for s in svgs)


def test_every_figure_is_also_svg_and_linked(tagged_report):
    doc, out = tagged_report
    assert doc.figures and len(doc.vector_figures) == len(doc.figures)
    for png, svg in zip(doc.figures, doc.vector_figures):
        assert svg == png.with_suffix(".svg") and svg.read_text().lstrip().startswith("<?xml")
    html = (out / "report.html").read_text()
    assert html.count('">SVG</a>') == len(doc.figures)


def test_wide_tables_scroll_and_the_effective_matrix_is_shown(tagged_report):
    _, out = tagged_report
    html = (out / "report.html").read_text()
    assert "div.wide { max-width: 100%; overflow-x: auto; }" in html
    assert html.count("<table>") == html.count('<div class="wide"><table>')
    md = (out / "report.md").read_text()
    assert "the matrix actually run" in md
    cube = load(out / "tagged.h5")
    for axis in ("engine", "network", "precision", "batch"):
        row = [ln for ln in md.splitlines() if ln.startswith(f"| {axis} |")]
        assert row and ", ".join(map(str, cube.axis(axis))) in row[-1]


def test_jax_peak_memory_is_the_cells_not_the_process_lifetime():
    sys.path.insert(0, str(REPO / "src" / "workers"))
    sys.path.insert(0, str(REPO / "src" / "workers" / "jax"))
    import importlib
    worker = importlib.import_module("worker")
    peak = worker.cell_peak_bytes
    # A fresh process (worker_per_cell = true): the peak is the cell's.
    assert peak({"peak_bytes_in_use": 0, "bytes_in_use": 0}, {"peak_bytes_in_use": 2.0e9}) == 2.0e9
    assert peak(None, {"peak_bytes_in_use": 3.0e9}) == 3.0e9
    # A shared process: a peak that rose during the cell is the cell's ...
    assert peak({"peak_bytes_in_use": 5.35e9}, {"peak_bytes_in_use": 6.0e9}) == 6.0e9
    # ... one that did not is an earlier cell's: unknown, not 5.35 GiB for every cell.
    assert math.isnan(peak({"peak_bytes_in_use": 5.35e9}, {"peak_bytes_in_use": 5.35e9}))
    # No allocator statistics (the CPU backend): unknown.
    assert math.isnan(peak(None, None)) and math.isnan(peak({}, {"bytes_in_use": 1}))


def test_system_desc_covers_every_field_of_mlperfs_checker(tmp_path):
    result = subprocess.run([sys.executable, "-m", "crossbench_analysis", "system-desc", str(CUBE20), "-o",
                             str(tmp_path)], capture_output=True, text=True, timeout=300,
                            env={"PYTHONPATH": str(REPO / "analysis"), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    files = sorted(tmp_path.glob("system_desc_*.json"))
    cube = load(CUBE20)
    assert len(files) == len(cube.devices)
    desc = json.loads(files[0].read_text())
    cannot = desc.pop("crossbench_cannot_fill")
    # The checker's 33 required fields: each one filled or named with a reason, none both, nothing else.
    assert len(system_desc.MLPERF_REQUIRED_FIELDS) == 33
    assert set(desc) | set(cannot) == set(system_desc.MLPERF_REQUIRED_FIELDS)
    assert not set(desc) & set(cannot)
    assert list(desc) == [f for f in system_desc.MLPERF_REQUIRED_FIELDS if f in desc]   # the checker's order
    assert all(isinstance(v, str) and v for v in desc.values())
    assert all(reason for reason in cannot.values())
    ranks = cube.ranks
    assert desc["accelerator_model_name"] == "NVIDIA H200"
    assert desc["number_of_nodes"] == str(ranks["host"].nunique())
    assert str(ranks["uuid"].iloc[0]) in desc["hw_notes"]
    assert cube.attrs["cudnn_version"] in desc["other_software_stack"]
    assert "jax" in desc["framework"] and "torch" in desc["framework"]
    for field in ("submitter", "division", "status", "cooling", "host_storage_type"):
        assert field in cannot and field in result.stdout
