#!/usr/bin/env python3
"""crossbench's PyTorch worker: eager mode, or torch.compile with --compile.

Started by the rank (src/engines/worker/) with the rank's device binding in
CUDA_VISIBLE_DEVICES; speaks the protocol of src/workers/common/protocol.py.
Per cell: the model from the network JSON (model.py, crossbench's synthetic
weights and inputs), torch.backends.cudnn.benchmark = True, the precision's
recipe (``Recipe``: DESIGN.md's one meaning per precision), channels_last where
PyTorch would pick it (16-bit compute on a GPU), CUDA events on the GPU and a
monotonic clock on the CPU; an out-of-memory ends the cell as `oom` and the
worker stays usable.

--compile (pytorch-compile) is PyTorch at its best as practitioners run it:
torch.compile of the model's layers in the request's ``engine.compile_mode``
(``reduce-overhead``: CUDA graphs, by default; ``max-autotune``: CUDA graphs
and autotuned kernels), compiled once per cell in prepare (untimed, its time
reported), each step marked with torch.compiler.cudagraph_mark_step_begin();
recompilations, graph breaks and skipped CUDA graphs during the timed steps
are counted from torch._dynamo's counters and recorded in ``decisions``.
Inductor's and Triton's caches live in the request's ``engine.compile_cache``
directory (common/compile_cache.py), so a later cell or run of the same graph
compiles from a warm cache; ``decisions`` says cold or warm and the cache hits.
"""
import argparse
import gc
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common.libraries import loaded_library_versions  # noqa: E402
from common import compile_cache, preparation, recipes  # noqa: E402
from common.protocol import WorkerError, serve, settings  # noqa: E402

COMPILE_MODES = ("reduce-overhead", "max-autotune")
# The options-schema keys this worker runs a cell with (the request's `settings`).
SETTINGS_READ = ("measure.seed", "measure.update", "measure.learning_rate", "engine.layout", "engine.compile_mode",
                 compile_cache.SETTING)
# torch.compile's persistent caches, each a flag of torch 2.x's configs (module, flag, since): all
# kept in engine.compile_cache, so that a warm cache skips Inductor's code generation (FX graph
# cache), AOTAutograd's joint-graph tracing of training cells (AOTAutograd cache) and the kernel
# benchmarks of max-autotune (autotune cache). A torch without a flag says so in decisions.
CACHE_FLAGS = (("torch._inductor.config", "fx_graph_cache", "2.2"),
               ("torch._inductor.config", "autotune_local_cache", "2.4"),
               ("torch._functorch.config", "enable_autograd_cache", "2.6"))
# (counter group, counter) of torch._dynamo's counters that count each cache's hits and misses.
CACHE_COUNTERS = (("inductor", "fxgraph_cache_hit"), ("inductor", "fxgraph_cache_miss"),
                  ("aot_autograd", "autograd_cache_hit"), ("aot_autograd", "autograd_cache_miss"))


class Recipe:
    """What a precision means in PyTorch (DESIGN.md "Vocabulary").

    - fp32: fp32 tensors, TF32 off everywhere (strict).
    - tf32: fp32 tensors, TF32 tensor-core math for matmuls and convolutions.
    - fp16, bf16 ("pure"): the model's weights, activations and weight gradients in 16 bits;
      fp32 accumulation (the libraries'), an fp32 loss and fp32 batch-norm parameters and
      statistics (model.BatchNorm).
    - amp-fp16, amp-bf16: PyTorch's automatic mixed precision: fp32 master weights and
      gradients, autocast to 16-bit compute; amp-fp16 trains with a GradScaler.
    """

    def __init__(self, torch, precision):
        sixteen = {"fp16": torch.float16, "bf16": torch.bfloat16}
        amp = {"amp-fp16": torch.float16, "amp-bf16": torch.bfloat16}
        if precision not in ("fp32", "tf32") and precision not in sixteen and precision not in amp:
            raise WorkerError("unsupported", f"unknown precision {precision!r}")
        self.precision = precision
        self.tf32 = precision == "tf32"
        self.parameter_dtype = sixteen.get(precision, torch.float32)
        self.autocast_dtype = amp.get(precision)
        self.compute_dtype = self.autocast_dtype or self.parameter_dtype
        self.loss_scaling = precision == "amp-fp16"

    @property
    def sixteen_bit_compute(self):
        return self.precision not in ("fp32", "tf32")

    def apply_math_flags(self, torch):
        """TF32 exactly as the precision says: on for tf32, off for everything else."""
        torch.backends.cuda.matmul.allow_tf32 = self.tf32
        torch.backends.cudnn.allow_tf32 = self.tf32
        if hasattr(torch, "set_float32_matmul_precision"):
            torch.set_float32_matmul_precision("high" if self.tf32 else "highest")

    def describe(self):
        """The precision's recipe (common/recipes.py, the texts of every engine) and PyTorch's means."""
        if self.autocast_dtype is not None:
            means = f"torch.autocast {self.precision[4:]}" + ("; GradScaler" if self.loss_scaling else "")
        else:
            means = f"{str(self.parameter_dtype).replace('torch.', '')} parameters"
        return recipes.describe(self.precision, means + ("; allow_tf32=on" if self.tf32 else "; allow_tf32=off"))


class PytorchAdapter:
    def __init__(self, compile_model):
        self.compile_model = compile_model
        self.torch = None
        # [s] this process's start inside hello: `import torch`, then the device's first use (the CUDA
        # context, cuBLAS and cuDNN loaded by versions()); told by the process's first cell alone.
        self.startup = None

    def hello(self):
        name = "pytorch-compile" if self.compile_model else "pytorch"
        clock = preparation.StartupClock()
        try:
            import torch
        except ImportError as error:
            return dict(worker=name, status="unsupported",
                        message=f"PyTorch is not importable by {sys.executable} ({error}); "
                                "install it (Debian: apt install python3-torch; else pip install torch)")
        self.torch = torch
        if self.compile_model and not hasattr(torch, "compile"):
            return dict(worker=name, status="unsupported",
                        message=f"torch {torch.__version__} has no torch.compile (it needs torch 2.0 or later)")
        clock.imported()
        device = f"cuda: {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "cpu"
        versions = self.versions(torch)
        self.startup = clock.seconds()
        return dict(worker=name, status="ok", framework=f"torch {torch.__version__}", device=device,
                    versions=versions)

    @staticmethod
    def versions(torch):
        """The framework's versions and the CUDA libraries it loaded (common/libraries.py):
        PyTorch loads cuDNN and cuBLAS lazily, so a tiny matmul and the cuDNN version
        query load them first; the cube then names what computed the rows."""
        versions = {"framework": f"torch {torch.__version__}", "torch": torch.__version__}
        if torch.cuda.is_available():
            versions["torch_built_with_cuda"] = str(torch.version.cuda)
            versions["torch_built_with_cudnn"] = str(torch.backends.cudnn.version())
            (torch.ones(2, 2, device="cuda") @ torch.ones(2, 2, device="cuda")).sum().item()
        versions.update(loaded_library_versions())
        return versions

    def prepare(self, request):
        startup, self.startup = self.startup, None
        return PytorchSession(self.torch, request, self.compile_model, startup)

    def classify(self, error):
        torch = self.torch
        oom_types = tuple(t for t in (getattr(torch.cuda, "OutOfMemoryError", None),) if t)
        if isinstance(error, oom_types) or "out of memory" in str(error).lower() or isinstance(error, MemoryError):
            return "oom", f"out of memory: {str(error).splitlines()[0] if str(error) else type(error).__name__}"
        return "failed", f"{type(error).__name__}: {error}"

    def recover(self):
        gc.collect()
        if self.torch.cuda.is_available():
            self.torch.cuda.empty_cache()


def dynamo_counts(torch):
    """Compiled graphs, graph breaks and skipped CUDA graphs so far in this process (torch._dynamo's
    counters); None where this torch has no such counters."""
    try:
        from torch._dynamo.utils import counters
    except Exception:
        return None
    return {"graphs": int(counters["stats"].get("unique_graphs", 0)),
            "graph_breaks": int(sum(counters["graph_break"].values())),
            "cudagraph_skips": int(counters["inductor"].get("cudagraph_skips", 0))}


def cache_counts():
    """torch._dynamo's counters of the persistent caches' hits and misses so far in this process;
    None where this torch has no such counters."""
    try:
        from torch._dynamo.utils import counters
    except Exception:
        return None
    return {f"{group}.{name}": int(counters[group].get(name, 0)) for group, name in CACHE_COUNTERS}


class InductorCache:
    """engine.compile_cache for torch.compile: TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR in its
    inductor/ and triton/ subdirectories (`none`: a fresh directory of this process), set before
    the cell's first compile: Inductor reads them when it first writes (its compile workers, started
    then, inherit them), and every persistent cache flag of CACHE_FLAGS on."""

    def __init__(self, torch, setting):
        import importlib

        self.torch = torch
        self.setting = setting
        root = compile_cache.process_scratch_directory("crossbench-inductor-") if setting == compile_cache.NONE \
            else setting
        self.inductor = compile_cache.framework_directory(root, "inductor")
        self.triton = compile_cache.framework_directory(root, "triton")
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = self.inductor
        os.environ["TRITON_CACHE_DIR"] = self.triton
        self.notes = []
        for module_name, flag, since in CACHE_FLAGS:
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                module = None
            if module is None or not hasattr(module, flag):
                self.notes.append(f"{flag}: not in torch {torch.__version__} (since {since})")
                continue
            setattr(module, flag, True)
        # Where Inductor will write: a process that compiled before this cell may hold another directory.
        used = None
        for module_name in ("torch._inductor.runtime.cache_dir_utils", "torch._inductor.runtime.runtime_utils",
                            "torch._inductor.codecache"):
            try:
                used = importlib.import_module(module_name).cache_dir()
                break
            except (ImportError, AttributeError):
                continue
        if used is not None and os.path.realpath(used) != os.path.realpath(self.inductor):
            self.notes.append(f"not applied: Inductor already uses {used}")
        self.entries_before = self.entries()
        self.counts_before = cache_counts()
        self.entries_after = self.counts_after = None

    def entries(self):
        return compile_cache.count_entries(self.inductor) + compile_cache.count_entries(self.triton)

    def compiled(self):
        """After the cell's compile: what it found and left."""
        self.entries_after = self.entries()
        self.counts_after = cache_counts()

    def describe(self):
        detail = list(self.notes)
        if self.counts_before is not None and self.counts_after is not None:
            delta = {k: self.counts_after[k] - self.counts_before[k] for k in self.counts_after}
            detail.append(f"fx_graph_cache hits={delta['inductor.fxgraph_cache_hit']} "
                          f"misses={delta['inductor.fxgraph_cache_miss']}")
            detail.append(f"aot_autograd_cache hits={delta['aot_autograd.autograd_cache_hit']} "
                          f"misses={delta['aot_autograd.autograd_cache_miss']}")
        shown = self.setting if self.setting != compile_cache.NONE else \
            f"none(a fresh directory of this worker process: {os.path.dirname(self.inductor)})"
        after = self.entries_after if self.entries_after is not None else self.entries()
        return compile_cache.describe(shown, self.entries_before, after, "; ".join(detail))


def graph_break_reasons(torch, limit=3):
    try:
        from torch._dynamo.utils import counters
    except Exception:
        return []
    return [reason.splitlines()[0][:80] for reason, _ in counters["graph_break"].most_common(limit)]


class PytorchSession:
    def __init__(self, torch, request, compile_model, startup=None):
        from pytorch.model import CrossbenchModel

        setup_start = time.perf_counter()
        self.startup = startup  # (import, device) [s] where this is its process's first cell
        self.torch = torch
        # The options schema's worker settings (README "Job file keys", column "to workers").
        given = settings(request, *SETTINGS_READ)
        cell = request["cell"]
        self.precision, self.phase, self.batch = cell["precision"], cell["phase"], int(cell["batch"])
        self.training = self.phase == "training"
        self.cuda = torch.cuda.is_available()
        device = torch.device("cuda" if self.cuda else "cpu")
        self.recipe = Recipe(torch, self.precision)
        if not self.cuda:
            if self.precision in ("tf32", "fp16", "amp-fp16"):
                raise WorkerError("unsupported", f"{self.precision} on the CPU: "
                                  + ("tf32 is a GPU tensor-core mode" if self.precision == "tf32"
                                     else "PyTorch's CPU path has no fast fp16 training"))
            torch.set_num_threads(max(1, int(request.get("threads", 1))))
        self.recipe.apply_math_flags(torch)
        torch.backends.cudnn.benchmark = True
        # channels_last where PyTorch picks it: 16-bit tensor-core convolutions on a GPU.
        layout = given["engine.layout"]
        channels_last = layout == "nhwc" or (layout == "auto" and self.recipe.sixteen_bit_compute and self.cuda)
        self.layout = "channels_last" if channels_last else "contiguous"
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        self.model = CrossbenchModel(request["graph"], seed=int(given["measure.seed"]), device=device,
                                     dtype=self.recipe.parameter_dtype, channels_last=channels_last)
        self.model.train(self.training)
        self.x = self.model.synthetic_input(self.batch)
        self.labels = self.model.synthetic_labels(self.batch)
        self.optimizer = None
        if given["measure.update"] == "sgd" and self.training:
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=float(given["measure.learning_rate"]))
        self.scaler = None
        if self.recipe.loss_scaling and self.training:  # amp-fp16 runs on GPUs only (see above)
            amp = getattr(torch, "amp", None)
            self.scaler = amp.GradScaler("cuda") if hasattr(amp, "GradScaler") else torch.cuda.amp.GradScaler()

        self.compile_mode = None
        self.device_dropout_step = False
        self.counts_before_compile = None
        self.compile_s = None
        self.compiler_setup_s = None  # [s] torch._dynamo's and Inductor's imports, flags and cache scans
        self.mark_step = None
        self.counts_after_compile = self.counts_before_timed = self.counts_after_timed = None
        self.compile_cache = None
        self.setup_s = time.perf_counter() - setup_start  # [s] the model, its inputs and optimizer
        if compile_model:
            self._compile(given["engine.compile_mode"], given[compile_cache.SETTING])

    # -- torch.compile ----------------------------------------------------------------------

    def _compile(self, mode, cache_setting):
        torch = self.torch
        setup_start = time.perf_counter()  # the compiler's set-up outside the compile's clock starts here
        if mode not in COMPILE_MODES:
            raise WorkerError("unsupported", f"torch.compile mode {mode!r}: crossbench runs {', '.join(COMPILE_MODES)}")
        compiler = getattr(torch, "compiler", None)
        self.mark_step = getattr(compiler, "cudagraph_mark_step_begin", None) if self.cuda else None
        if self.cuda and self.mark_step is None:
            raise WorkerError("unsupported", f"torch {torch.__version__} has no "
                              "torch.compiler.cudagraph_mark_step_begin: CUDA graphs in training need torch 2.1 or later")
        self.compile_mode = mode
        self.compile_cache = InductorCache(torch, cache_setting)  # before the first compile: see InductorCache
        self.counts_before_compile = dynamo_counts(torch)  # the worker serves many cells: count this one's
        start = time.perf_counter()
        # Only the layers are compiled: the dropout step's bookkeeping stays in the eager forward
        # (model.py), so nothing that changes per step reaches a guard; the masks come from a step
        # counter on the device through an opaque custom op, so dropout breaks no graph.
        self.device_dropout_step = self.model.use_device_dropout_step()
        self.model.layers_forward = torch.compile(self.model.layers_forward, mode=mode)
        for _ in range(3):  # compilation, then the CUDA graph recording (cudagraph trees warm up, then record)
            self._one_step()
        self._synchronize()
        compiled_at = time.perf_counter()
        self.compile_s = compiled_at - start
        self.counts_after_compile = dynamo_counts(torch)
        self.compile_cache.compiled()
        self.compiler_setup_s = (start - setup_start) + (time.perf_counter() - compiled_at)

    # -- steps ------------------------------------------------------------------------------

    def _synchronize(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def _autocast(self):
        torch = self.torch
        device_type = "cuda" if self.cuda else "cpu"
        if self.recipe.autocast_dtype is None:
            return torch.autocast(device_type, enabled=False)
        return torch.autocast(device_type, dtype=self.recipe.autocast_dtype)

    def _one_step(self):
        torch = self.torch
        if self.mark_step is not None:
            self.mark_step()  # a new iteration for cudagraph trees: last step's outputs may be overwritten
        if self.training:
            self.model.zero_grad(set_to_none=True)
            with self._autocast():
                logits = self.model(self.x)
                loss = self.model.loss(logits, self.labels)  # fp32 (model.SoftmaxCrossEntropy)
            if self.scaler is not None:
                self.scaler.scale(loss).backward()
                if self.optimizer is not None:
                    self.scaler.step(self.optimizer)
                    self.scaler.update()
            else:
                loss.backward()
                if self.optimizer is not None:
                    self.optimizer.step()
        else:
            with torch.no_grad(), self._autocast():
                self.model(self.x)

    def run_steps(self, count, time_limit_s, warmup):
        """`count` steps back to back, each between two device events (CUDA) or clock readings
        (CPU); on the GPU the host waits once, after the last step, so that the batch adds
        no synchronisation between steps. Fewer steps once `time_limit_s` [s] has passed."""
        torch = self.torch
        if not warmup and self.counts_before_timed is None:
            self.counts_before_timed = dynamo_counts(torch)
        begin = time.monotonic()
        times = []
        if self.cuda:
            events = []
            while len(events) < count and time.monotonic() - begin < time_limit_s:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                self._one_step()
                end.record()
                events.append((start, end))
            if events:
                events[-1][1].synchronize()
            times = [start.elapsed_time(end) for start, end in events]
        else:
            while len(times) < count and time.monotonic() - begin < time_limit_s:
                tick = time.perf_counter()
                self._one_step()
                times.append((time.perf_counter() - tick) * 1e3)
        if not warmup:
            self.counts_after_timed = dynamo_counts(torch)
        return times

    def step(self):
        """One step [ms] (the batch of one)."""
        return self.run_steps(1, math.inf, False)[0]

    def peak_memory_bytes(self):
        return float(self.torch.cuda.max_memory_allocated()) if self.cuda else math.nan

    def check(self):
        if self.mark_step is not None:
            self.mark_step()
        with self._autocast():
            return self.model.check(self.x, self.labels, self.training)

    def decisions(self):
        torch = self.torch
        text = (f"torch {torch.__version__} {'eager' if self.compile_mode is None else 'torch.compile'} "
                f"{self.recipe.describe()} cudnn.benchmark=on layout={self.layout}")
        if self.compile_mode is not None:
            graphs = "on" if self.mark_step is not None else "off (CPU)"
            text += f" compile_mode={self.compile_mode} cuda_graphs={graphs} compile={self.compile_s:.1f}s(untimed)"
            text += preparation.describe_compiler_setup(
                self.compiler_setup_s, "torch._dynamo's and Inductor's imports, the cache's flags and scans")
            compiled, before_compile = self.counts_after_compile, self.counts_before_compile
            if compiled is not None and before_compile is not None:
                compiled = {k: compiled[k] - before_compile[k] for k in compiled}
                text += f" graphs={compiled['graphs']} graph_breaks={compiled['graph_breaks']}"
                reasons = graph_break_reasons(torch)
                if reasons:
                    text += " (" + "; ".join(reasons) + ")"
                if compiled["cudagraph_skips"]:
                    text += f" cudagraph_skips={compiled['cudagraph_skips']}"
            text += " " + self.compile_cache.describe()
            before, after = self.counts_before_timed, self.counts_after_timed
            if before is not None and after is not None:
                text += (f" timed_steps: recompilations={after['graphs'] - before['graphs']}"
                         f" graph_breaks={after['graph_breaks'] - before['graph_breaks']}"
                         f" cudagraph_skips={after['cudagraph_skips'] - before['cudagraph_skips']}")
        else:
            text += " compile_cache=unused(eager: nothing is compiled)"
        text += preparation.describe(self.setup_s, self.startup)  # common/preparation.py
        if self.training and self.model is not None and self.model._dropouts:
            text += (" dropout_masks=crossbench::dropout_keep_mask(device step, in the graph)" if self.device_dropout_step
                     else " dropout_masks=eager(crossbench's deterministic masks)")
        return text

    def release(self):
        self.model = self.optimizer = self.x = self.labels = self.scaler = None
        if self.compile_mode is not None:
            self.torch._dynamo.reset()  # this cell's compiled graphs and CUDA graph pools go with it
        gc.collect()
        if self.cuda:
            self.torch.cuda.empty_cache()


def main():
    parser = argparse.ArgumentParser(description="crossbench PyTorch worker (JSON lines on stdin/stdout)")
    parser.add_argument("--compile", action="store_true",
                        help="torch.compile the model (pytorch-compile); the mode comes with each request")
    arguments = parser.parse_args()
    serve(PytorchAdapter(arguments.compile))


if __name__ == "__main__":
    main()
