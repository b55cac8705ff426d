"""The analysis command line: OS errors are a message, never a traceback:
exit 2 for what the user can fix, exit 1 when the disk failed a write;
existing outputs are replaced only with --force."""
import os
import subprocess
import sys

import pytest

from conftest import REPO


def analysis(*arguments):
    environment = dict(os.environ, PYTHONPATH=str(REPO / "analysis"))
    return subprocess.run([sys.executable, "-m", "crossbench_analysis", *map(str, arguments)], capture_output=True,
                          text=True, timeout=300, env=environment)


@pytest.fixture
def demo(tmp_path):
    path = tmp_path / "demo.h5"
    made = analysis("demo-cube", path)
    if made.returncode != 0:
        pytest.skip(f"the analysis package cannot run here: {made.stderr[-300:]}")
    return path


def test_export_into_a_missing_directory_is_a_message(tmp_path, demo):
    result = analysis("export", demo, "--csv", tmp_path / "missing" / "cells.csv")
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error:") and "Traceback" not in result.stderr
    assert "missing" in result.stderr


def test_outputs_are_not_overwritten_without_force(tmp_path, demo):
    csv = tmp_path / "cells.csv"
    csv.write_text("mine\n")
    refused = analysis("export", demo, "--csv", csv)
    assert refused.returncode == 2 and "--force" in refused.stderr
    assert csv.read_text() == "mine\n"
    assert analysis("export", demo, "--csv", csv, "--force").returncode == 0
    assert csv.read_text() != "mine\n"
    again = analysis("demo-cube", demo)
    assert again.returncode == 2 and "--force" in again.stderr


def test_export_onto_a_directory_names_it_and_does_not_advise_force(tmp_path, demo):
    # --force cannot replace a directory: advising it only led to "Is a directory".
    target = tmp_path / "a_directory"
    target.mkdir()
    for extra in ([], ["--force"]):
        result = analysis("export", demo, "--csv", target, *extra)
        assert result.returncode == 2, result.stderr
        assert "is a directory" in result.stderr and "--force" not in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


def test_export_onto_a_full_disk_exits_1(tmp_path, demo, fail_writes_shim):
    # A full disk is not bad input: exit 1, so that a wrapper retries once space is freed.
    environment = dict(os.environ, PYTHONPATH=str(REPO / "analysis"), LD_PRELOAD=str(fail_writes_shim),
                       FAIL_WRITES_MATCHING="*.csv")
    result = subprocess.run([sys.executable, "-m", "crossbench_analysis", "export", str(demo), "--csv",
                             str(tmp_path / "cells.csv")], capture_output=True, text=True, timeout=300, env=environment)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("error:") and "No space left on device" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_a_negative_threshold_is_a_value_not_an_option(demo):
    # argparse read "-5%" as an option ("expected one argument"); the threshold's own check names it.
    result = analysis("compare", demo, demo, "--fail-above", "-5%")
    assert result.returncode == 2, result.stderr
    assert "non-negative percentage" in result.stderr and "-5%" in result.stderr, result.stderr
    assert analysis("compare", demo, demo, "--fail-above", "5%").returncode == 0
