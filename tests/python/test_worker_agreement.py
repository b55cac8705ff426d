"""Agreement on the CPU (issue 5): for every network at batch 2 in fp32, the PyTorch worker's loss
and gradient norms equal the oneDNN engine's.

Both sides go through the product: `crossbench check` prepares each cell and prints its output
check (Session::check(): one forward, and backward in training, on the synthetic batch with
dropout step 0) as a JSON line; the onednn engine runs in process, the pytorch engine through the
worker engine, the worker process (/usr/bin/python3 with Debian's python3-torch) and the JSON-lines
protocol's `check` request. Compared (agreement.py says within what, and why): the loss in both
phases, and in training the total gradient norm and the norm of every trainable tensor (layer
order: weight, bias, gamma, beta). test_jax_worker.py does the same for the JAX worker.
"""
import subprocess

import pytest

from agreement import NETWORKS, assert_agrees_with_onednn, require_onednn


def torch_importable():
    return subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode == 0


@pytest.mark.skipif(not torch_importable(), reason="Debian's python3-torch is not installed "
                                                   "(the pytorch worker runs /usr/bin/python3)")
@pytest.mark.parametrize("network", NETWORKS)
def test_pytorch_worker_agrees_with_onednn(run_crossbench, crossbench_binary, network):
    require_onednn(crossbench_binary)
    assert_agrees_with_onednn(run_crossbench, network, "pytorch")
