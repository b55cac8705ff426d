"""One meaning per precision (DESIGN.md "Vocabulary"), held in the framework workers: the dtypes
of the parameters, the input, the logits and the weight gradients of a training step, per
precision, in the PyTorch worker (Debian's torch) and the JAX worker (the jax venv)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not importable by this Python")

REPO = pathlib.Path(__file__).resolve().parents[2]
WORKERS = REPO / "src" / "workers"
if str(WORKERS) not in sys.path:
    sys.path.insert(0, str(WORKERS))

from common import recipes  # noqa: E402
from common.protocol import WorkerError  # noqa: E402
from pytorch import worker as pt_worker  # noqa: E402
from test_jax_worker import jax_python  # noqa: E402
from test_worker_protocol import prepare_request  # noqa: E402

CPU_PRECISIONS = ["fp32", "bf16", "amp-bf16"]  # what a CPU runs; tf32 and fp16 are GPU recipes

# precision: (conv/fc weights and their gradients, input, logits in the step)
EXPECTED = {"fp32": ("float32", "float32", "float32"),
            "bf16": ("bfloat16", "bfloat16", "bfloat16"),
            "amp-bf16": ("float32", "float32", "bfloat16")}


def short(dtype):
    return str(dtype).replace("torch.", "")


@pytest.mark.parametrize("precision", CPU_PRECISIONS)
def test_pytorch_training_dtypes(precision):
    session = pt_worker.PytorchSession(torch, prepare_request(precision), compile_model=False)
    weights, data, logits_dtype = EXPECTED[precision]
    assert len(session.run_steps(2, 60.0, False)) == 2
    model = session.model
    seen = {}
    for name, module in model.layers.items():
        kind = type(module).__name__
        for parameter in module.parameters(recurse=False):
            seen.setdefault(kind, set()).add((short(parameter.dtype), short(parameter.grad.dtype)))
    assert seen["Conv2d"] == {(weights, weights)}
    assert seen["FullyConnected"] == {(weights, weights)}
    # Batch-norm parameters, statistics and their gradients stay fp32 in every recipe.
    assert seen["BatchNorm"] == {("float32", "float32")}
    assert {short(b.dtype) for b in model.buffers() if b.is_floating_point()} == {"float32"}
    assert short(session.x.dtype) == data
    with session._autocast():
        logits = model(session.x)
        loss = model.loss(logits, session.labels)
    assert short(logits.dtype) == logits_dtype
    assert short(loss.dtype) == "float32"  # the loss is fp32 in every recipe
    decisions = session.decisions()
    assert recipes.describe(precision) in decisions
    assert {"fp32": "[float32 parameters; allow_tf32=off]", "bf16": "[bfloat16 parameters; allow_tf32=off]",
            "amp-bf16": "[torch.autocast bf16; allow_tf32=off]"}[precision] in decisions
    check = session.check()
    assert check["finite"] and len(check["gradient_norms"]) == 6


def test_pytorch_tf32_switches_follow_the_precision():
    pt_worker.Recipe(torch, "tf32").apply_math_flags(torch)
    assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    for strict in ["fp32", "bf16", "amp-bf16", "amp-fp16", "fp16"]:
        pt_worker.Recipe(torch, "tf32").apply_math_flags(torch)
        pt_worker.Recipe(torch, strict).apply_math_flags(torch)
        assert not torch.backends.cuda.matmul.allow_tf32, strict
        assert not torch.backends.cudnn.allow_tf32, strict
        assert torch.get_float32_matmul_precision() == "highest", strict
    with pytest.raises(WorkerError):
        pt_worker.Recipe(torch, "fp8")


@pytest.mark.parametrize("precision", ["tf32", "fp16", "amp-fp16"])
def test_pytorch_gpu_recipes_are_unsupported_on_the_cpu(precision):
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: these recipes run")
    with pytest.raises(WorkerError) as raised:
        pt_worker.PytorchSession(torch, prepare_request(precision), compile_model=False)
    assert raised.value.status == "unsupported" and "CPU" in raised.value.message


JAX_DTYPES = r"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("jax_worker", sys.argv[1] + "/jax/worker.py")
worker = importlib.util.module_from_spec(spec)
sys.path.insert(0, sys.argv[1])
spec.loader.exec_module(worker)
adapter = worker.JaxAdapter()
assert adapter.hello()["status"] == "ok"
request = json.loads(sys.stdin.read())
session = worker.JaxSession(adapter.jax, request)
times = session.run_steps(2, 60.0, False)
masks = session._step_args()
loss, grads, _, logits = session._train(session.params, session.x, session.labels, masks)
print(json.dumps(dict(params=[str(p.dtype) for p in session.params], grads=[str(g.dtype) for g in grads],
                      x=str(session.x.dtype), logits=str(logits.dtype), loss=str(loss.dtype), steps=len(times),
                      batch_norm=sorted(session.batch_norm_params), decisions=session.decisions())))
"""


@pytest.mark.parametrize("precision", CPU_PRECISIONS)
def test_jax_training_dtypes(precision):
    python, why = jax_python()
    if python is None:
        pytest.skip(why)
    result = subprocess.run([python, "-c", JAX_DTYPES, str(WORKERS)], input=json.dumps(prepare_request(precision)),
                            capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, JAX_PLATFORMS="cpu", CUDA_VISIBLE_DEVICES=""))
    assert result.returncode == 0, result.stderr[-3000:]
    got = json.loads(result.stdout.splitlines()[-1])
    weights, data, logits_dtype = EXPECTED[precision]
    assert got["steps"] == 2
    batch_norm = set(got["batch_norm"])
    assert batch_norm == {2, 3}  # conv weight, conv bias, gamma, beta, fc weight, fc bias
    for i, (p, g) in enumerate(zip(got["params"], got["grads"])):
        expected = "float32" if i in batch_norm else weights
        assert (p, g) == (expected, expected), (i, p, g)
    assert got["x"] == data and got["logits"] == logits_dtype and got["loss"] == "float32"
    assert recipes.describe(precision) in got["decisions"]
    assert {"fp32": "[fp32 params; matmul_precision=float32]", "bf16": "[bf16 params; matmul_precision=float32]",
            "amp-bf16": "[fp32 params cast to bf16 in the jitted step"}[precision] in got["decisions"]
    assert "timed_steps: retraces=0" in got["decisions"], got["decisions"]


def test_every_engine_names_the_same_recipes(run_crossbench):
    """The workers' recipe texts (common/recipes.py) are the native engines' (core's recipe_of)."""
    result = run_crossbench("list", "precisions", "--json")
    assert result.returncode == 0, result.stderr
    native = {row["name"]: row["recipe"] for row in json.loads(result.stdout)}
    assert native == recipes.RECIPES
    with pytest.raises(ValueError, match="unknown precision 'fp8'"):
        recipes.describe("fp8")
