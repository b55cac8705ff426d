"""The JAX worker (src/workers/jax/worker.py) spoken to directly over the JSON-lines protocol.

Needs a python with jax: $CROSSBENCH_JAX_PYTHON, else /usr/bin/python3 when it imports jax;
otherwise the numeric tests skip. The reference loss comes from the PyTorch worker run the
same way (skipped when torch is missing)."""
import json
import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("CROSSBENCH_BUILD_DIR", REPO / "build"))
JAX_WORKER = REPO / "src" / "workers" / "jax" / "worker.py"
TORCH_WORKER = REPO / "src" / "workers" / "pytorch" / "worker.py"
SYSTEM_PYTHON = "/usr/bin/python3"


def imports(python, module):
    try:
        return subprocess.run([python, "-c", f"import {module}"], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def jax_python():
    """(python, None) for a python that imports jax, or (None, why not)."""
    chosen = os.environ.get("CROSSBENCH_JAX_PYTHON")
    if chosen:
        if imports(chosen, "jax"):
            return chosen, None
        return None, f"CROSSBENCH_JAX_PYTHON={chosen} cannot import jax"
    if imports(SYSTEM_PYTHON, "jax"):
        return SYSTEM_PYTHON, None
    return None, f"jax is not importable by {SYSTEM_PYTHON}; set CROSSBENCH_JAX_PYTHON to a python with jax"


@pytest.fixture(scope="module")
def alexnet_graph():
    binary = BUILD / "crossbench"
    if not binary.exists():
        pytest.skip(f"crossbench binary not built at {binary} (set CROSSBENCH_BUILD_DIR)")
    result = subprocess.run([str(binary), "export-network", "alexnet"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def converse(python, worker, graph, *, seed=42, batch=2, phase="training", precision="fp32"):
    """hello, prepare, measure, check, release, exit; returns the replies by type."""
    requests = [
        dict(type="prepare", cell=dict(network=graph["name"], precision=precision, batch=batch, phase=phase,
                                       replica=0),
             graph=graph, seed=seed, update="none", learning_rate=0.01, threads=2, layout="auto"),
        dict(type="measure", warmup=1, min_steps=2, max_steps=2, target_ci=0.5, time_limit_s=300),
        dict(type="check"),
        dict(type="release"),
        dict(type="exit"),
    ]
    text = "".join(json.dumps(dict(protocol=1, **r)) + "\n" for r in requests)
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", JAX_PLATFORMS="cpu", OMP_NUM_THREADS="2")
    result = subprocess.run([python, "-u", str(worker)], input=text, capture_output=True, text=True,
                            timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    replies = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert all(r["protocol"] == 1 for r in replies)
    by_type = {r["type"]: r for r in replies}
    assert [r["type"] for r in replies] == ["hello", "prepared", "measured", "checked", "released"], \
        (replies, result.stderr[-4000:])
    return by_type


def test_jax_unsupported_without_site_packages():
    result = subprocess.run([SYSTEM_PYTHON, "-S", "-u", str(JAX_WORKER)], input="", capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    hello = json.loads(result.stdout.splitlines()[0])
    assert hello["type"] == "hello" and hello["protocol"] == 1 and hello["worker"] == "jax"
    assert hello["status"] == "unsupported"
    assert "JAX is not importable by" in hello["message"]
    assert "pip install jax (CPU) or jax[cuda12]" in hello["message"]


def test_jax_alexnet_training_matches_pytorch(alexnet_graph):
    python, why = jax_python()
    if python is None:
        pytest.skip(why)
    jax_replies = converse(python, JAX_WORKER, alexnet_graph)
    hello = jax_replies["hello"]
    assert hello["status"] == "ok" and hello["framework"].startswith("jax ") and hello["device"]
    assert jax_replies["prepared"]["status"] == "ok", jax_replies["prepared"]
    measured = jax_replies["measured"]
    assert measured["status"] == "ok", measured
    assert len(measured["samples_ms"]) == 2 and all(t > 0 for t in measured["samples_ms"])
    assert "jax" in measured["decisions"]
    checked = jax_replies["checked"]
    assert checked["status"] == "ok" and checked["finite"], checked
    assert checked["loss"] > 0
    # alexnet: 8 layers with weight + bias
    assert len(checked["gradient_norms"]) == 16 and all(n > 0 for n in checked["gradient_norms"])
    print("jax check:", {k: checked[k] for k in ("loss", "logits_checksum", "gradient_norm")})

    if not imports(SYSTEM_PYTHON, "torch"):
        pytest.skip("torch is not importable by /usr/bin/python3: no PyTorch reference")
    reference = converse(SYSTEM_PYTHON, TORCH_WORKER, alexnet_graph)["checked"]
    assert reference["status"] == "ok", reference
    print("pytorch check:", {k: reference[k] for k in ("loss", "logits_checksum", "gradient_norm")})
    assert checked["loss"] == pytest.approx(reference["loss"], rel=1e-3)
    assert checked["gradient_norm"] == pytest.approx(reference["gradient_norm"], rel=1e-2)
    for mine, theirs in zip(checked["gradient_norms"], reference["gradient_norms"]):
        assert mine == pytest.approx(theirs, rel=1e-2)
