#!/usr/bin/env python3
"""Where a framework row's step time goes, kernel by kernel (issue 24: "if a cell cannot be won, the
note shows from the layer times and kernel names where the time goes").

The PyTorch worker's own session (src/workers/pytorch/worker.py, prepared exactly as a `prepare`
request of the worker protocol prepares it: the network from `crossbench export-network`, the
precision's recipe, eager or torch.compile in --mode) runs --warmup steps, then --steps steps under
torch.profiler (CUDA activities only). Per cell: the step's median time from the worker's own CUDA
events (untraced, before the profile), the GPU kernel time per step, and the kernels grouped into
classes (convolution, GEMM, batch-norm, fused Triton, elementwise, pooling, reduction, copy) and the
--top kernels by GPU time per step [ms]. Compare it with crossbench's cudnn layer times
(`run --layer-times all`) of the same cell.

  python3 bench/gpu_torch_kernels.py --crossbench ".bundle/run .bundle/bin/crossbench" \
      --cells vgg11:tf32:training,googlenet:bf16:inference --modes reduce-overhead --out k.json
"""
import argparse
import json
import pathlib
import re
import subprocess
import sys
import time
import traceback

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import gpu_framework_overhead  # noqa: E402
import worker_in_process  # noqa: E402

CLASSES = (  # first match wins; on the kernel's name
    ("convolution", re.compile(r"conv|cudnn|implicit_gemm|xmma_fprop|xmma_dgrad|xmma_wgrad|fprop|dgrad|wgrad|"
                               r"sm90_xmma|winograd|fft", re.I)),
    ("gemm", re.compile(r"gemm|cutlass|cublas|sm90_.*tensorop|nvjet|addmm|matmul|aten::mm$", re.I)),
    ("batch_norm", re.compile(r"batch_?norm|bn_fw|bn_bw", re.I)),
    ("triton_fused", re.compile(r"^triton_", re.I)),
    ("pooling", re.compile(r"pool", re.I)),
    ("reduction", re.compile(r"reduce", re.I)),
    ("copy", re.compile(r"copy|memcpy|memset|transpose|nchwToNhwc|nhwcToNchw", re.I)),
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled|relu|threshold|add", re.I)),
)


def classify(name):
    for label, pattern in CLASSES:
        if pattern.search(name):
            return label
    return "other"


def load_worker():
    return worker_in_process.load_worker("pytorch")


def request_for(graph, network, precision, phase, batch, mode, compile_cache="none"):
    return worker_in_process.prepare_request(graph, network, precision, phase, batch,
                                             engine__compile_mode=mode if mode != "eager" else "reduce-overhead",
                                             engine__compile_cache=compile_cache)


def profile_cell(torch, worker, graph, network, precision, phase, args, mode, data="synthetic"):
    adapter = worker.PytorchAdapter(compile_model=mode != "eager")
    adapter.hello()  # the worker protocol's first request: imports torch (adapter.torch)
    tick = time.perf_counter()
    session = adapter.prepare(request_for(graph, network, precision, phase, args.batch, mode, args.compile_cache))
    prepare_s = time.perf_counter() - tick
    try:
        if data == "random":
            # The standalone loop's --data random values, written over the session's synthetic ones in
            # place (the compiled graph and its CUDA graphs read the same tensors): the same kernels on
            # other values.
            gpu_framework_overhead.random_parameters(torch, session.model)
            with torch.no_grad():
                session.x.uniform_(-1, 1)
        session.run_steps(args.warmup, 1e9, True)
        untraced = sorted(session.run_steps(args.steps, 1e9, False))
        from torch.profiler import ProfilerActivity, profile
        cuda = torch.cuda.is_available()  # on a CPU (the tests here): the CPU ops instead of kernels
        with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
            session.run_steps(args.steps, 1e9, False)
            if cuda:
                torch.cuda.synchronize()
        kernels = {}
        for item in prof.key_averages():
            # GPU time of the kernel itself [us] (the attribute's name differs between torch versions)
            total_us = next((getattr(item, a) for a in ("self_device_time_total", "self_cuda_time_total",
                                                        "device_time_total", "cuda_time_total")
                                     + (() if cuda else ("self_cpu_time_total",))
                             if getattr(item, a, None)), 0)
            if total_us and not item.key.startswith(("ProfilerStep", "cuda", "Memcpy HtoD")):
                kernels[item.key] = kernels.get(item.key, 0.0) + total_us / 1e3 / args.steps
        decisions = session.decisions()
    finally:
        session.release()
    by_class = {}
    for name, ms in kernels.items():
        by_class[classify(name)] = by_class.get(classify(name), 0.0) + ms
    top = sorted(kernels.items(), key=lambda kv: -kv[1])[:args.top]
    return dict(network=network, precision=precision, phase=phase, mode=mode, data=data, batch=args.batch,
                prepare_s=prepare_s, median_ms=untraced[len(untraced) // 2], kernel_ms_per_step=sum(kernels.values()),
                classes_ms=dict(sorted(by_class.items(), key=lambda kv: -kv[1])),
                top_kernels_ms=[[name[:160], ms] for name, ms in top], kernel_count=len(kernels),
                decisions=decisions[:600])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", default="vgg11:tf32:training", help="network:precision:phase,...")
    parser.add_argument("--modes", default="reduce-overhead", help="eager, reduce-overhead, max-autotune (comma list)")
    parser.add_argument("--data", default="synthetic",
                        help="the values the steps read (comma list): synthetic (the worker's own), random (drawn on "
                             "the device, as bench/gpu_framework_overhead.py --data random)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="every cell's modes and data this many times, interleaved, each a session of its own")
    parser.add_argument("--compile-cache", default="none",
                        help="engine.compile_cache of the sessions (none: each compiles cold)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--budget-s", type=float, default=240, help="no new cell after this long [s]")
    parser.add_argument("--crossbench", default=".bundle/run .bundle/bin/crossbench")
    parser.add_argument("--graphs-dir", default="/tmp/crossbench-graphs")
    parser.add_argument("--out")
    args = parser.parse_args()
    for data in args.data.split(","):
        if data not in gpu_framework_overhead.DATA:
            parser.error(f"--data {data!r}: one of {', '.join(gpu_framework_overhead.DATA)}")
    started = time.monotonic()
    worker = load_worker()
    hello = worker.PytorchAdapter(compile_model=False).hello()  # imports torch into the worker module
    print(f"worker hello: {json.dumps(hello)[:300]}", flush=True)
    import torch
    pathlib.Path(args.graphs_dir).mkdir(parents=True, exist_ok=True)
    rows = []
    for cell in args.cells.split(","):
        network, precision, phase = cell.split(":")
        path = pathlib.Path(args.graphs_dir) / f"{network}.json"
        if not path.exists():
            subprocess.run(args.crossbench.split() + ["export-network", network, "--output", str(path)], check=True,
                           stdout=subprocess.DEVNULL)
        graph = json.loads(path.read_text())
        for _, mode, data in ((r, m, d) for r in range(args.rounds) for m in args.modes.split(",")
                              for d in args.data.split(",")):
            if time.monotonic() - started > args.budget_s:
                rows.append(dict(network=network, precision=precision, phase=phase, mode=mode, data=data,
                                 status="skipped"))
                continue
            try:
                row = profile_cell(torch, worker, graph, network, precision, phase, args, mode, data)
                row["status"] = "ok"
                print(f"=== {network} {precision} {phase} {mode} data={data}: step {row['median_ms']:.3f} ms (untraced), "
                      f"kernels {row['kernel_ms_per_step']:.3f} ms/step, prepare {row['prepare_s']:.0f} s", flush=True)
                for label, ms in row["classes_ms"].items():
                    print(f"    {label:14s} {ms:8.3f}", flush=True)
                for name, ms in row["top_kernels_ms"]:
                    print(f"      {ms:8.3f}  {name[:140]}", flush=True)
            except Exception as error:  # noqa: BLE001 (a failed cell is data)
                row = dict(network=network, precision=precision, phase=phase, mode=mode, data=data, status="failed",
                           message=f"{type(error).__name__}: {error}"[:500])
                print(f"=== {cell} {mode}: failed: {row['message']}\n{traceback.format_exc(limit=4)[-1200:]}", flush=True)
            rows.append(row)
            if args.out:
                pathlib.Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
