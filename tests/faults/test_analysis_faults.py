"""The analysis command line: OS errors are a message and exit 2, never a
traceback; existing outputs are replaced only with --force."""
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
