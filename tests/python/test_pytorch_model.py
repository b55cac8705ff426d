"""The PyTorch worker's model (src/workers/pytorch/model.py) and the numpy port of the synthetic
generator (src/workers/common/synthetic.py): bit-exact against the C++ reference values, every
network of `crossbench export-network` builds and runs, training gives finite gradients."""
import json
import math
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not importable by this Python "
                                            "(use Debian's /usr/bin/python3 with python3-torch)")

REPO = pathlib.Path(__file__).resolve().parents[2]
WORKERS = REPO / "src" / "workers"
if str(WORKERS) not in sys.path:
    sys.path.insert(0, str(WORKERS))

from common import synthetic  # noqa: E402
from pytorch import model as pt_model  # noqa: E402

BUILD = pathlib.Path(os.environ.get("CROSSBENCH_BUILD_DIR", REPO / "build"))
NETWORKS = ["alexnet", "overfeat", "vgg11", "vgg16", "vgg19", "googlenet", "resnet50", "resnet101", "resnet152"]
# DESIGN.md: parameters (M) of each network.
PARAMETERS_M = {"alexnet": 61.1, "overfeat": 145.9, "vgg11": 132.9, "vgg16": 138.4, "vgg19": 143.7,
                "googlenet": 7.0, "resnet50": 25.6, "resnet101": 44.5, "resnet152": 60.2}

# ---- The synthetic generator: include/crossbench/synthetic.hpp, tests/networks/synthetic_test.cpp ----

HASH_REFERENCES = [
    (0, 0, 0, 0xE220A8397B1DCDAF),
    (42, 1, 0, 0x57E1FABA65107204),
    (42, 1, 1, 0xF4ABD143FEB24055),
    (42, 2, 7, 0x3E3E0F26E4519090),
    (42, 32, 12345, 0x12942C75268F5C0E),
    (7, 21474836548, 999999, 0x26AE80A0805402C2),  # tensor_id(3, dropout_mask) + (5 << 32)
    (2**64 - 1, 123456789, 2**40, 0xFFC0BD699750FDE5),
]


def tiny_alexnet_head():
    """Layers 0 and 1 of alexnet (input 3x224x224, conv1 64/11/s4/p2): enough for its conv1 weights."""
    return {"format": "crossbench-network/1", "name": "alexnet-head", "classes": 1000,
            "input": {"channels": 3, "height": 224, "width": 224},
            "layers": [{"index": 0, "name": "input", "kind": "input", "inputs": [], "params": {},
                        "output": [3, 224, 224]},
                       {"index": 1, "name": "conv1", "kind": "convolution", "inputs": [0],
                        "params": {"out_channels": 64, "kernel": 11, "stride": 4, "padding": 2, "bias": True},
                        "output": [64, 55, 55]}]}


@pytest.mark.parametrize("seed,tensor,index,expected", HASH_REFERENCES)
def test_hash_matches_the_cpp_reference_values(seed, tensor, index, expected):
    assert synthetic.hash(seed, tensor, index) == expected
    assert int(synthetic.hash_array(seed, tensor, np.array([index], dtype=np.uint64))[0]) == expected
    assert synthetic.uniform01(seed, tensor, index) == np.float32(expected >> 40) / np.float32(16777216.0)
    assert synthetic.uniform01_array(seed, tensor, np.array([index], dtype=np.uint64))[0] == \
        synthetic.uniform01(seed, tensor, index)


def test_tensor_ids():
    assert synthetic.tensor_id(0, synthetic.WEIGHT) == 16
    assert synthetic.tensor_id(1, synthetic.WEIGHT) == 32
    assert synthetic.tensor_id(3, synthetic.DROPOUT_MASK) == 68
    assert synthetic.dropout_tensor_id(3, 5) == 21474836548
    with pytest.raises(ValueError):
        synthetic.tensor_id(-1, synthetic.WEIGHT)


def test_alexnet_conv1_weights_inputs_and_labels_are_bit_exact():
    network = tiny_alexnet_head()
    weights = synthetic.parameter(network, 1, synthetic.WEIGHT, 42)
    assert weights.shape == (64, 3, 11, 11) and weights.dtype == np.float32
    bits = weights.reshape(-1).view(np.uint32)
    assert [hex(bits[i]) for i in (0, 1, 2, 23231)] == ["0x3adeae2d", "0x3d77de0a", "0x3d11a220", "0xbdc24908"]
    assert np.array_equal(synthetic.parameter(network, 1, synthetic.BIAS, 42), np.zeros(64, np.float32))
    assert synthetic.parameter(network, 1, synthetic.BN_GAMMA, 42).size == 0
    images = synthetic.input(network, 2, 42)
    assert images.shape == (2, 3, 224, 224)
    assert images.reshape(-1)[0] == np.float32(-0.313416243)
    assert images.reshape(-1)[1] == np.float32(0.911493421)
    assert synthetic.labels(network, 4, 42).tolist() == [931, 375, 603, 663]


def test_fill_uniform_is_order_independent_and_chunk_seamless():
    count = 3 * (1 << 16) + 17  # crosses the generator's chunk boundaries
    values = synthetic.fill_uniform(count, 3, 99, 0.5)
    for i in (0, 1, (1 << 16) - 1, 1 << 16, (1 << 16) + 1, count - 1):
        assert values[i] == np.float32(0.5) * (np.float32(2) * synthetic.uniform01(3, 99, i) - np.float32(1))
    assert np.array_equal(synthetic.fill_uniform(10, 3, 99, 0.5), values[:10])
    assert values.min() >= -0.5 and values.max() < 0.5


def test_dropout_masks_numpy_scalar_and_torch_agree():
    count, rate = 20000, 0.4
    mask = synthetic.dropout_keep_mask(42, 15, 0, count, rate)
    for i in (0, 1, 777, count - 1):
        assert mask[i] == synthetic.dropout_keep(42, 15, 0, i, rate)
    u = synthetic.uniform01_array(42, synthetic.tensor_id(15, synthetic.DROPOUT_MASK), np.arange(count))
    assert np.array_equal(mask, u.astype(np.float64) >= rate)
    assert abs(mask.mean() - 0.6) < 0.02
    next_step = synthetic.dropout_keep_mask(42, 15, 1, count, rate)
    assert (mask == next_step).mean() < 0.6  # a fresh mask each step
    for step in (0, 1, 5, 2**31):
        assert np.array_equal(pt_model.dropout_keep_mask(42, 15, step, count, rate).numpy(),
                              synthetic.dropout_keep_mask(42, 15, step, count, rate))
    assert synthetic.dropout_keep(1, 3, 0, 0, 0.0)


# ---- Layer conventions, on a small hand-made graph -------------------------------------------

def small_graph():
    """Every layer kind once: conv, relu, max_pool (padded), avg_pool (padded, ceil_mode), lrn,
    batch_norm, two branches concatenated, a residual add, flatten, dropout, fc, loss."""
    L = []

    def layer(kind, inputs, params, output):
        L.append({"index": len(L), "name": f"{kind}{len(L)}", "kind": kind, "inputs": inputs,
                  "params": params, "output": output})
        return len(L) - 1

    x = layer("input", [], {}, [3, 9, 9])
    c = layer("convolution", [x], {"out_channels": 6, "kernel": 3, "stride": 1, "padding": 1, "bias": True}, [6, 9, 9])
    r = layer("relu", [c], {}, [6, 9, 9])
    n = layer("lrn", [r], {"size": 5, "alpha": 0.5, "beta": 0.75, "k": 2.0}, [6, 9, 9])
    b = layer("batch_norm", [n], {"epsilon": 1e-5, "momentum": 0.1}, [6, 9, 9])
    m = layer("max_pool", [b], {"kernel": 3, "stride": 2, "padding": 1, "ceil_mode": False}, [6, 5, 5])
    a = layer("avg_pool", [b], {"kernel": 3, "stride": 2, "padding": 1, "ceil_mode": True}, [6, 5, 5])
    cat = layer("concat", [m, a], {}, [12, 5, 5])
    c2 = layer("convolution", [cat], {"out_channels": 12, "kernel": 1, "stride": 1, "padding": 0, "bias": False},
               [12, 5, 5])
    s = layer("add", [c2, cat], {}, [12, 5, 5])
    r2 = layer("relu", [s], {}, [12, 5, 5])
    d = layer("dropout", [r2], {"rate": 0.4}, [12, 5, 5])
    f = layer("flatten", [d], {}, [300, 1, 1])
    fc = layer("fully_connected", [f], {"out_features": 10, "bias": True}, [10, 1, 1])
    layer("softmax_cross_entropy", [fc], {}, [1, 1, 1])
    return {"format": "crossbench-network/1", "name": "small", "classes": 10,
            "input": {"channels": 3, "height": 9, "width": 9}, "layers": L}


def reference_forward(graph, x, seed, step, training):
    """The graph by the formulas of src/networks/json.cpp, in float64 numpy."""
    v = {0: x.astype(np.float64)}
    for layer in graph["layers"][1:-1]:
        i, kind, p, ins = layer["index"], layer["kind"], layer["params"], layer["inputs"]
        a = v[ins[0]]
        if kind == "convolution":
            w = synthetic.parameter(graph, i, synthetic.WEIGHT, seed).astype(np.float64)
            out = torch.nn.functional.conv2d(torch.from_numpy(a), torch.from_numpy(w), stride=p["stride"],
                                             padding=p["padding"]).numpy()
            if p["bias"]:
                out = out + synthetic.parameter(graph, i, synthetic.BIAS, seed)[None, :, None, None]
        elif kind == "relu":
            out = np.maximum(a, 0)
        elif kind == "lrn":
            size, half = p["size"], p["size"] // 2
            sq = np.pad(a * a, ((0, 0), (half, size - 1 - half), (0, 0), (0, 0)))
            window = sum(sq[:, j:j + a.shape[1]] for j in range(size))
            out = a / (p["k"] + p["alpha"] / size * window) ** p["beta"]
        elif kind == "batch_norm":
            if training:
                mean, var = a.mean(axis=(0, 2, 3), keepdims=True), a.var(axis=(0, 2, 3), keepdims=True)
            else:
                mean, var = 0.0, 1.0
            out = (a - mean) / np.sqrt(var + p["epsilon"])  # gamma 1, beta 0
        elif kind in ("max_pool", "avg_pool"):
            k, st, pad = p["kernel"], p["stride"], p["padding"]
            oh = layer["output"][1]
            fill = -np.inf if kind == "max_pool" else 0.0
            big = np.full(a.shape[:2] + (a.shape[2] + 2 * pad + k, a.shape[3] + 2 * pad + k), fill)
            big[:, :, pad:pad + a.shape[2], pad:pad + a.shape[3]] = a
            out = np.empty(a.shape[:2] + (oh, oh))
            for yy in range(oh):
                for xx in range(oh):
                    win = big[:, :, yy * st:yy * st + k, xx * st:xx * st + k]
                    if kind == "max_pool":
                        out[:, :, yy, xx] = win.max(axis=(2, 3))
                    else:
                        # count_include_pad=True: the divisor is the window clipped to input + padding
                        # (k * k for every window that does not run past the padded input).
                        hi_y = min(yy * st + k, a.shape[2] + 2 * pad) - yy * st
                        hi_x = min(xx * st + k, a.shape[3] + 2 * pad) - xx * st
                        out[:, :, yy, xx] = win.sum(axis=(2, 3)) / (hi_y * hi_x)
        elif kind == "concat":
            out = np.concatenate([v[j] for j in ins], axis=1)
        elif kind == "add":
            out = v[ins[0]] + v[ins[1]]
        elif kind == "flatten":
            out = a.reshape(a.shape[0], -1)
        elif kind == "dropout":
            if training:
                keep = synthetic.dropout_keep_mask(seed, i, step, a.size, p["rate"]).reshape(a.shape)
                out = np.where(keep, a * float(np.float32(1 / (1 - p["rate"]))), 0.0)
            else:
                out = a
        elif kind == "fully_connected":
            w = synthetic.parameter(graph, i, synthetic.WEIGHT, seed).astype(np.float64)
            out = a.reshape(a.shape[0], -1) @ w.T
        v[i] = out
    return v[graph["layers"][-1]["inputs"][0]]


@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("training", [False, True])
def test_every_layer_kind_follows_the_json_conventions(training, channels_last):
    graph, seed, batch = small_graph(), 7, 3
    net = pt_model.CrossbenchModel(graph, seed, channels_last=channels_last).double()
    net.train(training)
    x = torch.from_numpy(synthetic.input(graph, batch, seed)).double()
    for step in range(2):  # the dropout mask follows the model's step counter
        assert net.step == (step if training else 0)
        with torch.no_grad():
            logits = net(x)
        expected = reference_forward(graph, synthetic.input(graph, batch, seed), seed, step, training)
        np.testing.assert_allclose(logits.numpy(), expected, rtol=1e-9, atol=1e-12)
    labels = net.synthetic_labels(batch)
    assert labels.tolist() == synthetic.labels(graph, batch, seed).tolist()
    loss = net.loss(logits, labels)
    shifted = expected - expected.max(axis=1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    assert loss.item() == pytest.approx(-log_softmax[np.arange(batch), labels.numpy()].mean(), rel=1e-6)


def test_check_is_step_0_and_leaves_the_model_as_it_found_it():
    graph, batch = small_graph(), 4
    net = pt_model.CrossbenchModel(graph, 5)
    x, labels = net.synthetic_input(batch), net.synthetic_labels(batch)
    net.training_step(x, labels)
    net.training_step(x, labels)
    bn = net.layers["4"]
    stats = (bn.running_mean.clone(), bn.running_var.clone())
    result = net.check(x, labels, training=True)
    assert net.step == 2 and net.training
    assert torch.equal(bn.running_mean, stats[0]) and torch.equal(bn.running_var, stats[1])
    assert result["finite"] and result["gradient_norm"] > 0 and len(result["gradient_norms"]) == 7
    fresh = pt_model.CrossbenchModel(graph, 5)
    fresh.train()
    assert result["loss"] == pytest.approx(fresh.loss(fresh(x), labels).item(), rel=1e-6)  # step 0
    net.reset_state()
    assert net.step == 0 and torch.equal(bn.running_var, torch.ones(6))
    inference = net.check(x, labels, training=False)
    assert math.isnan(inference["gradient_norm"]) and net.training
    assert inference["logits_checksum"] == pytest.approx(net.inference_step(x).double().sum().item(), rel=1e-6)


def test_model_weights_are_the_synthetic_ones_and_the_format_is_checked():
    graph = small_graph()
    net = pt_model.build_model(graph, seed=3)
    conv = net.layers["1"]
    assert np.array_equal(conv.weight.detach().numpy(), synthetic.parameter(graph, 1, synthetic.WEIGHT, 3))
    assert net.parameter_count() == sum(
        synthetic.parameter(graph, i, s, 3).size for i in range(len(graph["layers"]))
        for s in (synthetic.WEIGHT, synthetic.BIAS, synthetic.BN_GAMMA, synthetic.BN_BETA))
    with pytest.raises(ValueError, match="format"):
        pt_model.load_network({**graph, "format": "crossbench-network/0"})
    assert pt_model.load_network(json.dumps(graph))["name"] == "small"


# ---- The nine networks, from `crossbench export-network` -------------------------------------

@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    binary = BUILD / "crossbench"
    if not binary.exists():
        pytest.skip(f"crossbench binary not built at {binary} (set CROSSBENCH_BUILD_DIR)")
    directory = tmp_path_factory.mktemp("networks")
    graphs = {}
    for name in NETWORKS:
        path = directory / f"{name}.json"
        result = subprocess.run([str(binary), "export-network", name, "--output", str(path)],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        graphs[name] = json.loads(path.read_text())
    return graphs


@pytest.fixture(autouse=True, scope="module")
def threads():
    previous = torch.get_num_threads()
    torch.set_num_threads(os.cpu_count() or 1)
    yield
    torch.set_num_threads(previous)


@pytest.mark.parametrize("name", NETWORKS)
def test_network_builds_and_infers_at_batch_1(exported, name):
    graph = exported[name]
    net = pt_model.CrossbenchModel(graph, seed=42)
    assert net.parameter_count() == graph["totals"]["parameters"]
    assert abs(net.parameter_count() / 1e6 - PARAMETERS_M[name]) < 0.06
    logits = net.inference_step(net.synthetic_input(1))
    assert logits.shape == (1, 1000)
    assert torch.isfinite(logits).all()
    assert logits.abs().max() > 0


@pytest.mark.parametrize("name,channels_last,batch", [("alexnet", False, 2), ("googlenet", True, 1),
                                                      ("resnet50", False, 1)])
def test_training_step_gives_finite_gradients(exported, name, channels_last, batch):
    """alexnet: dropout on a flattened tensor; googlenet: LRN, concat, dropout, NHWC; resnet50:
    batch-norm and residual adds."""
    net = pt_model.CrossbenchModel(exported[name], seed=42, channels_last=channels_last)
    x, labels = net.synthetic_input(batch), net.synthetic_labels(batch)
    loss = net.training_step(x, labels)
    assert net.step == 1
    assert math.isfinite(loss.item()) and loss.item() > 0
    for parameter_name, parameter in net.named_parameters():
        assert parameter.grad is not None, parameter_name
        assert torch.isfinite(parameter.grad).all(), parameter_name
    assert any(p.grad.abs().max() > 0 for p in net.parameters())
    if name == "alexnet":  # again: gradients set to None first, the next step's dropout masks
        first = [p.grad.clone() for p in net.parameters()]
        net.training_step(x, labels)
        assert net.step == 2
        assert all(torch.isfinite(p.grad).all() for p in net.parameters())
        assert any(not torch.equal(a, p.grad) for a, p in zip(first, net.parameters()))


# ---- Agreement with the native oneDNN engine --------------------------------------------------

def test_losses_agree_with_the_onednn_engine(exported, tmp_path):
    """The same network on the same data: the loss of crossbench's output check (one forward, and
    backward in training, dropout step 0; 6 digits in the cube's message) equals the PyTorch model's.
    googlenet has every layer kind but batch-norm and add: conv, ReLU, ceil-mode max-pools, LRN,
    concat, avg-pool, flatten, dropout (training), fc. (One network at batch 1 keeps this quick.)"""
    h5py = pytest.importorskip("h5py")
    binary = BUILD / "crossbench"
    engines = subprocess.run([str(binary), "list", "engines"], capture_output=True, text=True, timeout=60).stdout
    if not any(line.split()[:3] == ["onednn", "cpu", "yes"] for line in engines.splitlines()):
        pytest.skip(f"{binary} is built without the oneDNN engine")
    networks, batch = ["googlenet"], 1
    job, cube = tmp_path / "agree.ini", tmp_path / "agree.h5"
    job.write_text("# the PyTorch model's agreement with the oneDNN engine\n[matrix]\n"
                   f"networks = {', '.join(networks)}\nengines = onednn\nprecisions = fp32\nbatches = {batch}\n"
                   "phases = inference, training\n[measure]\nwarmup = 0\nmin_steps = 1\nmax_steps = 1\n"
                   f"target_ci = 0.5\nseed = 42\n[output]\npath = {cube}\n")
    env = dict(os.environ, OMP_NUM_THREADS=str(os.cpu_count() or 1), OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    done = subprocess.run([str(binary), "run", "--job", str(job), "--output", str(cube), "--quiet"],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    with h5py.File(cube, "r") as f:
        axis = {d: [v.decode() for v in f[d][()]] for d in ("network", "phase")}
        messages = f["message"].asstr()[()]
        engine = [v.decode() for v in f["engine"][()]].index("onednn")
        enum = {int(v): k for k, v in h5py.check_enum_dtype(f["status"].dtype).items()}
        status = np.asarray(f["status"][()])
    for name in networks:
        net = pt_model.CrossbenchModel(exported[name], seed=42)
        x, labels = net.synthetic_input(batch), net.synthetic_labels(batch)
        for phase in ("inference", "training"):
            cell = (0, engine, axis["network"].index(name), 0, 0, axis["phase"].index(phase), 0, 0)  # gpus 1, replica 0
            message = str(messages[cell])
            assert enum[int(status[cell])] == "ok", message
            native = float(message.rsplit("loss ", 1)[1].split()[0])
            ours = net.check(x, labels, training=phase == "training")
            assert ours["finite"]
            assert ours["loss"] == pytest.approx(native, rel=2e-5), (name, phase)


def test_dropout_masks_from_a_step_on_the_device_are_the_same():
    # What a compiled model uses (CrossbenchModel.use_device_dropout_step): the step a 0-d int64
    # tensor, the stream state computed from it on the device.
    count, rate = 5000, 0.4
    for seed in (42, 2**63 + 5):
        for step in (0, 1, 5, 2**31):
            device = pt_model.device_step_keep_mask(torch.tensor(step, dtype=torch.int64), pt_model._signed(seed),
                                                    15, count, rate)
            assert np.array_equal(device.numpy(), synthetic.dropout_keep_mask(seed, 15, step, count, rate)), (seed, step)


def test_a_model_with_the_device_step_trains_as_the_host_step():
    graph = small_graph()
    if not pt_model.CrossbenchModel(graph, seed=3).use_device_dropout_step():
        pytest.skip(f"torch {torch.__version__} has no torch.library.custom_op")
    host, device = pt_model.CrossbenchModel(graph, seed=3), pt_model.CrossbenchModel(graph, seed=3)
    assert device.use_device_dropout_step()
    x, labels = host.synthetic_input(4), host.synthetic_labels(4)
    for _ in range(3):  # steps 0, 1, 2: a fresh mask each
        a, b = host.training_step(x, labels), device.training_step(x, labels)
        assert torch.equal(a, b)
