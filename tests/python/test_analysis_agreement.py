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


def check_line(network, engine, phase, loss, norms, precision="fp32"):
    training = phase == "training"
    return {"network": network, "engine": engine, "phase": phase, "precision": precision, "batch": 2, "status": "ok",
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
    refused = report("agreement", path, "--precision", "fp8")
    assert refused.returncode == 2 and "no stated agreement bounds for fp8" in refused.stderr


# ---- Bounds per precision (agreement.BOUNDS, DESIGN.md "Agreement bounds") ----------------------

def synthetic_pair(network, precision, loss_error=0.0, tensor_errors=()):
    """Reference and other check lines of `network` at `precision`: the other's training loss off by
    `loss_error` and its gradient norm i off by tensor_errors[i] (relative); 10 tensors."""
    norms = [1.0 + (tensor_errors[i] if i < len(tensor_errors) else 0.0) for i in range(10)]
    reference = {p: check_line(network, "cudnn", p, 7.0, [1.0] * 10, precision) for p in ("inference", "training")}
    other = {"inference": check_line(network, "pytorch", "inference", 7.0, [], precision),
             "training": check_line(network, "pytorch", "training", 7.0 * (1 + loss_error), norms, precision)}
    return reference, other


def test_every_precision_of_the_axis_has_stated_bounds():
    assert set(agreement.BOUNDS) == {"fp32", "tf32", "fp16", "bf16", "amp-fp16", "amp-bf16"}
    for precision, stated in agreement.BOUNDS.items():
        assert stated.why
        for kind in (stated.plain, stated.resnet):
            assert 0 < kind.loss <= kind.total * 10 and 0 < kind.tensor_median <= kind.tensor_worst <= 0.5
        # ResNets never tighter than the plain networks; lower precisions never tighter than fp32.
        assert stated.resnet.total >= stated.plain.total and stated.resnet.tensor_worst >= stated.plain.tensor_worst
        assert stated.plain.loss >= agreement.BOUNDS["fp32"].plain.loss
    assert agreement.BOUNDS["bf16"].plain.loss > agreement.BOUNDS["tf32"].plain.loss  # 8 bits round more than 11
    assert agreement.BOUNDS["amp-bf16"] == agreement.BOUNDS["bf16"]  # the same products, the same rounding


@pytest.mark.parametrize("precision", sorted(agreement.BOUNDS))
@pytest.mark.parametrize("network", ["alexnet", "resnet50"])
def test_each_precision_passes_just_inside_and_fails_just_outside(precision, network):
    bounds = agreement.bounds_of(precision, network)
    # Inside every bound: the loss, one tensor at the worst bound (the median and total stay small).
    inside = agreement.compare(network, *synthetic_pair(network, precision, 0.9 * bounds.loss,
                                                        [0.9 * bounds.tensor_worst]), "pytorch", "cudnn", precision)
    assert inside.agrees, (precision, network, inside.failures)
    # The loss just beyond its bound.
    loss = agreement.compare(network, *synthetic_pair(network, precision, 1.1 * bounds.loss), "pytorch", "cudnn",
                             precision)
    assert not loss.agrees and "training loss" in loss.failures[0], loss.failures
    # One tensor just beyond the worst bound.
    worst = agreement.compare(network, *synthetic_pair(network, precision, 0.0, [0, 0, 1.1 * bounds.tensor_worst]),
                              "pytorch", "cudnn", precision)
    assert any(f.startswith("worst tensor") and "(tensor 2)" in f for f in worst.failures), worst.failures
    # Every tensor beyond the median bound.
    median = agreement.compare(network, *synthetic_pair(network, precision, 0.0, [1.1 * bounds.tensor_median] * 10),
                               "pytorch", "cudnn", precision)
    assert any(f.startswith("per-tensor median") for f in median.failures), median.failures


def test_a_bf16_difference_passes_at_bf16_and_fails_at_fp32():
    """2e-2 apart: two correct bf16 engines can be, two fp32 engines cannot."""
    for precision, agrees in (("bf16", True), ("fp32", False)):
        result = agreement.compare("vgg11", *synthetic_pair("vgg11", precision, 2e-2, [2e-2] * 10), "pytorch",
                                   "cudnn", precision)
        assert result.agrees is agrees, (precision, result.failures)


def test_the_command_applies_the_precisions_bounds(tmp_path):
    rows = []
    for precision in ("bf16", "fp32"):
        reference, other = synthetic_pair("alexnet", precision, 2e-2, [2e-2] * 10)
        rows += list(reference.values()) + list(other.values())
    path = write_lines(tmp_path / "checks.jsonl", rows)
    bf16 = report("agreement", path, "--reference", "cudnn", "--precision", "bf16")
    assert bf16.returncode == 0, bf16.stdout + bf16.stderr
    assert "bf16 bounds (8 significant bits" in bf16.stdout and "| alexnet | pytorch | cudnn |" in bf16.stdout
    fp32 = report("agreement", path, "--reference", "cudnn", "--precision", "fp32")
    assert fp32.returncode == 1 and "DIFFERS" in fp32.stdout and "fp32 bounds (measured" in fp32.stdout
    with pytest.raises(ValueError, match="no stated agreement bounds for 'fp8'"):
        agreement.bounds_of("fp8", "alexnet")
