"""What the agreement tests share (test_worker_agreement.py, test_jax_worker.py): `crossbench check`
of one network at batch 2 in fp32, held to the bounds of analysis/crossbench_analysis/agreement.py
(where the measurements behind them are written) against the oneDNN engine's."""
import json
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "analysis"))
from crossbench_analysis.agreement import (  # noqa: E402,F401  (the bounds, re-exported to the tests)
    NETWORKS, RELATIVE, RESNET_TENSOR_MEDIAN, RESNET_TENSOR_WORST, RESNET_TOTAL, RESNETS, compare)


def require_onednn(crossbench_binary):
    """Skips unless the binary has the oneDNN engine (the reference of every agreement test)."""
    engines = subprocess.run([str(crossbench_binary), "list", "engines"], capture_output=True, text=True,
                             timeout=60).stdout
    if not any(line.split()[:3] == ["onednn", "cpu", "yes"] for line in engines.splitlines()):
        pytest.skip(f"{crossbench_binary} is built without the oneDNN engine")


def check_cells(run_crossbench, network, engines, *extra):
    """{(engine, phase): the check line} of `crossbench check` for one network at batch 2, fp32."""
    result = run_crossbench("check", "--set", f"matrix.networks={network}", "--set", f"matrix.engines={engines}",
                            "--set", "matrix.precisions=fp32", "--set", "matrix.batches=2",
                            "--set", "matrix.phases=inference,training", "--set", "measure.seed=42",
                            # a worker's preparation (jax: compiling) and check may take this long
                            "--set", "measure.cell_time_limit_s=600", *extra, timeout=1800)
    assert result.returncode == 0, result.stderr + result.stdout
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    cells = {(row["engine"], row["phase"]): row for row in rows}
    assert len(cells) == len(rows) == 2 * len(engines.split(",")), result.stdout
    for key, row in cells.items():
        assert (row["network"], row["precision"], row["batch"]) == (network, "fp32", 2), row
        assert row["status"] == "ok" and row["finite"], (key, row["message"])
    return cells


def assert_agrees_with_onednn(run_crossbench, network, engine, *extra):
    """`crossbench check` of `network` under onednn and `engine` (extra: more `check` arguments,
    such as the worker's command); `engine`'s loss and gradient norms equal oneDNN's."""
    cells = check_cells(run_crossbench, network, f"onednn,{engine}", *extra)
    phases = ("inference", "training")
    assert_agree(network, {p: cells[("onednn", p)] for p in phases}, {p: cells[(engine, p)] for p in phases}, engine)


def assert_agree(network, reference, other, other_name):
    """`other`'s check equals `reference`'s (the oneDNN engine's): the bounds of
    crossbench_analysis.agreement."""
    result = compare(network, reference, other, other_name, "onednn")
    print(f"{network}: {other_name} against onednn: loss {result.loss_error}, total gradient norm "
          f"{result.total_error:.2e}, per tensor median {result.tensor_median:.2e}, worst {result.tensor_worst:.2e} "
          f"(tensor {result.worst_tensor})")
    assert result.agrees, (network, other_name, result.failures)
