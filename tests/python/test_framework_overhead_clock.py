"""The standalone JAX loop's clock (bench/gpu_framework_overhead.py): steps queued back to back."""
import importlib.util
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_the_pipelined_clock_keeps_steps_queued_ahead_of_the_one_it_waits_on():
    """pipelined_step_ms: each wait finds in_flight later steps already dispatched, a sample per step, and
    nothing left in flight at the end."""
    spec = importlib.util.spec_from_file_location("overhead", REPO / "bench" / "gpu_framework_overhead.py")
    overhead = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(overhead)
    dispatched, waited, ahead = [], [], []

    def dispatch():
        dispatched.append(len(dispatched))
        return dispatched[-1]

    def wait(step):
        ahead.append(len(dispatched) - 1 - step)  # steps dispatched after the one waited on
        waited.append(step)

    times = overhead.pipelined_step_ms(dispatch, wait, steps=5, in_flight=3)
    assert len(times) == 5 and all(t >= 0 for t in times)
    assert waited == dispatched == list(range(9))  # in order, every one of them
    assert ahead[:6] == [3] * 6  # the first wait, then one per sample: 3 steps queued behind each
    assert ahead[6:] == [2, 1, 0]  # the drain
    with pytest.raises(ValueError, match="steps"):
        overhead.pipelined_step_ms(dispatch, wait, steps=0)


def test_the_host_issue_time_is_one_step_onto_an_empty_queue_and_the_median_of_them():
    """host_issue_ms: the queue drained before every step (and after the last), the host's clock around the step
    alone, the median of the repeats: steps that take 1, 20, 3, 4 and 5 ms on the host give 4 ms."""
    spec = importlib.util.spec_from_file_location("overhead", REPO / "bench" / "gpu_framework_overhead.py")
    overhead = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(overhead)
    import time

    events = []
    durations = iter([0.001, 0.020, 0.003, 0.004, 0.005])

    def step():
        events.append("step")
        time.sleep(next(durations))

    issue = overhead.host_issue_ms(step, lambda: events.append("sync"), repeats=5)
    assert events == ["sync", "step"] * 5 + ["sync"]
    assert 4.0 <= issue < 19.0  # the median's step slept 4 ms; the 20 ms outlier does not move it
    with pytest.raises(ValueError, match="repeats"):
        overhead.host_issue_ms(step, lambda: None, repeats=0)
