"""bench/gpu_jax_clock.py's reading of the GPU's timestamps, on made-up traces: its steps found
by their ops (equal chunks with the same op names, else the widest gaps) and timed from the first
op's start to the last op's end [ms], and the device-paced intervals between steps' last ends."""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import gpu_jax_clock as clock  # noqa: E402


def steps_of(starts_ns, kernels=("conv", "gemm", "relu"), length_ns=100_000, spacing_ns=200_000):
    """Ops (start, end, name) [ns] of steps beginning at starts_ns, `kernels` back to back-ish."""
    ops = []
    for start in starts_ns:
        for k, name in enumerate(kernels):
            ops.append((start + k * spacing_ns, start + k * spacing_ns + length_ns, name))
    return sorted(ops)


def test_equal_chunks_with_the_same_names_are_the_steps():
    ops = steps_of([0, 5_000_000, 10_000_000])
    groups, how = clock.group_steps(ops, 3)
    assert "3 ops per step" in how
    # first start to last end: 2 * 200 us + 100 us = 0.5 ms each
    assert clock.spans_ms(groups) == pytest.approx([0.5, 0.5, 0.5])
    assert clock.completion_intervals_ms(groups) == pytest.approx([5.0, 5.0])


def test_uneven_steps_are_cut_at_the_widest_gaps():
    # A stray op in step 2 (3 + 4 + 3 = 10 ops: not 3 equal chunks): the host syncs' gaps cut it.
    ops = steps_of([0, 5_000_000, 10_000_000])
    ops = sorted(ops + [(5_650_000, 5_700_000, "memset")])
    groups, how = clock.group_steps(ops, 3)
    assert "widest gaps" in how
    assert [len(g) for g in groups] == [3, 4, 3]
    assert clock.spans_ms(groups) == pytest.approx([0.5, 0.7, 0.5])


def test_no_ops_no_steps():
    assert clock.group_steps([], 4) == ([], "no GPU ops")
    assert clock.spans_ms([]) == [] and clock.completion_intervals_ms([]) == []
    assert clock.median([]) != clock.median([])  # NaN: nothing measured


def test_host_to_device_copies_are_not_the_steps_work():
    assert clock.H2D.search("MemcpyH2D") and clock.H2D.search("memcpy HtoD")
    assert not clock.H2D.search("MemcpyD2D") and not clock.H2D.search("sm90_xmma_gemm_bf16")


def test_the_events_column_is_judged_against_device_paced_and_the_loop():
    ratios = clock.event_ratios(e_ms=2.0, c_ms=2.01, d_ms=1.9)
    assert ratios["c_over_e"] == pytest.approx(1.005) and ratios["c_within_1pct_of_e"] is True
    assert ratios["e_over_d"] == pytest.approx(2.0 / 1.9) and ratios["e_within_1pct_of_d"] is False
    missing = clock.event_ratios(e_ms=float("nan"), c_ms=2.0, d_ms=1.9)  # no events (library not found)
    assert missing["c_within_1pct_of_e"] is None and missing["e_within_1pct_of_d"] is None
    rows = [dict(status="ok", **clock.event_ratios(2.0, 2.01, 1.99)), dict(status="ok", **ratios),
            dict(status="skipped"), dict(status="ok", **missing)]
    assert clock.verdict(rows) == ("c (device-paced) within 1% of e (events, the same steps): 2 of 2 cells; "
                                   "e (events) within 1% of d (device loop): 1 of 2 cells")
    assert clock.verdict([dict(status="ok", **missing)]).endswith("e (events) within 1% of d (device loop): not measured")
