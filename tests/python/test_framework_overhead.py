"""bench/gpu_framework_overhead.py's standalone PyTorch loop builds the recipe the worker builds
(the H200's eager bf16 mismatch, bench/README.md): the same parameter and input dtypes, memory
formats, TF32 switches, autocast, mode and step (gradients set to None, no update), checked on the
CPU for every recipe a CPU runs; and the standalone side replays crossbench's cell order."""
import importlib.util
import json
import pathlib
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not importable by this Python")

REPO = pathlib.Path(__file__).resolve().parents[2]
WORKERS = REPO / "src" / "workers"
if str(WORKERS) not in sys.path:
    sys.path.insert(0, str(WORKERS))

from pytorch import worker as pt_worker  # noqa: E402
from test_worker_protocol import prepare_request  # noqa: E402

spec = importlib.util.spec_from_file_location("gpu_framework_overhead", REPO / "bench" / "gpu_framework_overhead.py")
overhead = importlib.util.module_from_spec(spec)
spec.loader.exec_module(overhead)


def short(dtype):
    return str(dtype).replace("torch.", "")


def switches():
    return (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32,
            torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark)


def facts(model, x, training, autocast):
    """What a recipe decides, as comparable values."""
    with autocast():
        logits = model(x)
        loss = model.loss(logits, torch.zeros(x.shape[0], dtype=torch.long))
    return dict(parameters=[(short(p.dtype), p.is_contiguous(memory_format=torch.channels_last) and p.dim() == 4)
                            for p in model.parameters()],
                buffers=sorted({short(b.dtype) for b in model.buffers() if b.is_floating_point()}),
                x=(short(x.dtype), tuple(x.shape)), logits=short(logits.dtype), loss=short(loss.dtype),
                training=model.training, switches=switches())


@pytest.mark.parametrize("phase", ["inference", "training"])
@pytest.mark.parametrize("precision", ["fp32", "bf16", "amp-bf16"])
def test_the_standalone_loop_builds_the_workers_recipe(precision, phase, tmp_path):
    request = prepare_request(precision, phase)
    graph = tmp_path / "small.json"
    graph.write_text(json.dumps(request["graph"]))
    model, x, labels, step, mark = overhead.torch_cell(torch, graph, precision, phase, 2, "cpu")
    assert mark is None  # eager
    standalone = facts(model, x, phase == "training", step.autocast)
    session = pt_worker.PytorchSession(torch, request, compile_model=False)
    worker = facts(session.model, session.x, phase == "training", session._autocast)
    assert standalone == worker
    # The step: gradients set to None first and filled by backward, no optimizer (update = none).
    step()
    assert len(session.run_steps(1, 60.0, False)) == 1
    grads = [p.grad for p in model.parameters()]
    worker_grads = [p.grad for p in session.model.parameters()]
    if phase == "training":
        assert all(g is not None for g in grads) and session.optimizer is None
        assert [short(g.dtype) for g in grads] == [short(g.dtype) for g in worker_grads]
    else:
        assert all(g is None for g in grads) and all(g is None for g in worker_grads)


def test_the_standalone_side_replays_crossbenchs_order(tmp_path):
    journal = tmp_path / "c.h5.journal"
    rows = [{"type": "header"}] + [{"type": "result", "result": {"network": "resnet50", "precision": p, "phase": ph}}
                                   for p, ph in (("tf32", "training"), ("bf16", "training"), ("bf16", "inference"))]
    journal.write_text("".join(f"0badc0de {json.dumps(r)}\n" for r in rows) + "torn line\n")
    order = overhead.journal_order(journal)
    assert order == [("resnet50", "tf32", "training"), ("resnet50", "bf16", "training"),
                     ("resnet50", "bf16", "inference")]
    args = type("Args", (), dict(order=",".join("/".join(c) for c in order), networks="x", precisions="y",
                                 phases="z"))
    assert list(overhead.cells_of(args)) == order
    assert overhead.journal_order(tmp_path / "missing.journal") == []


@pytest.mark.parametrize("shared", [False, True])
def test_the_standalone_side_runs_a_process_per_cell_like_the_workers(monkeypatch, shared):
    # crossbench's workers end with their cell ([engine] worker_per_cell = true): the standalone
    # side gives each cell its own process too, unless both sides are told to share one.
    children = []

    def child(args, variant, cells):
        children.append(list(cells))
        return {cell: {"median_ms": 1.0} for cell in cells}

    monkeypatch.setattr(overhead, "standalone_child", child)
    order = [("resnet50", "bf16", "training"), ("resnet50", "bf16", "inference"), ("alexnet", "tf32", "training")]
    args = type("Args", (), dict(order=None, shared_process=shared, networks="x", precisions="y", phases="z"))
    rows = overhead.standalone_rows(args, "eager", order)
    assert set(rows) == set(order)
    assert children == ([order] if shared else [[cell] for cell in order])


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_standalone_loop_times_the_workers_own_values_unless_told_random(precision, tmp_path):
    # A kernel's time can depend on the values it reads (the harness check compares like with like):
    # --data synthetic (the default) gives the standalone loop the worker's weights, input and labels
    # bit for bit; --data random draws its own.
    request = prepare_request(precision, "training")
    graph = tmp_path / "small.json"
    graph.write_text(json.dumps(request["graph"]))
    session = pt_worker.PytorchSession(torch, request, compile_model=False)
    model, x, labels, _, _ = overhead.torch_cell(torch, graph, precision, "training", session.batch, "cpu")
    worker_parameters = list(session.model.parameters())
    assert len(worker_parameters) == len(list(model.parameters())) > 0
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), worker_parameters))
    assert torch.equal(x, session.x) and torch.equal(labels, session.labels)
    model, x, labels, _, _ = overhead.torch_cell(torch, graph, precision, "training", session.batch, "cpu",
                                                 data="random")
    weights = [p for p in model.parameters() if p.dim() > 1]
    assert weights and not any(torch.equal(a, b) for a, b in zip(weights, [p for p in worker_parameters if p.dim() > 1]))
    assert not torch.equal(x, session.x) and x.shape == session.x.shape and x.dtype == session.x.dtype
    assert -1 <= float(x.min()) < float(x.max()) <= 1
    with pytest.raises(ValueError, match="one of synthetic, random"):
        overhead.torch_cell(torch, graph, precision, "training", 2, "cpu", data="zeros")


def test_the_kernel_profile_runs_the_workers_session_on_either_values(tmp_path):
    # bench/gpu_torch_kernels.py --data synthetic,random: the worker's session, its values replaced in
    # place by the standalone loop's random ones for the second; both timed and profiled.
    spec = importlib.util.spec_from_file_location("gpu_torch_kernels", REPO / "bench" / "gpu_torch_kernels.py")
    kernels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernels)
    request = prepare_request("fp32", "inference")
    worker = kernels.load_worker()
    worker.PytorchAdapter(compile_model=False).hello()
    args = type("Args", (), dict(batch=2, warmup=1, steps=2, top=5, compile_cache="none"))
    rows = [kernels.profile_cell(torch, worker, request["graph"], "small", "fp32", "inference", args, "eager", data)
            for data in ("synthetic", "random")]
    assert [row["data"] for row in rows] == ["synthetic", "random"]
    assert all(row["median_ms"] > 0 and row["kernel_count"] > 0 for row in rows)


def test_a_compiled_standalone_cell_finds_the_workers_modules(monkeypatch, tmp_path):
    # torch_cells imports the worker's InductorCache before torch_cell runs: src/workers must be on
    # sys.path by then, whichever module imported first (a reduce-overhead cell failed so in call 49).
    monkeypatch.setattr(sys, "path", [p for p in sys.path if pathlib.Path(p).resolve() != WORKERS.resolve()])
    for name in [n for n in sys.modules if n == "pytorch" or n.startswith("pytorch.")]:
        monkeypatch.delitem(sys.modules, name)
    args = type("Args", (), dict(order="net/fp32/inference", compile_cache="none", data="synthetic", batch=2,
                                 graphs_dir=str(tmp_path), warmup=0, steps=1))
    rows = list(overhead.torch_cells(args, "reduce-overhead"))
    assert len(rows) == 1
    assert "No module named" not in rows[0].get("message", ""), rows[0]
