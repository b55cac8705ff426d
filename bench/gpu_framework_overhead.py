#!/usr/bin/env python3
"""Does the harness add anything? Each framework timed OUTSIDE crossbench, in a standalone loop on
the same exported network, next to the same cells measured THROUGH crossbench (worker, protocol,
Runner), on one GPU. Target (issue 20): every crossbench row within 3% of its standalone loop.

Variants (--variants):
  eager            PyTorch eager                                  crossbench engine `pytorch`
  reduce-overhead  torch.compile(mode="reduce-overhead"), CUDA graphs   `pytorch-compile`
  max-autotune     torch.compile(mode="max-autotune")            `pytorch-compile`, engine.compile_mode=max-autotune
  jax              jax.jit                                        `jax`

The standalone loops are written here, not borrowed from the workers: the network from
`crossbench export-network` built by the workers' graph builders (src/workers/pytorch/model.py,
the Network class of src/workers/jax/model.py), the precision's recipe of DESIGN.md (tf32: fp32
tensors with TF32 math; bf16: pure bf16 weights, activations and gradients, batch-norm in fp32,
channels_last for PyTorch), the worker's own values by default (--data synthetic: crossbench's
synthetic weights, input and labels, numpy seconds per cell; --data random: uniform values drawn on
the device, as a framework's users start from: a kernel's time can depend on the values, and the
harness check compares like with like), torch.backends.cudnn.benchmark on; training = forward + fp32 cross-entropy + backward, no update; inference = eval under
no_grad. PyTorch: CUDA events around each step, one synchronisation after the last;
torch.compile compiles the layers once (untimed) and each step starts with
torch.compiler.cudagraph_mark_step_begin(). JAX: one jitted step (dropout masks fixed on the
device), dispatched back to back as a training loop runs it, IN_FLIGHT steps queued ahead of the
one the host waits on; a sample is the time between two consecutive completions as the host sees
them (pipelined_step_ms). Each step alone (perf_counter around a call and its block_until_ready)
would put the host's dispatch of every step on the clock, which no loop at its best pays: on the
H200 that alone-step loop was 4-21% slower than the same jitted steps queued (call 36,
bench/results/2026-12-03/call36). Warm-up, then --steps steps; the median. Through crossbench: `crossbench run` with warmup = --warmup and min_steps = max_steps =
--steps, the median from the cube.

  python3 bench/gpu_framework_overhead.py --networks resnet50 --variants eager,reduce-overhead,jax \\
      --crossbench ".bundle/run .bundle/bin/crossbench" --out /tmp/out/frameworks.json

Both sides compile from one persistent compile cache (--compile-cache, default
<work-dir>/compile-cache-<variant>): crossbench's workers as `engine.compile_cache`, the standalone
loops through the workers' own cache classes (InductorCache, JaxCache). crossbench runs first, so
a standalone loop whose graph is the worker's loads the worker's compiled code (its row says
`compile_cache=... (warm ...; fx_graph_cache hits=...)`): both sides then time the same kernels
(max-autotune's choices included), which is what a check of the harness wants, and the compile,
untimed on both sides, is paid once (issue 29 item 5). `--compile-cache none`: each side compiles
cold.

Each variant's standalone cells run in a child process of their own (a framework's CUDA
context and allocator never share the GPU with another's); results are printed and written
(--out) after every cell (every variant with --shared-process), so a stage cut short by its time
limit keeps what it measured. Each cell runs through crossbench in a cube of its own (--work-dir).
"""
import argparse
import json
import math
import os
import pathlib
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
WORKERS = REPO / "src" / "workers"
VARIANTS = {  # variant: (crossbench engine, extra --set)
    "eager": ("pytorch", []),
    "reduce-overhead": ("pytorch-compile", ["engine.compile_mode=reduce-overhead"]),
    "max-autotune": ("pytorch-compile", ["engine.compile_mode=max-autotune"]),
    "jax": ("jax", []),
}
TARGET = 0.03  # crossbench within 3% of the standalone loop
DATA = ("synthetic", "random")  # --data: the worker's own values, or values drawn on the device
IN_FLIGHT = 3  # JAX: steps queued on the device beyond the one the host waits on


def median(values):
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        return math.nan
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


def pipelined_step_ms(dispatch, wait, steps, in_flight=IN_FLIGHT):
    """Per-step times [ms] of `steps` steps run back to back: `dispatch()` queues one step and returns
    what `wait(...)` blocks on. `in_flight` steps are queued ahead of the one waited on, so the device
    never idles for the host's dispatch (unless the host is the slower, which is then what is
    measured); a sample is the time between two consecutive completions. The steps queued at the end
    are waited on before returning (nothing of the loop stays in flight)."""
    if steps < 1 or in_flight < 1:
        raise ValueError(f"pipelined_step_ms: steps ({steps}) and in_flight ({in_flight}) must be at least 1")
    pending = [dispatch() for _ in range(in_flight + 1)]
    wait(pending.pop(0))
    previous = time.perf_counter()
    times = []
    for _ in range(steps):
        pending.append(dispatch())
        wait(pending.pop(0))
        now = time.perf_counter()
        times.append((now - previous) * 1e3)
        previous = now
    for output in pending:
        wait(output)
    return times


def host_issue_ms(step, synchronize, repeats=5):
    """The host's time [ms] to issue one step onto an idle device: `repeats` times, `synchronize()` (the
    device's queue empty), then the host clock around `step()` alone; their median. Set beside the step's
    device time it says whether the loop is paced by the host's launches (issue close to or above the
    device time) rather than by the device: there which process is faster depends on the host, not the
    harness (results/2026-12-15: eager bf16 training). Untimed, outside the measured steps."""
    if repeats < 1:
        raise ValueError(f"host_issue_ms: repeats ({repeats}) must be at least 1")
    times = []
    for _ in range(repeats):
        synchronize()
        begin = time.perf_counter()
        step()
        times.append((time.perf_counter() - begin) * 1e3)
    synchronize()
    return median(times)


# ---- Standalone loops (run in a child process: --standalone VARIANT) ---------------------------

def random_parameters(torch, model):
    """Uniform weights drawn on the device (bound sqrt(6 / fan-in)), zero biases, batch-norm at gamma 1,
    beta 0 and fresh running statistics: values a framework's users start from (--data random)."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, (torch.nn.Conv2d, torch.nn.Linear)):
                bound = math.sqrt(6.0 / module.weight[0].numel())
                module.weight.uniform_(-bound, bound)
                if module.bias is not None:
                    module.bias.zero_()
            elif isinstance(module, torch.nn.BatchNorm2d):
                module.weight.fill_(1)
                module.bias.zero_()
                module.reset_running_stats()


def torch_cell(torch, graph, precision, phase, batch, device, variant="eager", data="synthetic"):
    """One PyTorch cell as the worker builds it, from the worker's own ``Recipe`` (src/workers/pytorch/
    worker.py): its TF32 switches, parameter dtype, autocast (amp-*) and channels_last rule, and
    cudnn.benchmark on; the model, its input and labels (the worker's synthetic values, or with
    data="random" values drawn on the device), the step, and the cudagraph step mark (None in
    eager). The step is the worker's: gradients set to None, forward and the fp32 loss under
    the recipe's autocast, backward, no update (update = none); inference under no_grad.
    tests/python/test_framework_overhead.py holds it equal to the worker's session on the CPU."""
    sys.path.insert(0, str(WORKERS))
    from pytorch import model as pt_model
    from pytorch import worker as pt_worker

    if data not in DATA:
        raise ValueError(f"data {data!r}: one of {', '.join(DATA)}")
    recipe = pt_worker.Recipe(torch, precision)
    recipe.apply_math_flags(torch)
    torch.backends.cudnn.benchmark = True
    cuda = str(device).startswith("cuda")
    training = phase == "training"
    synthetic_reset = pt_model.CrossbenchModel.reset_parameters
    if data == "random":  # skip the synthetic generator's numpy seconds: the values are drawn below
        pt_model.CrossbenchModel.reset_parameters = lambda self, seed=None: None
    try:
        model = pt_model.CrossbenchModel(str(graph), seed=42, device=device, dtype=recipe.parameter_dtype,
                                         channels_last=recipe.sixteen_bit_compute and cuda)  # the worker's layout=auto
    finally:
        pt_model.CrossbenchModel.reset_parameters = synthetic_reset
    model.train(training)
    if data == "synthetic":
        x, labels = model.synthetic_input(batch), model.synthetic_labels(batch)
    else:
        random_parameters(torch, model)
        x = model.prepare_input((torch.rand(batch, *model._outputs[0], device=device) * 2 - 1).to(recipe.parameter_dtype))
        labels = torch.randint(0, model.classes, (batch,), device=device)
    mark = None
    if variant != "eager":
        model.use_device_dropout_step()  # dropout masks inside the compiled graph (model.py)
        model.layers_forward = torch.compile(model.layers_forward, mode=variant)
        mark = torch.compiler.cudagraph_mark_step_begin

    def autocast():
        kind = "cuda" if cuda else "cpu"
        if recipe.autocast_dtype is None:
            return torch.autocast(kind, enabled=False)
        return torch.autocast(kind, dtype=recipe.autocast_dtype)

    def step():
        if mark is not None:
            mark()
        if training:
            model.zero_grad(set_to_none=True)
            with autocast():
                loss = model.loss(model(x), labels)
            loss.backward()
        else:
            with torch.no_grad(), autocast():
                model(x)

    step.autocast = autocast
    return model, x, labels, step, mark


def torch_cells(args, variant):
    import torch

    sys.path.insert(0, str(WORKERS))  # the workers' modules (InductorCache below, the model in torch_cell)
    for network, precision, phase in cells_of(args):
        started = time.time()
        model = x = labels = None
        cache = None
        try:
            if variant != "eager":
                from pytorch import worker as pt_worker
                cache = pt_worker.InductorCache(torch, args.compile_cache)
            model, x, labels, step, mark = torch_cell(torch, graph_path(args, network), precision, phase, args.batch,
                                                      "cuda", variant, args.data)
            tick = time.perf_counter()
            for _ in range(3 if mark is not None else 1):
                step()
            torch.cuda.synchronize()
            compile_s = time.perf_counter() - tick
            if cache is not None:
                cache.compiled()
            for _ in range(args.warmup):
                step()
            torch.cuda.synchronize()
            issue_ms = host_issue_ms(step, torch.cuda.synchronize)
            events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                      for _ in range(args.steps)]
            for begin, end in events:
                begin.record()
                step()
                end.record()
            torch.cuda.synchronize()
            row = dict(status="ok", median_ms=median([b.elapsed_time(e) for b, e in events]), compile_s=compile_s,
                       samples=len(events), timing="events(CUDA events around each step; one synchronisation after the last)",
                       host_issue_ms=issue_ms)
            if cache is not None:
                row["compile_cache"] = cache.describe()
        except torch.cuda.OutOfMemoryError as error:
            row = dict(status="oom", median_ms=math.nan, message=str(error).splitlines()[0])
        except Exception as error:  # a failed cell is data
            row = dict(status="failed", median_ms=math.nan, message=f"{type(error).__name__}: {error}"[:300])
        model = x = labels = None
        torch.cuda.empty_cache()
        if variant != "eager" and hasattr(torch, "_dynamo"):  # a torch without torch.compile failed the cell above
            torch._dynamo.reset()
        yield dict(network=network, precision=precision, phase=phase, seconds=time.time() - started, data=args.data,
                   **row)


def jax_cells(args):
    import importlib.util

    import jax
    import jax.numpy as jnp
    import numpy as np

    sys.path.insert(0, str(WORKERS))
    spec = importlib.util.spec_from_file_location("crossbench_jax_worker", WORKERS / "jax" / "worker.py")
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    from common import synthetic

    worker.np, worker.synthetic = np, synthetic
    for network, precision, phase in cells_of(args):
        started = time.time()
        graph = json.loads(graph_path(args, network).read_text())
        training = phase == "training"
        dtype = jnp.bfloat16 if precision == "bf16" else jnp.float32
        matmul = "tensorfloat32" if precision == "tf32" else "float32"
        try:
            # The network's structure without its synthetic values: Network() with a stand-in
            # parameter generator of the right shapes (zeros), then random values on the device.
            real_parameter = synthetic.parameter
            synthetic.parameter = lambda g, i, slot, seed: np.zeros(real_parameter_shape(real_parameter, g, i, slot),
                                                                     np.float32)
            try:
                net = worker.Network(graph, 42)
            finally:
                synthetic.parameter = real_parameter
            key = jax.random.PRNGKey(0)
            batch_norm = {pos for slots in net.slots.values() for slot, pos in slots.items()
                          if slot in (synthetic.BN_GAMMA, synthetic.BN_BETA)}
            params = []
            for i, host in enumerate(net.host_params):
                key, sub = jax.random.split(key)
                fan_in = max(1, int(np.prod(host.shape[1:]))) if host.ndim > 1 else 1
                value = (jnp.ones(host.shape, jnp.float32) if i in batch_norm else
                         jax.random.uniform(sub, host.shape, jnp.float32, -1, 1) * math.sqrt(6.0 / fan_in))
                params.append(value if i in batch_norm else value.astype(dtype))
            shape = (args.batch, *graph["layers"][0]["output"])
            x = jax.random.uniform(key, shape, jnp.float32, -1, 1).astype(dtype)
            labels = jnp.asarray(np.arange(args.batch) % int(graph.get("classes", 1000)), jnp.int32)
            masks = [jax.device_put(m) for m in net.dropout_masks(args.batch, 0, np.float32 if dtype == jnp.float32
                                                                  else jnp.bfloat16)] if training else []

            def loss_of(params, x, labels, masks):
                return net.loss(net.forward(params, x, masks, True), labels)

            train = jax.jit(jax.value_and_grad(loss_of))
            infer = jax.jit(lambda params, x: net.forward(params, x, [], False))

            def dispatch():
                return train(params, x, labels, masks) if training else infer(params, x)

            def step():
                jax.block_until_ready(dispatch())

            cache = worker.JaxCache(jax, args.compile_cache)
            with jax.default_matmul_precision(matmul):
                tick = time.perf_counter()
                step()
                compile_s = time.perf_counter() - tick
            cache.compiled()
            with jax.default_matmul_precision(matmul):
                for _ in range(args.warmup):
                    step()
                times = pipelined_step_ms(dispatch, jax.block_until_ready, args.steps)
            row = dict(status="ok", median_ms=median(times), compile_s=compile_s, compile_cache=cache.describe(),
                       samples=len(times), timing=f"pipelined({IN_FLIGHT} steps queued ahead; time between completions)")
        except Exception as error:
            text = f"{type(error).__name__}: {error}"
            row = dict(status="oom" if "RESOURCE_EXHAUSTED" in text else "failed", median_ms=math.nan,
                       message=text[:300])
        params = x = masks = None
        jax.clear_caches()
        yield dict(network=network, precision=precision, phase=phase, seconds=time.time() - started, data="random",
                   **row)


def real_parameter_shape(parameter, graph, index, slot):
    """The shape synthetic.parameter gives, from the layer's declared sizes (no values drawn)."""
    layer = graph["layers"][index]
    p = layer["params"]
    inputs = [graph["layers"][int(j)]["output"] for j in layer["inputs"]]
    from common import synthetic
    if layer["kind"] == "convolution":
        k, c = int(p["kernel"]), int(inputs[0][0])
        return (int(p["out_channels"]), c, k, k) if slot == synthetic.WEIGHT else (int(p["out_channels"]),)
    if layer["kind"] == "fully_connected":
        features = int(math.prod(int(v) for v in inputs[0]))
        return (int(p["out_features"]), features) if slot == synthetic.WEIGHT else (int(p["out_features"]),)
    return (int(layer["output"][0]),)  # batch-norm gamma, beta


def cells_of(args):
    """The cells in the order crossbench ran them (--order, from its journal), else network, precision, phase."""
    if args.order:
        for cell in args.order.split(","):
            yield tuple(cell.split("/"))
        return
    for network in args.networks.split(","):
        for precision in args.precisions.split(","):
            for phase in args.phases.split(","):
                yield network, precision, phase


def gpu_name():
    """The name of the GPU the pairs run on (nvidia-smi's first visible card), recorded in every row so that a
    table of pairs from many calls says which card each came from (bench/harness_table.py); None without one."""
    try:
        result = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                                text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    names = result.stdout.strip().splitlines()
    return names[0].strip() if result.returncode == 0 and names else None


def graph_path(args, network):
    return pathlib.Path(args.graphs_dir) / f"{network}.json"


def run_standalone(args):
    cells = jax_cells(args) if args.standalone == "jax" else torch_cells(args, args.standalone)
    for row in cells:
        print("STANDALONE " + json.dumps(row), flush=True)


# ---- The orchestrator --------------------------------------------------------------------------

def standalone_rows(args, variant, order):
    """The standalone loops of one variant, in child processes; {(network, precision, phase): row}.

    A child runs as crossbench's worker does: through the same launcher (the words of --crossbench
    before the binary, e.g. `.bundle/run`, so the same LD_LIBRARY_PATH and the same cuDNN), with the
    environment the rank gives a worker (OMP_NUM_THREADS=1, PYTHONUNBUFFERED). By default each cell
    has a process of its own, as crossbench's workers do (`[engine] worker_per_cell = true`) and as
    a framework's users run one configuration: cudnn.benchmark keeps the algorithms it measured for a
    convolution shape for the life of a process, so in a shared process the cell that runs a shape
    second reuses the first cell's choices (bench/README.md). With --shared-process one child runs
    every cell, in the order crossbench ran them (`order`, from its journal), to compare against
    `worker_per_cell = false`."""
    cells = list(order) if order else list(cells_of(args))
    groups = [cells] if args.shared_process else [[cell] for cell in cells]
    rows = {}
    for group in groups:
        rows.update(standalone_child(args, variant, group))
    return rows


def standalone_child(args, variant, cells, on_row=None):
    """One child's loops; {(network, precision, phase): row}. `on_row(key, row)` is called as each row's line
    arrives, before the child exits: a child torn down by the stage's time limit while it shuts down (call 90:
    the pair's line printed, the JSON never written) keeps what it measured."""
    launcher = args.crossbench.split()[:-1]
    command = launcher + [sys.executable, "-u", __file__, "--standalone", variant] + passthrough(args, variant)
    command += ["--order", ",".join("/".join(cell) for cell in cells)]
    env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    rows = {}
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as child:
        for line in child.stdout:
            if line.startswith("STANDALONE "):
                row = json.loads(line[len("STANDALONE "):])
                key = (row["network"], row["precision"], row["phase"])
                rows[key] = row
                if on_row is not None:
                    on_row(key, row)
                print(f"  standalone {variant:15s} {row['network']:10s} {row['precision']:5s} {row['phase']:9s} "
                      f"{row['median_ms']:9.3f} ms  {row['status']}"
                      + (f": {row['message']}" if row.get("message") else "")
                      + (f" (host issues a step in {row['host_issue_ms']:.3f} ms)" if row.get("host_issue_ms") else ""),
                      flush=True)
            else:
                print("  " + line.rstrip(), flush=True)
    return rows


def crossbench_rows(args, variant, cell=None, repeat=0):
    """The same cells through crossbench: one run of the variant's engine; {(network, precision, phase): row}.
    With `cell` (network, precision, phase), that cell alone (--filter), in a cube of its own (one per
    repeat: `-r<repeat>` after the first)."""
    sys.path.insert(0, str(REPO / "bench"))
    import cube_cells

    engine, settings = VARIANTS[variant]
    name = (f"crossbench-{variant}" + ("" if cell is None else "-" + "-".join(cell))
            + (f"-r{repeat}" if repeat else ""))
    cube = pathlib.Path(args.work_dir) / f"{name}.h5"
    for leftover in (cube, pathlib.Path(str(cube) + ".journal"), pathlib.Path(str(cube) + ".lock")):
        leftover.unlink(missing_ok=True)
    python = args.python
    command = args.crossbench.split() + [
        "run", "--job", str(REPO / "jobs" / "seed2017.ini"), "--output", str(cube), "--quiet",
        "--set", f"matrix.engines={engine}", "--set", f"matrix.networks={args.networks}",
        "--set", f"matrix.precisions={args.precisions}", "--set", f"matrix.phases={args.phases}",
        "--set", f"matrix.batches={args.batch}", "--set", f"measure.warmup={args.warmup}",
        "--set", f"measure.min_steps={args.steps}", "--set", f"measure.max_steps={args.steps}",
        "--set", f"measure.cell_time_limit_s={args.cell_time_limit}",
        "--compile-cache", compile_cache_of(args, variant),
        "--set", f"workers.pytorch={python} -u {{workers}}/pytorch/worker.py",
        "--set", f"workers.pytorch-compile={python} -u {{workers}}/pytorch/worker.py --compile",
        "--set", f"workers.jax={python} -u {{workers}}/jax/worker.py"]
    for setting in settings:
        command += ["--set", setting]
    command += ["--set", f"engine.worker_per_cell={'false' if args.shared_process else 'true'}"]
    if cell is not None:
        network, precision, phase = cell
        command += ["--filter", f"^{engine}/{network}/{precision}/b{args.batch}/{phase}/"]
    started = time.time()
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        print(f"  crossbench {variant}: exit {result.returncode}\n{result.stderr[-2000:]}", flush=True)
    rows = {}
    if cube.exists():
        with_status = cube_cells.cudnn_cells(str(cube), engine)
        for (network, precision, phase, batch), cell in with_status.items():
            rows[(network, precision, phase)] = dict(median_ms=cell["median_ms"])
    print(f"  crossbench {variant}: {len(rows)} ok cells in {time.time() - started:.0f} s", flush=True)
    return rows, journal_order(pathlib.Path(str(cube) + ".journal"))


def journal_order(journal):
    """(network, precision, phase) of each result in a crossbench journal, in the order the cells ran
    (a journal line is `<checksum> <JSON>`; results carry the cell). [] when there is no journal."""
    order = []
    if not journal.exists():
        return order
    for line in journal.read_text().splitlines():
        _, _, text = line.partition(" ")
        try:
            entry = json.loads(text)
        except json.JSONDecodeError:
            continue
        result = entry.get("result") if isinstance(entry, dict) else None
        if isinstance(result, dict) and {"network", "precision", "phase"} <= result.keys():
            cell = (result["network"], result["precision"], result["phase"])
            if cell not in order:
                order.append(cell)
    return order


def compile_cache_of(args, variant):
    """The compile cache both sides of a variant use: --compile-cache, else <work-dir>/compile-cache-<variant>."""
    if args.compile_cache:
        return args.compile_cache
    return str(pathlib.Path(args.work_dir).resolve() / f"compile-cache-{variant}")


def passthrough(args, variant=None):
    words = ["--networks", args.networks, "--precisions", args.precisions, "--phases", args.phases,
             "--batch", str(args.batch), "--warmup", str(args.warmup), "--steps", str(args.steps),
             "--graphs-dir", args.graphs_dir, "--data", args.data]
    if variant is not None:
        words += ["--compile-cache", compile_cache_of(args, variant)]
    return words


def print_table(rows):
    print(f"\n{'network':10s} {'prec':5s} {'phase':9s} {'variant':15s} {'standalone':>11s} {'crossbench':>11s} "
          f"{'ratio':>7s}  within 3%")
    ratios = []
    for r in rows:
        ratio = r["crossbench_ms"] / r["standalone_ms"] if r["standalone_ms"] > 0 else math.nan
        r["ratio"] = ratio
        ok = "yes" if abs(ratio - 1) <= TARGET else ("NO" if ratio == ratio else "-")
        if ratio == ratio:
            ratios.append(ratio)
        print(f"{r['network']:10s} {r['precision']:5s} {r['phase']:9s} {r['variant']:15s} "
              f"{r['standalone_ms']:9.3f}ms {r['crossbench_ms']:9.3f}ms {ratio:7.3f}  {ok}")
    by_cell = {}
    for r in rows:
        if r["ratio"] == r["ratio"]:
            by_cell.setdefault((r["variant"], r["network"], r["precision"], r["phase"]), []).append(r["ratio"])
    if any(len(v) > 1 for v in by_cell.values()):
        print("\nrepeated cells: median crossbench / standalone ratio over the repeats (lowest-highest)")
        for (variant, network, precision, phase), values in by_cell.items():
            print(f"{network:10s} {precision:5s} {phase:9s} {variant:15s} {median(values):7.3f} "
                  f"({min(values):.3f}-{max(values):.3f}, {len(values)} repeats)")
    if ratios:
        geomean = math.exp(sum(math.log(v) for v in ratios) / len(ratios))
        print(f"geometric mean crossbench / standalone: {geomean:.4f} over {len(ratios)} cells; "
              f"within 3%: {sum(abs(v - 1) <= TARGET for v in ratios)} of {len(ratios)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default="eager,reduce-overhead,max-autotune,jax")
    parser.add_argument("--networks", default="resnet50,vgg11,googlenet,alexnet")
    parser.add_argument("--precisions", default="tf32,bf16")
    parser.add_argument("--phases", default="inference,training")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1,
                        help="each cell's pair (crossbench, then its standalone loop) this many times, each side a "
                             "process of its own; the table adds each cell's median ratio (default 1)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--data", choices=DATA, default="synthetic",
                        help="the standalone loops' weights, input and labels: the worker's synthetic values (default), "
                             "or random values drawn on the device (PyTorch; JAX always draws them)")
    parser.add_argument("--cell-time-limit", type=float, default=600, help="crossbench's per-cell limit [s]")
    parser.add_argument("--crossbench", default=".bundle/run .bundle/bin/crossbench",
                        help="the command that runs the crossbench binary")
    parser.add_argument("--python", default="python3", help="the python that runs the workers")
    parser.add_argument("--graphs-dir", default="/tmp/crossbench-graphs")
    parser.add_argument("--work-dir", default="/tmp/crossbench-frameworks", help="crossbench's cubes")
    parser.add_argument("--out", help="JSON with every row, rewritten after each variant")
    parser.add_argument("--compile-cache", help="the compile cache both sides use (default <work-dir>/compile-cache-"
                        "<variant>; none: each side compiles cold)")
    parser.add_argument("--standalone", help=argparse.SUPPRESS)  # child process: one variant's loops
    parser.add_argument("--shared-process", action="store_true",
                        help="one process for every cell on both sides (crossbench with engine.worker_per_cell = false); "
                             "default: a process per cell on both sides")
    parser.add_argument("--order", help=argparse.SUPPRESS)  # child process: NET/PREC/PHASE,... as crossbench ran them
    args = parser.parse_args()
    if args.standalone:
        run_standalone(args)
        return
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, not {args.repeats}")
    for variant in args.variants.split(","):
        if variant not in VARIANTS:
            parser.error(f"unknown variant {variant!r}; valid: {', '.join(VARIANTS)}")
    os.makedirs(args.graphs_dir, exist_ok=True)
    os.makedirs(args.work_dir, exist_ok=True)
    for network in args.networks.split(","):
        path = graph_path(args, network)
        if not path.exists():
            subprocess.run(args.crossbench.split() + ["export-network", network, "--output", str(path)], check=True,
                           stdout=subprocess.DEVNULL)
    rows = []
    gpu = gpu_name()

    def record(variant, theirs, mine, repeat=0):
        for key, row in mine.items():
            rows.append(dict(network=key[0], precision=key[1], phase=key[2], variant=variant, repeat=repeat,
                             standalone_ms=row["median_ms"], standalone_status=row["status"],
                             compile_s=row.get("compile_s"), compile_cache=row.get("compile_cache"),
                             standalone_timing=row.get("timing"), standalone_data=row.get("data"),
                             standalone_message=row.get("message"), gpu=gpu,
                             standalone_host_issue_ms=row.get("host_issue_ms"),
                             crossbench_ms=theirs.get(key, {}).get("median_ms", math.nan)))
        if args.out:
            pathlib.Path(args.out).write_text(json.dumps(rows, indent=1, allow_nan=True))

    for variant in args.variants.split(","):
        print(f"=== {variant} {time.strftime('%H:%M:%S')}", flush=True)
        if args.shared_process:
            # One crossbench run first: the standalone process then runs its cells in crossbench's order.
            theirs, order = crossbench_rows(args, variant)
            record(variant, theirs, standalone_rows(args, variant, order))
        else:
            # Cell by cell, crossbench then its standalone loop, the JSON rewritten after each pair: a stage
            # cut short by its time limit keeps every pair it finished (a whole variant took longer than a
            # device call's stage: call 29 came back with nothing).
            # --repeats: the pair again, each side a fresh process, to tell a difference from the noise
            # between processes (cudnn.benchmark's picks among near-tied algorithms, a GPU's clocks).
            for cell in cells_of(args):
                for repeat in range(args.repeats):
                    theirs, _ = crossbench_rows(args, variant, cell, repeat)
                    standalone_child(args, variant, [cell],
                                     on_row=lambda key, row: record(variant, theirs, {key: row}, repeat))
        print_table(rows)


if __name__ == "__main__":
    main()
