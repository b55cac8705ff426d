"""peaks.csv knows the GPUs that the CUDA 11.8, 12 and 13 builds serve, with sources, and the
2017 study's GPUs carry their launch prices (or say why not) for procurement's what-if."""

import csv
import io

from crossbench_analysis.peaks import DEFAULT_PEAKS, PeakTable

# device key as the cube writes it -> (row, fp32, tf32) from the vendors' data sheets [TFLOP/s]
EXPECTED = {
    "Tesla K40c (15 SMs, sm_35, 11.2 GiB)": ("Tesla K40", 4.29, None),
    "NVIDIA GeForce GTX TITAN X (24 SMs, sm_52, 11.9 GiB)": ("TITAN X", 6.6, None),
    "NVIDIA GeForce GTX 1080 (20 SMs, sm_61, 7.9 GiB)": ("GTX 1080", 8.87, None),
    "NVIDIA TITAN X (Pascal) (28 SMs, sm_61, 11.9 GiB)": ("TITAN X Pascal", 10.97, None),
    "Tesla V100-SXM2-16GB (80 SMs, sm_70, 15.8 GiB)": ("Tesla V100", 15.7, None),
    "Tesla T4 (40 SMs, sm_75, 14.6 GiB)": ("Tesla T4", 8.1, None),
    "NVIDIA A100-SXM4-80GB (108 SMs, sm_80, 79.2 GiB)": ("A100", 19.5, 156.0),
    "NVIDIA L40S (142 SMs, sm_89, 44.4 GiB)": ("L40S", 91.6, 183.0),
    "NVIDIA H100 80GB HBM3 (132 SMs, sm_90, 79.1 GiB)": ("H100", 67.0, 494.7),
    "NVIDIA H200 (132 SMs, sm_90, 139.8 GiB)": ("H200", 67.0, 494.7),
    "NVIDIA B200 (148 SMs, sm_100, 178.4 GiB)": ("B200", 75.0, 1125.0),
}


def _rows():
    lines = [ln for ln in DEFAULT_PEAKS.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    return {r["match"]: r for r in csv.DictReader(io.StringIO("\n".join(lines)))}


def test_every_generation_has_its_peaks():
    table = PeakTable.read()
    for key, (match, fp32, tf32) in EXPECTED.items():
        assert table.row_for(key)["match"] == match, key
        assert table.peak(key, "fp32").tflops == fp32, key
        assert table.peak(key, "tf32").tflops == tf32, key


def test_rows_are_well_formed_and_sourced():
    rows = _rows()
    header = DEFAULT_PEAKS.read_text().splitlines()
    lines = [ln for ln in header if ln.strip() and not ln.startswith("#")]
    width = len(next(csv.reader([lines[0]])))
    for line in lines[1:]:
        assert len(next(csv.reader([line]))) in (6, width), line  # a comma inside a field shifts columns
    for match, _, _ in EXPECTED.values():
        assert rows[match]["source"].strip(), f"{match}: no source"


def test_the_study_gpus_have_launch_prices_or_say_why_not():
    rows = _rows()
    assert rows["TITAN X"]["launch_price_usd"] == "999"
    assert rows["GTX 1080"]["launch_price_usd"] == "599"
    assert rows["TITAN X Pascal"]["launch_price_usd"] == "1200"
    assert rows["Tesla K40"]["launch_price_usd"] == ""
    assert "no list price" in rows["Tesla K40"]["price_source"]
