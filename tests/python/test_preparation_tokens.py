"""src/workers/common/preparation.py: the decisions' tokens that split a worker cell's untimed preparation,
the same in every worker, in the form bench/results' tables parse (seconds to two decimals, then why)."""
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "src" / "workers"))
from common import preparation  # noqa: E402


def test_each_token_says_seconds_and_what_they_cover():
    text = (preparation.describe(0.123, (4.5, 0.25)) + preparation.describe_compiler_setup(3.456, "imports")
            + preparation.describe_prepare(12.0))
    assert text == (" setup=0.12s(untimed: model, inputs) startup=import 4.50s + device 0.25s(untimed, in hello)"
                    " compiler_setup=3.46s(untimed: imports) prepare=12.00s(untimed: the worker's whole prepare"
                    " request)")
    # A later cell of a running worker tells no startup.
    assert "startup=" not in preparation.describe(0.5, None)


def test_the_startup_clock_splits_the_import_from_the_device():
    clock = preparation.StartupClock()
    clock.imported()
    imported, device = clock.seconds()
    assert imported >= 0 and device >= 0
    # Never told the import: all of it counts as the device's first use.
    assert preparation.StartupClock().seconds()[0] == 0


def test_the_gap_a_table_computes_from_the_tokens():
    """bench/results/2026-12-09's table: prepare less setup, compile and compiler_setup is what remains."""
    decisions = ("torch 2.11 torch.compile compile=10.8s(untimed)" + preparation.describe_compiler_setup(2.4, "x")
                 + preparation.describe(0.24, None) + preparation.describe_prepare(16.12))
    seconds = {name: float(value) for name, value in re.findall(r" (compile|compiler_setup|setup|prepare)=(\d+\.\d+)s",
                                                                   decisions)}
    assert round(seconds["prepare"] - seconds["setup"] - seconds["compile"] - seconds["compiler_setup"], 2) == 2.68
