"""A torch.nn.Module built from a crossbench network graph (`crossbench export-network NET`).

The graph format "crossbench-network/1" is documented at the top of
src/networks/json.cpp. Every engine runs the identical network on identical
data: weights, inputs, labels and dropout masks come from crossbench's
counter-based generator (src/workers/common/synthetic.py, the numpy port of
include/crossbench/synthetic.hpp), so this model's outputs equal the native
engines' for the same seed (up to floating-point summation order).

Conventions (those of json.cpp and of the native oneDNN engine):

- convolution: zero padding, dilation 1, groups 1; weights OIHW (PyTorch's own).
- max_pool: padding counts as -infinity; avg_pool: ``count_include_pad=True`` (the
  divisor is always kernel * kernel, as json.cpp documents; no network of
  DESIGN.md pads an average pool, so the choice changes no number there).
  ceil_mode is PyTorch's rule, which json.cpp adopts.
- lrn: ``b_c = a_c / (k + alpha / size * sum of a^2 over `size` channels centred on c)^beta``:
  alpha is divided by the size, as in ``torch.nn.LocalResponseNorm``, Caffe's
  ACROSS_CHANNELS LRN and oneDNN's lrn_across_channels (what the oneDNN engine
  runs). So the JSON's alpha goes to ``nn.LocalResponseNorm`` unchanged.
- batch_norm: gamma 1, beta 0, running mean 0 and variance 1 at the start, PyTorch's
  momentum convention; batch statistics in training, running ones in eval.
- dropout: crossbench's deterministic inverted dropout, not torch's RNG: at
  training step ``s`` element i (flat NCHW index over the batch) of layer L's
  output is kept when ``synthetic.dropout_keep(seed, L, s, i, rate)``, and kept
  elements are multiplied by ``fp32(1 / (1 - rate))``. The step is
  ``CrossbenchModel.step``: 0 for the first training forward, +1 after each
  training-mode forward (as the oneDNN session's ``dropout_step = steps_++``).
  The mask is computed on the tensor's device with 64-bit integer arithmetic.
  In eval mode dropout is the identity.
- fully_connected: ``y = W x + b`` with x flattened in (C, H, W) order.
- flatten: to (N, C*H*W); outputs of fully-connected layers are 2-D (N, F).
- softmax_cross_entropy: ``F.cross_entropy`` (mean over the batch) of the logits,
  computed in fp32, against ``synthetic.labels``.

The forward walks the layer list in its (topological) order and drops every
intermediate output as soon as its last consumer has run. ReLU and the residual
add write over their input when that input has no other consumer (as
torchvision's ``inplace=True`` / ``out += identity`` and the oneDNN engine do).

Hooks for the worker: ``device`` and ``dtype`` of the parameters,
``channels_last`` (weights and activations in NHWC memory format). Mixed
precision (autocast) is the worker's business: the loss casts the logits to
fp32 itself.

Importing this module has no side effects beyond importing torch and numpy
(and making ``common.synthetic`` importable when src/workers is not on sys.path).
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List, Mapping, Optional, Union

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

try:
    from common import synthetic
except ImportError:  # imported by path, without src/workers on sys.path
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from common import synthetic
from common.output_check import check_result

__all__ = ["FORMAT", "load_network", "CrossbenchModel", "build_model", "SyntheticDropout",
           "dropout_keep_mask", "LAYER_KINDS"]

FORMAT = "crossbench-network/1"
LAYER_KINDS = ("input", "convolution", "max_pool", "avg_pool", "lrn", "relu", "batch_norm", "dropout",
               "concat", "add", "fully_connected", "flatten", "softmax_cross_entropy")


def load_network(source: Union[Mapping[str, Any], str, bytes, os.PathLike]) -> Dict[str, Any]:
    """The network document from a dict, a JSON text, or a path to a JSON file; checks the format."""
    if isinstance(source, Mapping):
        document = dict(source)
    elif isinstance(source, (bytes, bytearray)):
        document = json.loads(source)
    elif isinstance(source, str) and source.lstrip().startswith("{"):
        document = json.loads(source)
    else:
        with open(source, "r", encoding="utf-8") as handle:
            document = json.load(handle)
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"not a crossbench network graph: \"format\" is "
                         f"{document.get('format') if isinstance(document, dict) else None!r}, expected {FORMAT!r}")
    layers = document.get("layers")
    if not isinstance(layers, list) or len(layers) < 2:
        raise ValueError("network graph: \"layers\" must list at least the input and the loss")
    for i, layer in enumerate(layers):
        where = f"layer {i} '{layer.get('name', '?')}'"
        if layer.get("kind") not in LAYER_KINDS:
            raise ValueError(f"network graph: {where}: unknown kind {layer.get('kind')!r}")
        if int(layer.get("index", i)) != i:
            raise ValueError(f"network graph: {where}: \"index\" is {layer.get('index')}, expected {i}")
        for j in layer.get("inputs", []):
            if not 0 <= int(j) < i:
                raise ValueError(f"network graph: {where}: input {j} is not an earlier layer")
        output = layer.get("output")  # optional for network_from_json; export-network always writes it
        if not (isinstance(output, list) and len(output) == 3 and all(isinstance(v, int) for v in output)):
            raise ValueError(f"network graph: {where}: \"output\" must be [channels, height, width] "
                             "(as `crossbench export-network` writes it)")
    if layers[0]["kind"] != "input" or layers[-1]["kind"] != "softmax_cross_entropy":
        raise ValueError("network graph: layer 0 must be the input and the last layer the loss")
    return document


# ---- Dropout masks on the device (64-bit integer splitmix64, as synthetic.py) ----------------

def _signed(value: int) -> int:
    """A uint64 as the int64 with the same bits (torch has no uint64)."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >= (1 << 63) else value


_G = _signed(synthetic.GOLDEN_GAMMA)
_C1 = _signed(0xBF58476D1CE4E5B9)
_C2 = _signed(0x94D049BB133111EB)


def _shr(z: torch.Tensor, bits: int) -> torch.Tensor:
    """Logical right shift of int64 bit patterns."""
    return (z >> bits) & ((1 << (64 - bits)) - 1)


def dropout_keep_mask(seed: int, layer_index: int, step: int, count: int, rate: float,
                      device: Union[str, torch.device] = "cpu") -> torch.Tensor:
    """Keep-mask (bool, shape (count,)) of a dropout layer's output at `step`, computed on `device`.

    Equal to synthetic.dropout_keep_mask: int64 tensors wrap modulo 2**64 like uint64, and the
    logical shifts are masked arithmetic shifts."""
    state = synthetic.stream_state(seed, synthetic.dropout_tensor_id(layer_index, step))
    z = torch.arange(1, count + 1, dtype=torch.int64, device=device) * _G + _signed(state)  # index + 1
    return _shr(_mix_tensor(z), 40) >= synthetic.dropout_threshold(rate)


def _outside_compilation(function):
    """`function` run eagerly even inside a torch.compile'd model (torch >= 2.1), else as is.

    The mask is splitmix64 arithmetic on int64 tensors that wraps modulo 2**64, and its stream
    state depends on the step: compiled, Inductor's Triton code generation fails on the fused
    shift/xor/multiply kernel (seen with torch 2.11 on the H200), and the step, a Python int,
    would make dynamo recompile at every step. Eagerly it costs one small kernel chain."""
    disable = getattr(getattr(torch, "compiler", None), "disable", None)
    return disable(function) if disable is not None else function


def _mix_tensor(z: torch.Tensor) -> torch.Tensor:
    """The splitmix64 finaliser on int64 bit patterns (wrapping, logical shifts)."""
    z = z ^ _shr(z, 30)
    z = z * _C1
    z = z ^ _shr(z, 27)
    z = z * _C2
    return z ^ _shr(z, 31)


def device_step_keep_mask(step: torch.Tensor, seed_bits: int, layer_index: int, count: int,
                          rate: float) -> torch.Tensor:
    """dropout_keep_mask with the step a 0-d int64 tensor on the mask's device: the stream state,
    mix(seed ^ dropout_tensor_id(layer, step) * G), is computed there too, so nothing needs the
    step's value on the host and a CUDA graph can replay it. `seed_bits`: the seed as int64 bits."""
    tensor_id = (step.to(torch.int64) << 32) + synthetic.tensor_id(layer_index, synthetic.DROPOUT_MASK)
    state = _mix_tensor((tensor_id * _G) ^ seed_bits)
    z = torch.arange(1, count + 1, dtype=torch.int64, device=step.device) * _G + state
    return _shr(_mix_tensor(z), 40) >= synthetic.dropout_threshold(rate)


def _register_device_mask_op():
    """device_step_keep_mask as the custom op crossbench::dropout_keep_mask (torch >= 2.4):
    torch.compile keeps it opaque (no graph break, and Inductor does not generate code for its
    wrapping int64 arithmetic, which its Triton backend failed on); None on older torch."""
    library = getattr(torch, "library", None)
    if library is None or not hasattr(library, "custom_op"):
        return None

    @library.custom_op("crossbench::dropout_keep_mask", mutates_args=())
    def dropout_keep_mask_op(step: torch.Tensor, seed_bits: int, layer_index: int, count: int,
                             rate: float) -> torch.Tensor:
        return device_step_keep_mask(step, seed_bits, layer_index, count, rate)

    @dropout_keep_mask_op.register_fake
    def _(step, seed_bits, layer_index, count, rate):
        return torch.empty(count, dtype=torch.bool, device=step.device)

    return dropout_keep_mask_op


_device_mask_op = _register_device_mask_op()


class DropoutClock:
    """The training step that selects the dropout masks, shared by a model's dropout layers.

    A plain object: ``step`` is read only inside the eager mask function, so a compiled forward
    never sees the changing Python int (an int read by traced code would be guarded and make
    dynamo recompile at every step). With ``tensor`` set (CrossbenchModel.use_device_dropout_step)
    the masks come from that 0-d int64 device tensor instead, through the custom op."""

    __slots__ = ("step", "tensor")

    def __init__(self):
        self.step = 0
        self.tensor = None


def _clocked_keep_mask(seed: int, layer_index: int, clock: DropoutClock, count: int, rate: float,
                       device) -> torch.Tensor:
    return dropout_keep_mask(seed, layer_index, clock.step, count, rate, device)


_dropout_keep_mask_eager = _outside_compilation(_clocked_keep_mask)


# ---- Layer modules that torch.nn lacks --------------------------------------------------------

class SyntheticDropout(nn.Module):
    """Inverted dropout with crossbench's deterministic mask (see the module docstring)."""

    def __init__(self, layer_index: int, rate: float, seed: int, clock: Optional[DropoutClock] = None):
        super().__init__()
        self.layer_index = int(layer_index)
        self.rate = float(rate)
        self.seed = int(seed)
        self.scale = float(np.float32(1.0 / (1.0 - self.rate))) if self.rate < 1 else 0.0
        self.clock = clock if clock is not None else DropoutClock()  # set by CrossbenchModel before each forward

    def extra_repr(self) -> str:
        return f"rate={self.rate}, layer_index={self.layer_index}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.rate <= 0:
            return x
        if self.clock.tensor is not None:
            keep = _device_mask_op(self.clock.tensor, _signed(self.seed), self.layer_index, x.numel(), self.rate)
        else:
            keep = _dropout_keep_mask_eager(self.seed, self.layer_index, self.clock, x.numel(), self.rate, x.device)
        # The mask is in logical NCHW order: shape it like x (any memory format) and scale the kept.
        factor = keep.view(x.shape).to(x.dtype) * self.scale
        return x * factor


class Concat(nn.Module):
    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        return torch.cat(xs, dim=1)


class Add(nn.Module):
    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a.add_(b) if self.inplace else a + b


class Flatten(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(x, 1)


class FullyConnected(nn.Linear):
    """nn.Linear on the input flattened in (C, H, W) order."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return super().forward(torch.flatten(x, 1) if x.dim() > 2 else x)


class BatchNorm(nn.BatchNorm2d):
    """BatchNorm2d that also takes (N, C) (a batch-norm after a fully-connected layer).

    Its parameters and statistics stay fp32 whatever the activations' dtype (DESIGN.md:
    16-bit precisions keep batch-norm statistics in fp32, as cuDNN's batch-norm does). On a
    GPU PyTorch's batch-norm takes 16-bit activations with fp32 parameters directly; where
    it cannot (the CPU), the activation is normalised in fp32 and cast back."""

    def _check_input_dim(self, x: torch.Tensor) -> None:
        if x.dim() not in (2, 4):
            raise ValueError(f"batch_norm expects a 2-D or 4-D input, got {x.dim()}-D")

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        if x.dtype == self.weight.dtype or x.is_cuda:
            return super().forward(x)
        return super().forward(x.float()).to(x.dtype)


class SoftmaxCrossEntropy(nn.Module):
    """Mean over the batch of the softmax cross-entropy, in fp32."""

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if logits.dim() > 2:
            logits = torch.flatten(logits, 1)
        return F.cross_entropy(logits.float(), labels.long())


# ---- The model --------------------------------------------------------------------------------

class CrossbenchModel(nn.Module):
    """A crossbench network as a torch module.

    ``model(x)`` returns the logits (N, classes); ``model.loss(logits, labels)`` the mean
    softmax cross-entropy. ``training_step`` and ``inference_step`` are what the benchmark
    times; ``synthetic_input`` / ``synthetic_labels`` give the engines' shared data.
    """

    def __init__(self, network: Union[Mapping[str, Any], str, os.PathLike], seed: int = 42, *,
                 device: Union[str, torch.device, None] = None, dtype: torch.dtype = torch.float32,
                 channels_last: bool = False, inplace: bool = True):
        super().__init__()
        self.network = load_network(network)
        self.name = str(self.network.get("name", "network"))
        self.seed = int(seed)
        self.channels_last = bool(channels_last)
        self.step = 0  # dropout step of the next training-mode forward
        self._clock = DropoutClock()  # what the dropout layers read: self.step, set around each forward
        layers = self.network["layers"]
        self._kinds: List[str] = [layer["kind"] for layer in layers]
        self._inputs: List[List[int]] = [[int(j) for j in layer["inputs"]] for layer in layers]
        self._names: List[str] = [str(layer["name"]) for layer in layers]
        self._outputs: List[List[int]] = [[int(v) for v in layer["output"]] for layer in layers]
        self.loss_index = len(layers) - 1
        self.logits_index = self._inputs[self.loss_index][0]
        self.classes = int(self.network.get("classes", int(np.prod(self._outputs[self.logits_index]))))

        consumers = [0] * len(layers)
        for ins in self._inputs:
            for j in ins:
                consumers[j] += 1
        # After layer i runs, drop the outputs whose last consumer is i (never the logits).
        last_use = {}
        for i, ins in enumerate(self._inputs[:self.loss_index]):
            for j in ins:
                last_use[j] = i
        self._release: List[List[int]] = [[] for _ in layers]
        for j, i in last_use.items():
            if j != self.logits_index:
                self._release[i].append(j)

        # In place is safe when the overwritten input is not the network input (reused every
        # step) and this layer is its only consumer.
        # Flatten and dropout may return their input itself (or a view of it): overwriting their
        # output overwrites their input, so that must be safe too.
        def may_overwrite(j: int) -> bool:
            if not inplace or j == 0 or consumers[j] != 1:
                return False
            if self._kinds[j] in ("flatten", "dropout"):
                return may_overwrite(self._inputs[j][0])
            return True

        factory = {"device": torch.device(device) if device is not None else torch.device("cpu"), "dtype": dtype}
        self.layers = nn.ModuleDict()
        self._dropouts: List[SyntheticDropout] = []
        for i, layer in enumerate(layers):
            kind, p, ins = layer["kind"], layer["params"], self._inputs[i]
            in_shape = self._outputs[ins[0]] if ins else None
            if kind == "convolution":
                module = nn.utils.skip_init(nn.Conv2d, in_shape[0], int(p["out_channels"]), int(p["kernel"]),
                                            stride=int(p["stride"]), padding=int(p["padding"]),
                                            bias=bool(p["bias"]), **factory)
            elif kind == "max_pool":
                module = nn.MaxPool2d(int(p["kernel"]), int(p["stride"]), int(p["padding"]),
                                      ceil_mode=bool(p["ceil_mode"]))
            elif kind == "avg_pool":
                module = nn.AvgPool2d(int(p["kernel"]), int(p["stride"]), int(p["padding"]),
                                      ceil_mode=bool(p["ceil_mode"]), count_include_pad=True)
            elif kind == "lrn":
                module = nn.LocalResponseNorm(int(p["size"]), alpha=float(p["alpha"]), beta=float(p["beta"]),
                                              k=float(p["k"]))
            elif kind == "relu":
                module = nn.ReLU(inplace=may_overwrite(ins[0]))
            elif kind == "batch_norm":  # fp32 parameters and statistics (BatchNorm's docstring)
                module = nn.utils.skip_init(BatchNorm, self._outputs[i][0], eps=float(p["epsilon"]),
                                            momentum=float(p["momentum"]), device=factory["device"],
                                            dtype=torch.float32)
            elif kind == "dropout":
                module = SyntheticDropout(i, float(p["rate"]), self.seed, self._clock)
                self._dropouts.append(module)
            elif kind == "concat":
                module = Concat()
            elif kind == "add":
                module = Add(inplace=may_overwrite(ins[0]) and ins[0] != ins[1])
            elif kind == "fully_connected":
                module = nn.utils.skip_init(FullyConnected, int(np.prod(in_shape)), int(p["out_features"]),
                                            bias=bool(p["bias"]), **factory)
            elif kind == "flatten":
                module = Flatten()
            elif kind == "softmax_cross_entropy":
                module = SoftmaxCrossEntropy()
            else:  # input
                continue
            self.layers[str(i)] = module
        self.reset_parameters()
        if self.channels_last:
            self.to(memory_format=torch.channels_last)

    # -- parameters -------------------------------------------------------------------------

    @torch.no_grad()
    def reset_parameters(self, seed: Optional[int] = None) -> None:
        """(Re)loads every parameter from the synthetic generator; resets running statistics and step."""
        if seed is not None:
            self.seed = int(seed)
            for d in self._dropouts:
                d.seed = self.seed
        for key, module in self.layers.items():
            i = int(key)
            if isinstance(module, (nn.Conv2d, nn.Linear)):
                self._load(module.weight, synthetic.parameter(self.network, i, synthetic.WEIGHT, self.seed))
                if module.bias is not None:
                    self._load(module.bias, synthetic.parameter(self.network, i, synthetic.BIAS, self.seed))
            elif isinstance(module, nn.BatchNorm2d):
                self._load(module.weight, synthetic.parameter(self.network, i, synthetic.BN_GAMMA, self.seed))
                self._load(module.bias, synthetic.parameter(self.network, i, synthetic.BN_BETA, self.seed))
                module.reset_running_stats()
        self.step = 0

    @torch.no_grad()
    def reset_state(self) -> None:
        """What a fresh native session starts from, without regenerating the weights: batch-norm
        running statistics at mean 0 / variance 1, dropout step 0, no gradients."""
        for module in self.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.reset_running_stats()
        self.step = 0
        self.zero_grad(set_to_none=True)

    def check(self, x: torch.Tensor, labels: torch.Tensor, training: bool) -> Dict[str, Any]:
        """The native engines' Session::check(): one forward (and backward when `training`) on
        (x, labels) with dropout step 0, leaving the model as it found it (running statistics,
        step, mode; gradients are left set). Returns finite, loss, logits_checksum, gradient_norm
        and gradient_norms (per trainable tensor in layer order: weight, bias, gamma, beta)."""
        was_training, step = self.training, self.step
        buffers = [(b, b.detach().clone()) for b in self.buffers()]
        try:
            self.train(training)
            self.step = 0
            if training:
                self.zero_grad(set_to_none=True)
                logits = self(x)
                loss = self.loss(logits, labels)
                loss.backward()
            else:
                with torch.no_grad():
                    logits = self(x)
                    loss = self.loss(logits, labels)
            logits64 = logits.detach().double()
            squared_norms = None
            if training:
                squared_norms = [(p.grad if p.grad is not None else torch.zeros_like(p)).detach().double().square()
                                 .sum().item() for p in self.parameters()]
            return check_result(loss.item(), logits64.sum().item(), torch.isfinite(logits64).all().item(),
                                squared_norms)
        finally:
            with torch.no_grad():
                for b, saved in buffers:
                    b.copy_(saved)
            self.step = step
            self.train(was_training)

    @staticmethod
    def _load(target: torch.Tensor, values: np.ndarray) -> None:
        source = torch.from_numpy(np.ascontiguousarray(values))
        if tuple(source.shape) != tuple(target.shape):
            raise ValueError(f"synthetic parameter of shape {tuple(source.shape)} for a tensor of shape "
                             f"{tuple(target.shape)}")
        target.copy_(source)  # converts device, dtype and memory format

    # -- data -------------------------------------------------------------------------------

    def _parameter_placement(self):
        for tensor in self.parameters():
            return tensor.device, tensor.dtype
        return torch.device("cpu"), torch.float32

    def synthetic_input(self, batch: int, device=None, dtype=None) -> torch.Tensor:
        """The shared input batch (N, C, H, W), on the model's device and dtype by default."""
        default_device, default_dtype = self._parameter_placement()
        x = torch.from_numpy(synthetic.input(self.network, batch, self.seed))
        x = x.to(device=device or default_device, dtype=dtype or default_dtype)
        return self.prepare_input(x)

    def synthetic_labels(self, batch: int, device=None) -> torch.Tensor:
        """The shared labels (N,), int64."""
        default_device, _ = self._parameter_placement()
        labels = torch.from_numpy(synthetic.labels(self.network, batch, self.seed).astype(np.int64))
        return labels.to(device or default_device)

    def prepare_input(self, x: torch.Tensor) -> torch.Tensor:
        """x in the model's memory format (a no-op when it already is)."""
        if self.channels_last and x.dim() == 4:
            return x.contiguous(memory_format=torch.channels_last)
        return x

    # -- execution --------------------------------------------------------------------------

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The logits (N, classes) of the input batch (N, C, H, W).

        The dropout step's bookkeeping happens here, around ``layers_forward``: a worker
        compiles ``layers_forward`` alone (torch.compile), which then never sees the step."""
        training = self.training
        if training:
            self._clock.step = self.step
            if self._clock.tensor is not None:
                self._clock.tensor.fill_(self.step)
        logits = self.layers_forward(x)
        if training:
            self.step += 1
        return logits

    def use_device_dropout_step(self) -> bool:
        """Dropout masks from a step counter on the device (a 0-d int64 tensor that forward() sets)
        through the custom op crossbench::dropout_keep_mask: a compiled ``layers_forward`` then has
        no graph break and no per-step recompilation, and a CUDA graph replays the masks. The masks
        are the same. False (nothing changes) where this torch has no torch.library.custom_op."""
        if _device_mask_op is None:
            return False
        device, _ = self._parameter_placement()
        self._clock.tensor = torch.zeros((), dtype=torch.int64, device=device)
        return True

    def layers_forward(self, x: torch.Tensor) -> torch.Tensor:
        """The layers from the input to the logits, without any Python state that changes per step."""
        values: List[Optional[torch.Tensor]] = [None] * self.loss_index
        values[0] = self.prepare_input(x)
        layers, inputs, release = self.layers, self._inputs, self._release
        for i in range(1, self.loss_index):
            module = layers[str(i)]
            ins = inputs[i]
            if len(ins) == 1:
                values[i] = module(values[ins[0]])
            else:
                values[i] = module(*[values[j] for j in ins])
            for j in release[i]:
                values[j] = None
        logits = values[self.logits_index]
        return torch.flatten(logits, 1) if logits.dim() > 2 else logits

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Mean softmax cross-entropy over the batch (fp32)."""
        return self.layers[str(self.loss_index)](logits, labels)

    def training_step(self, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Forward + loss + backward (input and weight gradients); no weight update.

        Gradients are zeroed with set_to_none first. Returns the loss (a 0-d tensor)."""
        if not self.training:
            self.train()
        self.zero_grad(set_to_none=True)
        loss = self.loss(self(x), labels)
        loss.backward()
        return loss

    @torch.no_grad()
    def inference_step(self, x: torch.Tensor) -> torch.Tensor:
        """Forward in eval mode without autograd; returns the logits."""
        if self.training:
            self.eval()
        return self(x)

    # -- facts ------------------------------------------------------------------------------

    def layer_name(self, index: int) -> str:
        return self._names[index]

    def parameter_count(self) -> int:
        return sum(t.numel() for t in self.parameters())

    def extra_repr(self) -> str:
        return f"name={self.name!r}, seed={self.seed}, channels_last={self.channels_last}"


def build_model(network: Union[Mapping[str, Any], str, os.PathLike], seed: int = 42, **options) -> CrossbenchModel:
    """CrossbenchModel(network, seed, **options): device, dtype, channels_last, inplace."""
    return CrossbenchModel(network, seed, **options)
