#!/usr/bin/python3
"""CPU: crossbench's native oneDNN engine against PyTorch on the identical networks.

Times alexnet and resnet50 at batch 1 and 16, inference and training, fp32, with
the same number of threads on both sides, and prints one table: both medians
[ms], the ratio PyTorch / crossbench per cell (> 1: crossbench is faster) and the
geometric mean of the ratios. See bench/README.md.

crossbench side: `crossbench run --job <temporary job> --output <tmp>.h5 --quiet`
with OMP_NUM_THREADS=N, engines = onednn; median_ms read from the cube with h5py.
PyTorch side: src/workers/pytorch/model.py (the same graph from
`crossbench export-network`, the same synthetic weights and data), with
torch.set_num_threads(N); training step = forward + loss + backward (gradients
zeroed with set_to_none, no optimizer step, like crossbench's default
update = none); inference = eval() under torch.no_grad(). Both sides: warm-up
steps, then at least min_steps timed steps, stopping when the 95% CI of the
median is within target_ci of it (crossbench's rule), or at max_steps or the
cell time limit. By default the two sides alternate cell by cell (one crossbench
run per cell), so that both see the machine in the same state.

BLAS: Debian's python3-torch (BLAS_INFO=generic) runs fully-connected layers
through whatever libblas.so.3 resolves to. --blas openblas / reference / DIR
re-executes the script with LD_LIBRARY_PATH pointing there (and
OPENBLAS_NUM_THREADS = --threads); --blas system (the default) takes the
update-alternatives choice. The header line names the library that PyTorch's
sgemm_ actually resolved to (dlsym from libtorch_cpu, then dladdr).
crossbench's side loads no BLAS (oneDNN's own kernels).
"""
from __future__ import annotations

import argparse
import ctypes
import math
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src" / "workers"))

CELL_DIMS = ("device", "engine", "network", "precision", "batch", "phase", "replica")

# --blas NAME: the directories whose libblas.so.3 / liblapack.so.3 the PyTorch side loads.
MULTIARCH = pathlib.Path("/usr/lib/x86_64-linux-gnu")
BLAS_CHOICES = {
    "openblas": [MULTIARCH / "openblas-pthread"],  # libopenblas0-pthread
    "openblas-openmp": [MULTIARCH / "openblas-openmp"],  # libopenblas0-openmp
    "blis": [MULTIARCH / "blis-pthread"],  # libblis4-pthread
    "reference": [MULTIARCH / "blas", MULTIARCH / "lapack"],  # libblas3, liblapack3
}
BLAS_ENV = "CROSSBENCH_BENCH_BLAS"  # set once the script has re-executed itself with the choice


def parse_arguments(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="threads for both sides (OMP_NUM_THREADS / torch.set_num_threads)")
    parser.add_argument("--networks", default="alexnet,resnet50", help="comma-separated")
    parser.add_argument("--batches", default="1,16", help="comma-separated")
    parser.add_argument("--phases", default="inference,training", help="comma-separated")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per cell")
    parser.add_argument("--min-steps", type=int, default=20, help="timed steps before the stopping rule")
    parser.add_argument("--max-steps", type=int, default=100, help="timed steps at most")
    parser.add_argument("--target-ci", type=float, default=0.02,
                        help="stop when the 95%% CI half-width of the median, relative to it, is below this")
    parser.add_argument("--cell-time-limit", type=float, default=300,
                        help="seconds per cell and side at most (crossbench: preparation included)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--channels-last", action="store_true", help="PyTorch in NHWC memory format")
    parser.add_argument("--build-dir", default=os.environ.get("CROSSBENCH_BUILD_DIR", str(REPO / "build")),
                        help="where the crossbench binary is (env CROSSBENCH_BUILD_DIR)")
    parser.add_argument("--order", choices=("interleaved", "blocked"), default="interleaved",
                        help="interleaved: for each cell, crossbench then PyTorch (both see the same machine "
                             "state; one crossbench run per cell); blocked: one crossbench run for every "
                             "cell, then PyTorch")
    parser.add_argument("--baseline-build-dir", metavar="DIR",
                        help="also time the crossbench binary in DIR (an earlier commit) on every cell, "
                             "interleaved with --build-dir's (the two alternate which goes first, cell by cell), "
                             "and print both and after / before; needs --order interleaved")
    parser.add_argument("--baseline-set", metavar="KEY=VALUE", action="append", default=[],
                        help="time a baseline side with these crossbench settings (repeatable; e.g. "
                             "engine.fuse=false: the same binary's unfused lowering), interleaved with the "
                             "default side as --baseline-build-dir is (the binary of --baseline-build-dir "
                             "where given, else --build-dir's); needs --order interleaved")
    parser.add_argument("--keep", metavar="DIR", help="keep the job files, cubes and graphs in DIR")
    parser.add_argument("--blas", default="system",
                        help="the BLAS of the PyTorch side: system (libblas.so.3 as update-alternatives "
                             f"says), {', '.join(BLAS_CHOICES)}, or a directory holding libblas.so.3 "
                             "(the script re-executes itself with LD_LIBRARY_PATH set)")
    return parser.parse_args(argv)


def select_blas(args) -> None:
    """Re-execute this script with LD_LIBRARY_PATH such that libblas.so.3 (and liblapack.so.3) resolve
    to the chosen BLAS; the dynamic loader reads LD_LIBRARY_PATH only at process start."""
    if args.blas == "system" or os.environ.get(BLAS_ENV) == args.blas:
        return
    directories = BLAS_CHOICES.get(args.blas, [pathlib.Path(args.blas)])
    if not (directories[0] / "libblas.so.3").exists():
        raise SystemExit(f"--blas {args.blas}: no libblas.so.3 in {directories[0]} (install "
                         "libopenblas0-pthread, libopenblas0-openmp, libblis4-pthread or libblas3)")
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.pathsep.join([str(d) for d in directories]
                                             + [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p])
    env.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    env.setdefault("BLIS_NUM_THREADS", str(args.threads))
    env[BLAS_ENV] = args.blas
    os.execve(sys.executable, [sys.executable] + sys.argv, env)


def loaded_blas() -> str:
    """The library that PyTorch's sgemm_ resolves to: dlsym on libtorch_cpu's handle (its own
    dependency order), then dladdr, then the real path of the file (libblas.so.3 is a link)."""
    class DlInfo(ctypes.Structure):
        _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                    ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]
    try:
        with open("/proc/self/maps") as maps:
            torch_cpu = next(line.split()[-1] for line in maps if "libtorch_cpu" in line)
        handle = ctypes.CDLL(torch_cpu, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        libc = ctypes.CDLL(None)
        libc.dlsym.restype, libc.dlsym.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]
        libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
        address = libc.dlsym(handle._handle, b"sgemm_")
        info = DlInfo()
        if not address or not libc.dladdr(address, ctypes.byref(info)):
            return "unknown (sgemm_ not found)"
        path = os.path.realpath(info.dli_fname.decode())
        kind = ("OpenBLAS" if "openblas" in path else "BLIS" if "blis" in path
                else "reference BLAS" if "/blas/" in path else "BLAS")
        try:
            config = ctypes.CDLL(path).openblas_get_config
            config.restype = ctypes.c_char_p
            kind += f" ({config().decode().strip()})"
        except (AttributeError, OSError):
            pass
        return f"{kind}: {path}"
    except (StopIteration, OSError) as error:
        return f"unknown ({error})"


# ---- crossbench ----------------------------------------------------------------------------

def write_job(path: pathlib.Path, args, networks, batches, phases, cube: pathlib.Path) -> None:
    path.write_text(f"""# bench/cpu_onednn_vs_pytorch.py: the oneDNN engine's side of the comparison with PyTorch.
[matrix]
networks = {', '.join(networks)}
engines = onednn
precisions = fp32
batches = {', '.join(map(str, batches))}
phases = {', '.join(phases)}

[measure]
warmup = {args.warmup}
min_steps = {args.min_steps}
max_steps = {args.max_steps}
target_ci = {args.target_ci}
cell_time_limit_s = {int(math.ceil(args.cell_time_limit))}
seed = {args.seed}

[output]
path = {cube}
""")


def read_medians(cube: pathlib.Path):
    """{(network, batch, phase): (status, median_ms, steps)} of the onednn cells of a cube."""
    import h5py
    import numpy as np

    def strings(dset):
        return [v.decode() if isinstance(v, bytes) else str(v) for v in dset[()]]

    with h5py.File(cube, "r") as f:
        axes = {d: (strings(f[d]) if f[d].dtype.kind in "SOU" else [int(v) for v in f[d][()]]) for d in CELL_DIMS}
        median = np.asarray(f["median_ms"][()])
        steps = np.asarray(f["steps"][()]) if "steps" in f else None
        status_codes = np.asarray(f["status"][()])
        enum = h5py.check_enum_dtype(f["status"].dtype)
        names = {int(v): k for k, v in enum.items()} if enum else {}
        messages = f["message"].asstr()[()] if "message" in f else None
    engine = axes["engine"].index("onednn")
    result = {}
    for d in range(len(axes["device"])):
        for n, network in enumerate(axes["network"]):
            for p, precision in enumerate(axes["precision"]):
                for b, batch in enumerate(axes["batch"]):
                    for h, phase in enumerate(axes["phase"]):
                        cell = (d, engine, n, p, b, h, 0)
                        status = names.get(int(status_codes[cell]), str(status_codes[cell]))
                        message = str(messages[cell]) if messages is not None else ""
                        result[(network, batch, phase)] = (status, float(median[cell]),
                                                           int(steps[cell]) if steps is not None else -1, message)
    return result


def run_crossbench(binary: pathlib.Path, args, networks, batches, phases, workdir: pathlib.Path,
                   stem: str = "onednn_vs_pytorch", settings=()):
    job, cube = workdir / f"{stem}.ini", workdir / f"{stem}.h5"
    write_job(job, args, networks, batches, phases, cube)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    command = [str(binary), "run", "--job", str(job), "--output", str(cube), "--quiet"]
    for setting in settings:
        command += ["--set", setting]
    print(f"crossbench: {' '.join(command)}  (OMP_NUM_THREADS={args.threads})", file=sys.stderr, flush=True)
    for stale in (cube, cube.with_name(cube.name + ".journal")):  # never --resume an earlier run
        stale.unlink(missing_ok=True)
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0 or not cube.exists():
        raise SystemExit(f"crossbench run failed (exit status {done.returncode}):\n{done.stdout}\n{done.stderr}")
    print(f"crossbench: done in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return read_medians(cube)


def export_network(binary: pathlib.Path, name: str, workdir: pathlib.Path) -> pathlib.Path:
    path = workdir / f"{name}.json"
    path.unlink(missing_ok=True)  # a --keep directory of an earlier run: export-network never overwrites
    done = subprocess.run([str(binary), "export-network", name, "--output", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"crossbench export-network {name} failed: {done.stderr.strip()}")
    return path


# ---- PyTorch ---------------------------------------------------------------------------------

def median_ci(samples):
    """The distribution-free 95% CI of the median, exactly as src/core/statistics.cpp: 1-based
    order statistics floor(n/2 - 1.96 sqrt(n)/2) and ceil(n/2 + 1.96 sqrt(n)/2) + 1, clamped."""
    ordered = sorted(samples)
    n = len(ordered)
    if n < 2:
        return math.nan, math.nan
    half_band = 1.959963984540054 * math.sqrt(n) / 2.0
    low_rank = math.floor(n / 2.0 - half_band)
    high_rank = math.ceil(n / 2.0 + half_band) + 1.0
    index = lambda rank: int(min(max(rank, 1.0), float(n)) - 1.0)  # noqa: E731
    return ordered[index(low_rank)], ordered[index(high_rank)]


def converged(samples, target_ci: float) -> bool:
    """crossbench's stopping rule: the CI half-width relative to the median is at most target_ci."""
    median = statistics.median(samples)
    low, high = median_ci(samples)
    half_width = (high - low) / 2.0
    return math.isfinite(half_width) and median > 0 and half_width / median <= target_ci


def time_pytorch(torch, model, batch: int, phase: str, args):
    """(median ms, steps, check loss) of one cell: warm-up, then crossbench's stopping rule."""
    x, labels = model.synthetic_input(batch), model.synthetic_labels(batch)
    model.reset_state()  # a fresh session, as crossbench prepares one per cell
    check = model.check(x, labels, training=phase == "training")  # dropout step 0, like Session::check
    if phase == "training":
        model.train()
        step = lambda: model.training_step(x, labels)  # noqa: E731
    else:
        model.eval()
        step = lambda: model.inference_step(x)  # noqa: E731
    started = time.perf_counter()
    for _ in range(args.warmup):
        step()
    samples = []
    next_check = args.min_steps
    while len(samples) < args.max_steps:
        t0 = time.perf_counter()
        step()
        samples.append((time.perf_counter() - t0) * 1e3)
        if len(samples) >= next_check:
            if converged(samples, args.target_ci):
                break
            next_check = len(samples) + max(10, len(samples) // 10)  # as src/runner/runner.cpp
        if time.perf_counter() - started > args.cell_time_limit and len(samples) >= args.min_steps:
            break
    return statistics.median(samples), len(samples), check["loss"]


# ---- Main ------------------------------------------------------------------------------------

def main(argv=None) -> int:
    args = parse_arguments(argv)
    select_blas(args)
    networks = [n.strip() for n in args.networks.split(",") if n.strip()]
    batches = [int(b) for b in args.batches.split(",") if b.strip()]
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    binary = pathlib.Path(args.build_dir) / "crossbench"
    if not binary.exists():
        raise SystemExit(f"crossbench binary not found at {binary} (build it, or set --build-dir / "
                         "CROSSBENCH_BUILD_DIR)")

    import torch
    from pytorch.model import CrossbenchModel
    torch.set_num_threads(args.threads)
    blas = loaded_blas()
    print(f"pytorch: sgemm_ from {blas}", file=sys.stderr, flush=True)

    baseline = pathlib.Path(args.baseline_build_dir) / "crossbench" if args.baseline_build_dir else None
    if baseline is not None and not baseline.exists():
        raise SystemExit(f"--baseline-build-dir: no crossbench binary at {baseline}")
    if args.baseline_set and baseline is None:
        baseline = binary  # the same binary, other settings
    for setting in args.baseline_set:
        if "=" not in setting:
            raise SystemExit(f"--baseline-set {setting!r}: expected KEY=VALUE (e.g. engine.fuse=false)")
    if baseline is not None and args.order != "interleaved":
        raise SystemExit("--baseline-build-dir and --baseline-set need --order interleaved")

    cells = [(name, batch, phase) for name in networks for batch in batches for phase in phases]
    native, before, theirs = {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="cb-onednn-vs-pytorch-") as temporary:
        workdir = pathlib.Path(args.keep) if args.keep else pathlib.Path(temporary)
        workdir.mkdir(parents=True, exist_ok=True)
        graphs = {name: export_network(binary, name, workdir) for name in networks}
        if args.order == "blocked":
            native.update(run_crossbench(binary, args, networks, batches, phases, workdir))
        model = None
        for number, (name, batch, phase) in enumerate(cells):
            if args.order == "interleaved":  # this cell's crossbench run(s) right before PyTorch's
                runs = [(native, binary, "onednn", ())]
                if baseline is not None:  # before and after alternate which runs first
                    runs.insert(number % 2, (before, baseline, "baseline", args.baseline_set))
                for into, program, stem, settings in runs:
                    into.update(run_crossbench(program, args, [name], [batch], [phase], workdir,
                                               stem=f"{stem}_{name}_{batch}_{phase}", settings=settings))
            if model is None or model.name != name:
                model = None  # free the previous network's weights first
                model = CrossbenchModel(str(graphs[name]), seed=args.seed, channels_last=args.channels_last)
            theirs[(name, batch, phase)] = time_pytorch(torch, model, batch, phase, args)
            ms, steps, loss = theirs[(name, batch, phase)]
            print(f"pytorch: {name} batch {batch} {phase}: {ms:.2f} ms ({steps} steps, loss {loss:.6g})",
                  file=sys.stderr, flush=True)
        del model

    print(f"\nCPU, fp32, {args.threads} thread(s); PyTorch {torch.__version__}"
          f"{' channels_last' if args.channels_last else ''}; {args.order} order; medians [ms]; "
          f"ratio = PyTorch / crossbench (> 1: crossbench faster)")
    print(f"PyTorch's BLAS (sgemm_ resolved from libtorch_cpu): {blas}; "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")
    print("loss: each side's output check (forward, dropout step 0) on the same synthetic batch; "
          "crossbench's from the cube's message (6 digits)\n")
    header = (f"{'network':<9} {'batch':>5} {'phase':<9} {'crossbench':>10} {'pytorch':>9} {'ratio':>6}"
              f"  {'steps cb/pt':>11}  {'loss cb':>9} {'loss pt':>9}")
    print(header)
    print("-" * len(header))
    ratios = []
    for name in networks:
        for batch in batches:
            for phase in phases:
                status, cb_ms, cb_steps, message = native.get((name, batch, phase), ("missing", math.nan, -1, ""))
                pt_ms, pt_steps, pt_loss = theirs[(name, batch, phase)]
                found = re.search(r"loss ([-+0-9.eEnaif]+)", message or "")
                cb_loss = found.group(1) if found else "?"
                if status == "ok" and cb_ms > 0:
                    ratio = pt_ms / cb_ms
                    ratios.append(ratio)
                    cb_text, ratio_text = f"{cb_ms:10.2f}", f"{ratio:6.2f}"
                else:
                    cb_text, ratio_text, cb_loss = f"{status:>10}", f"{'-':>6}", "-"
                print(f"{name:<9} {batch:>5} {phase:<9} {cb_text} {pt_ms:9.2f} {ratio_text}"
                      f"  {f'{cb_steps}/{pt_steps}':>11}  {cb_loss:>9} {pt_loss:9.6g}"
                      + (f"  ({message})" if status != "ok" and message else ""))
    if ratios:
        geomean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print("-" * len(header))
        print(f"{'geometric mean of the ratios':<36} {geomean:6.2f}  ({len(ratios)} cells)")
    if baseline is not None:
        before_text = f"{baseline}" + (f" --set {' --set '.join(args.baseline_set)}" if args.baseline_set else "")
        print(f"\nbefore: {before_text}; after: {binary}; after / before < 1: the change is faster")
        header = (f"{'network':<9} {'batch':>5} {'phase':<9} {'before':>9} {'after':>9} {'after/before':>12}"
                  f" {'pt/before':>9} {'pt/after':>8}  {'steps b/a':>9}  {'loss before':>11} {'loss after':>11}")
        print(header)
        print("-" * len(header))
        changes = []
        for name, batch, phase in cells:
            b_status, b_ms, b_steps, b_message = before.get((name, batch, phase), ("missing", math.nan, -1, ""))
            a_status, a_ms, a_steps, a_message = native.get((name, batch, phase), ("missing", math.nan, -1, ""))
            pt_ms = theirs[(name, batch, phase)][0]
            losses = [(re.search(r"loss ([-+0-9.eEnaif]+)", m or "") or [None, "?"])[1] for m in (b_message, a_message)]
            if b_status != "ok" or a_status != "ok":
                print(f"{name:<9} {batch:>5} {phase:<9} {b_status:>9} {a_status:>9}")
                continue
            changes.append(a_ms / b_ms)
            print(f"{name:<9} {batch:>5} {phase:<9} {b_ms:9.2f} {a_ms:9.2f} {a_ms / b_ms:12.3f}"
                  f" {pt_ms / b_ms:9.2f} {pt_ms / a_ms:8.2f}  {f'{b_steps}/{a_steps}':>9}  {losses[0]:>11} {losses[1]:>11}")
        if changes:
            print("-" * len(header))
            print(f"{'geometric mean of after / before':<36} {math.exp(sum(map(math.log, changes)) / len(changes)):6.3f}"
                  f"  ({len(changes)} cells)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
