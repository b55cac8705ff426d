"""`scripts/report agreement` (crossbench_analysis.agreement): engines' output checks held to a
reference engine's. A real `crossbench check` of AlexNet on the CPU (oneDNN and the PyTorch worker)
agrees; the same lines with one number moved beyond a bound differ and say which; the ResNets' looser
batch-norm bounds apply to them alone; bad input exits 2 naming the problem."""
import json
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
REPORT = REPO / "scripts" / "report"
sys.path.insert(0, str(REPO / "analysis"))
from crossbench_analysis import agreement  # noqa: E402


def report(*args):
    return subprocess.run([str(REPORT), *map(str, args)], capture_output=True, text=True, timeout=300, cwd=REPO)


def torch_importable():
    return subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def alexnet_checks(crossbench_binary):
    if not torch_importable():
        pytest.skip("Debian's python3-torch is not installed (the pytorch worker runs /usr/bin/python3)")
    result = subprocess.run([str(crossbench_binary), "check", "--set", "matrix.networks=alexnet",
                             "--set", "matrix.engines=onednn,pytorch", "--set", "matrix.precisions=fp32",
                             "--set", "matrix.batches=2", "--set", "matrix.phases=inference,training"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert {(r["engine"], r["phase"]) for r in rows} == {(e, p) for e in ("onednn", "pytorch")
                                                         for p in ("inference", "training")}
    return rows


def write_lines(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_real_check_agrees(alexnet_checks, tmp_path):
    markdown = tmp_path / "agreement.md"
    result = report("agreement", write_lines(tmp_path / "check.jsonl", alexnet_checks), "--reference", "onednn",
                    "--markdown", markdown)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "| alexnet | pytorch | onednn |" in result.stdout and "| agrees |" in result.stdout
    assert "1 comparison(s) against onednn: 1 agree, 0 differ, 0 not compared" in result.stdout
    assert "| alexnet | pytorch |" in markdown.read_text()


def test_a_moved_number_differs_and_is_named(alexnet_checks, tmp_path):
    rows = json.loads(json.dumps(alexnet_checks))
    for r in rows:
        if r["engine"] == "pytorch" and r["phase"] == "training":
            r["loss"] *= 1.01                  # 1e-2 > the 1e-3 bound
            r["gradient_norms"][3] *= 1.5
    result = report("agreement", write_lines(tmp_path / "check.jsonl", rows), "--reference", "onednn")
    assert result.returncode == 1
    assert "DIFFERS" in result.stdout and "training loss" in result.stdout
    assert "worst tensor 5.00e-01 > 0.005 (tensor 3)" in result.stdout


def test_a_failed_cell_is_not_compared_and_fails_the_run(alexnet_checks, tmp_path):
    rows = json.loads(json.dumps(alexnet_checks))
    rows[-1].update(status="failed", finite=False, message="worker exited")
    result = report("agreement", write_lines(tmp_path / "check.jsonl", rows), "--reference", "onednn")
    assert result.returncode == 1
    assert "not compared: alexnet" in result.stdout and "worker exited" in result.stdout


def check_line(network, engine, phase, loss, norms):
    training = phase == "training"
    return {"network": network, "engine": engine, "phase": phase, "precision": "fp32", "batch": 2, "status": "ok",
            "finite": True, "loss": loss, "gradient_norm": (sum(n * n for n in norms) ** 0.5) if training else None,
            "gradient_norms": norms if training else []}


@pytest.mark.parametrize("network,agrees", [("resnet50", True), ("vgg11", False)])
def test_batch_norm_bounds_apply_to_the_resnets_alone(network, agrees):
    """A worst tensor 5e-2 off with the rest exact: within the ResNets' 1e-1, beyond everyone else's 1e-3."""
    reference = {p: check_line(network, "onednn", p, 7.0, [1.0] * 10) for p in ("inference", "training")}
    other = {p: check_line(network, "jax", p, 7.0, [1.0] * 9 + [1.05]) for p in ("inference", "training")}
    result = agreement.compare(network, reference, other, "jax", "onednn")
    assert result.agrees is agrees, result.failures
    assert result.tensor_worst == pytest.approx(0.05) and result.worst_tensor == 9


def test_bad_input_exits_2_and_names_it(tmp_path):
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text('{"network": "alexnet", "engine": "onednn", "phase": "training"}\nnot json\n')
    result = report("agreement", garbage)
    assert result.returncode == 2 and "line 2: not a `crossbench check` line" in result.stderr
    only_jax = write_lines(tmp_path / "jax.jsonl", [check_line("alexnet", "jax", "training", 7.0, [1.0])])
    result = report("agreement", only_jax, "--reference", "cudnn")
    assert result.returncode == 2 and "no 'cudnn' checks (engines: jax)" in result.stderr
    result = report("agreement", tmp_path / "missing.jsonl")
    assert result.returncode == 2 and "missing.jsonl: No such file or directory" in result.stderr


def test_only_the_checks_of_one_precision_are_compared(alexnet_checks, tmp_path):
    # bf16 lines beside the fp32 ones (numbers far off) are not held to the fp32 bounds...
    far = [dict(row, precision="bf16", loss=row["loss"] * 2) for row in alexnet_checks]
    path = write_lines(tmp_path / "mixed.jsonl", alexnet_checks + far)
    result = report("agreement", path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 comparison(s) against onednn: 1 agree" in result.stdout
    # ... and a precision without stated bounds is refused, naming it.
    refused = report("agreement", path, "--precision", "bf16")
    assert refused.returncode == 2 and "no stated agreement bounds for bf16" in refused.stderr
