#!/usr/bin/env python3
"""PyTorch eager against crossbench's cuDNN engine, cell by cell, on one GPU.

Builds each network from `crossbench export-network` JSON with the PyTorch
worker's model (src/workers/pytorch/model.py) and times it as PyTorch users
run it: torch.backends.cudnn.benchmark = True; TF32 on for tf32 and off for
fp32 (matmul and cuDNN); channels_last + torch.autocast for fp16/bf16 (fp32
master weights); training = forward + cross-entropy + backward with
gradients set to None before each step, no optimizer step (crossbench's
`update = none`); inference = eval mode under torch.no_grad(). CUDA events
around each step, warm-up 10, then >= 100 steps, median.

Two things differ from the worker model on purpose, for the timing only:
weights are drawn on the GPU with the generator's scale (He-uniform,
sqrt(6 / fan_in)) instead of crossbench's synthetic values (minutes of numpy
for the VGGs; values do not change the time of dense kernels), and dropout
is torch's own F.dropout instead of the model's deterministic-mask module
(about a dozen extra small kernels per dropout layer that no PyTorch user
runs). With --check, fp32 losses on the synthetic weights are compared with
crossbench's for the smaller networks first.

crossbench's times come from gpu_cudnn_cells JSON (--crossbench-json) or a
results cube (--cube). Prints, per cell, both medians and PyTorch ÷ crossbench,
then the geometric mean; writes everything as JSON with --out.
"""
import argparse
import json
import math
import os
import pathlib
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src" / "workers"))
from pytorch import model as pt_model  # noqa: E402

sys.path.insert(0, str(REPO / "bench"))
import cube_cells  # noqa: E402


@torch.no_grad()
def fast_reset(self, seed=None):
    """He-uniform weights drawn on the parameters' device (the generator's scale, not its values)."""
    for module in self.modules():
        if isinstance(module, (torch.nn.Conv2d, torch.nn.Linear)):
            fan_in = module.weight[0].numel()
            bound = math.sqrt(6.0 / fan_in)
            module.weight.uniform_(-bound, bound)
            if module.bias is not None:
                module.bias.zero_()
        elif isinstance(module, torch.nn.BatchNorm2d):
            module.weight.fill_(1)
            module.bias.zero_()
            module.reset_running_stats()
    self.step = 0


class TorchDropout(torch.nn.Module):
    def __init__(self, rate):
        super().__init__()
        self.rate = rate

    def forward(self, x):
        return F.dropout(x, self.rate, self.training)


def native_dropout(model):
    for key, module in list(model.layers.items()):
        if isinstance(module, pt_model.SyntheticDropout):
            model.layers[key] = TorchDropout(module.rate)


def set_precision(precision):
    tf32 = precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True


def time_cell(model, precision, phase, batch, warmup, steps):
    set_precision(precision)
    sixteen = precision in ("fp16", "bf16")
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
    model = model.to(memory_format=torch.channels_last if sixteen else torch.contiguous_format)
    model.channels_last = sixteen
    x = model.prepare_input(torch.rand(batch, *model._outputs[0], device="cuda") * 2 - 1)
    labels = torch.randint(0, model.classes, (batch,), device="cuda")
    training = phase == "training"
    model.train(training)

    def step():
        with torch.autocast("cuda", dtype=dtype, enabled=sixteen):
            if training:
                model.zero_grad(set_to_none=True)
                loss = model.loss(model(x), labels)
                loss.backward()
            else:
                with torch.no_grad():
                    model(x)

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(steps)]
    for begin, end in events:
        begin.record()
        step()
        end.record()
    torch.cuda.synchronize()
    times = sorted(b.elapsed_time(e) for b, e in events)
    n = len(times)
    median = times[n // 2] if n % 2 else (times[n // 2 - 1] + times[n // 2]) / 2
    model.zero_grad(set_to_none=True)
    return {"median_ms": median, "peak_memory_bytes": torch.cuda.max_memory_allocated()}


def crossbench_cells(args):
    cells = {}
    if args.crossbench_json:
        for path in args.crossbench_json:
            for c in json.load(open(path))["cells"]:
                if c.get("status") == "ok":
                    cells[(c["network"], c["precision"], c["phase"], int(c["batch"]))] = c
    if args.cube:
        for key, cell in cube_cells.cudnn_cells(args.cube).items():
            cells.setdefault(key, cell)
    return cells


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--crossbench", default=".bundle/run .bundle/bin/crossbench",
                        help="command that runs the crossbench binary (for export-network)")
    parser.add_argument("--crossbench-json", action="append", help="gpu_cudnn_cells --json output")
    parser.add_argument("--cube", help="a results cube with cudnn cells")
    parser.add_argument("--networks", default="alexnet,overfeat,vgg11,googlenet,resnet50,resnet101,resnet152")
    parser.add_argument("--precisions", default="fp32,tf32,bf16")
    parser.add_argument("--phases", default="inference,training")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--graphs-dir", default="/tmp/crossbench-graphs")
    parser.add_argument("--check", default="", help="networks whose fp32 loss is compared (synthetic weights)")
    parser.add_argument("--out", help="JSON with every cell")
    args = parser.parse_args()

    os.makedirs(args.graphs_dir, exist_ok=True)
    theirs = crossbench_cells(args)
    crossbench_cmd = args.crossbench.split()
    results = []
    print(f"PyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")

    for network in args.networks.split(","):
        path = export_with(crossbench_cmd, network, args.graphs_dir)
        if network in args.check.split(","):
            set_precision("fp32")
            checked = pt_model.build_model(str(path), seed=42, device="cuda")
            model_batch = args.batch
            x = checked.synthetic_input(model_batch)
            labels = checked.synthetic_labels(model_batch)
            for phase in ("training", "inference"):
                c = checked.check(x, labels, phase == "training")
                ours = theirs.get((network, "fp32", phase, args.batch), {})
                print(f"check {network} fp32 {phase}: PyTorch loss {c['loss']:.6g}, crossbench "
                      f"{ours.get('loss', float('nan')):.6g}")
            del checked
            torch.cuda.empty_cache()
        original = pt_model.CrossbenchModel.reset_parameters
        pt_model.CrossbenchModel.reset_parameters = fast_reset
        try:
            model = pt_model.build_model(str(path), seed=42, device="cuda")
        finally:
            pt_model.CrossbenchModel.reset_parameters = original
        native_dropout(model)
        for precision in args.precisions.split(","):
            for phase in args.phases.split(","):
                started = time.time()
                try:
                    mine = time_cell(model, precision, phase, args.batch, args.warmup, args.steps)
                    status = "ok"
                except torch.cuda.OutOfMemoryError:
                    mine, status = {"median_ms": float("nan"), "peak_memory_bytes": float("nan")}, "oom"
                    torch.cuda.empty_cache()
                ours = theirs.get((network, precision, phase, args.batch), {})
                cb = ours.get("median_ms", float("nan"))
                ratio = mine["median_ms"] / cb if cb == cb and cb > 0 else float("nan")
                row = {"network": network, "precision": precision, "phase": phase, "batch": args.batch,
                       "pytorch_ms": mine["median_ms"], "pytorch_peak_memory_bytes": mine["peak_memory_bytes"],
                       "crossbench_ms": cb, "crossbench_peak_memory_bytes": ours.get("peak_memory_bytes"),
                       "ratio": ratio, "status": status, "seconds": time.time() - started}
                results.append(row)
                print(f"{network:10s} {precision:5s} {phase:9s} PyTorch {mine['median_ms']:9.3f} ms  "
                      f"crossbench {cb:9.3f} ms  ratio {ratio:6.3f}  "
                      f"(PyTorch peak {mine['peak_memory_bytes'] / 2**20:8.0f} MiB)", flush=True)
        del model
        torch.cuda.empty_cache()

    ratios = [r["ratio"] for r in results if r["ratio"] == r["ratio"]]
    if ratios:
        geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        slower = [f"{r['network']}/{r['precision']}/{r['phase']} ({r['ratio']:.3f})" for r in results
                  if r["ratio"] == r["ratio"] and r["ratio"] < 1.0]
        print(f"\ngeometric mean of PyTorch / crossbench over {len(ratios)} cells: {geomean:.3f} (target >= 1.15)")
        print("cells where crossbench is slower: " + (", ".join(slower) if slower else "none"))
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(results, handle, indent=1)


def export_with(command, network, directory):
    path = pathlib.Path(directory) / f"{network}.json"
    if not path.exists():
        subprocess.run(command + ["export-network", network, "--output", str(path)], check=True,
                       stdout=subprocess.DEVNULL)
    return path


if __name__ == "__main__":
    main()
