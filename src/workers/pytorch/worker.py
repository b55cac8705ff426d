#!/usr/bin/env python3
"""crossbench's PyTorch worker: eager mode, or torch.compile with --compile.

Started by the rank (src/engines/worker/) with the rank's device binding in
CUDA_VISIBLE_DEVICES; speaks the protocol of src/workers/common/protocol.py.
Per cell: the model from the network JSON (model.py, crossbench's synthetic
weights and inputs), torch.backends.cudnn.benchmark = True, TF32 switched as
the precision says, channels_last + autocast for fp16/bf16, CUDA events on the
GPU and a monotonic clock on the CPU; an out-of-memory ends the cell as `oom`
and the worker stays usable.
"""
import argparse
import gc
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common.protocol import WorkerError, serve  # noqa: E402


class PytorchAdapter:
    def __init__(self, compile_model):
        self.compile_model = compile_model
        self.torch = None

    def hello(self):
        name = "pytorch-compile" if self.compile_model else "pytorch"
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
        device = f"cuda: {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "cpu"
        return dict(worker=name, status="ok", framework=f"torch {torch.__version__}", device=device)

    def prepare(self, request):
        return PytorchSession(self.torch, request, self.compile_model)

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


class PytorchSession:
    def __init__(self, torch, request, compile_model):
        from pytorch.model import CrossbenchModel

        self.torch = torch
        cell = request["cell"]
        self.precision, self.phase, self.batch = cell["precision"], cell["phase"], int(cell["batch"])
        self.cuda = torch.cuda.is_available()
        device = torch.device("cuda" if self.cuda else "cpu")
        if not self.cuda:
            if self.precision in ("tf32", "fp16"):
                raise WorkerError("unsupported", f"{self.precision} on the CPU: "
                                  + ("tf32 is a GPU tensor-core mode" if self.precision == "tf32"
                                     else "PyTorch's CPU path has no fast fp16 training"))
            torch.set_num_threads(max(1, int(request.get("threads", 1))))
        # TF32 exactly as the precision says (fp32 is strict).
        allow_tf32 = self.precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32
        torch.backends.cudnn.allow_tf32 = allow_tf32
        torch.backends.cudnn.benchmark = True
        sixteen = self.precision in ("fp16", "bf16")
        self.autocast_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(self.precision)
        layout = request.get("layout", "auto")
        channels_last = layout == "nhwc" or (layout == "auto" and sixteen and self.cuda)
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        self.model = CrossbenchModel(request["graph"], seed=int(request["seed"]), device=device,
                                     channels_last=channels_last)
        self.model.train(self.phase == "training")
        self.x = self.model.synthetic_input(self.batch)
        self.labels = self.model.synthetic_labels(self.batch)
        self.optimizer = None
        if request.get("update") == "sgd" and self.phase == "training":
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=float(request.get("learning_rate", 0.01)))
        self.runner = self.model
        self.compile_s = None
        if compile_model:
            start = time.perf_counter()
            self.runner = torch.compile(self.model)
            self._one_step()  # compilation happens here, untimed
            self._synchronize()
            self.compile_s = time.perf_counter() - start
        self.layout = "channels_last" if channels_last else "contiguous"

    def _synchronize(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def _autocast(self):
        torch = self.torch
        if self.autocast_dtype is None:
            return torch.autocast("cuda" if self.cuda else "cpu", enabled=False)
        return torch.autocast("cuda" if self.cuda else "cpu", dtype=self.autocast_dtype)

    def _one_step(self):
        torch = self.torch
        if self.phase == "training":
            self.model.zero_grad(set_to_none=True)
            with self._autocast():
                logits = self.runner(self.x)
            loss = self.model.loss(logits.float(), self.labels)
            loss.backward()
            if self.optimizer is not None:
                self.optimizer.step()
        else:
            with torch.no_grad(), self._autocast():
                self.runner(self.x)

    def step(self):
        """One step, timed with the framework's own device timer [ms]."""
        torch = self.torch
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            self._one_step()
            end.record()
            end.synchronize()
            return start.elapsed_time(end)
        begin = time.perf_counter()
        self._one_step()
        return (time.perf_counter() - begin) * 1e3

    def peak_memory_bytes(self):
        return float(self.torch.cuda.max_memory_allocated()) if self.cuda else math.nan

    def check(self):
        return self.model.check(self.x, self.labels, self.phase == "training")

    def decisions(self):
        text = f"torch {self.torch.__version__} cudnn.benchmark=on layout={self.layout}"
        text += f" tf32={'on' if self.precision == 'tf32' else 'off'}"
        if self.autocast_dtype is not None:
            text += f" autocast={self.precision}"
        if self.compile_s is not None:
            text += f" torch.compile={self.compile_s:.1f}s"
        return text

    def release(self):
        self.model = self.runner = self.optimizer = self.x = self.labels = None
        gc.collect()
        if self.cuda:
            self.torch.cuda.empty_cache()


def main():
    parser = argparse.ArgumentParser(description="crossbench PyTorch worker (JSON lines on stdin/stdout)")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (pytorch-compile)")
    arguments = parser.parse_args()
    serve(PytorchAdapter(arguments.compile))


if __name__ == "__main__":
    main()
