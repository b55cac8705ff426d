"""The JAX worker's network (worker.py runs it): the network JSON as a pure function of plain
jax.lax, the precision recipes, and the dropout masks drawn on the device.

Conventions are those of src/workers/pytorch/model.py (and the oneDNN engine):

- convolution: lax.conv_general_dilated, NCHW / OIHW, zero padding; weights from
  synthetic.parameter (OIHW; fully-connected (out, in) with `in` in (C, H, W) order).
- max_pool / avg_pool: lax.reduce_window; ceil_mode through extra right padding
  (-inf for max, 0 for avg) up to the output size the graph states; the average
  divides by kernel * kernel always (count_include_pad, as json.cpp documents).
- lrn: b_c = a_c / (k + alpha / size * sum of a^2 over `size` channels centred on c)^beta
  (channel window c - size//2 .. c + (size-1)//2, as torch.nn.LocalResponseNorm).
- batch_norm: batch statistics (biased variance) in training, running statistics
  mean 0 / variance 1 in inference (the step does not update running statistics:
  they never influence a training step's numbers, and a fresh session has 0/1).
- dropout: crossbench's deterministic inverted dropout, drawn inside the jitted (timed)
  step as every engine draws it: the host passes only each dropout layer's 64-bit
  stream state of step s (two uint32 words per layer, `dropout_states`), and the step
  computes splitmix64 over the layer's elements on the device in 32-bit limbs (JAX has
  no uint64 without x64), bit for bit synthetic.dropout_keep_mask (a test holds them
  equal). The session's check() (worker.py) uses step 0.
- loss: mean softmax cross-entropy in fp32 against synthetic.labels.
- training step: jax.value_and_grad of the loss w.r.t. the parameters (no update, and the
  parameters are then no output: XLA would copy them every step; with update=sgd the
  parameters take a plain SGD step inside the jit and are returned; worker.py's JaxSession
  builds it from Network.forward and Network.loss).
- precision (``Recipe``, DESIGN.md's one meaning per precision): fp32 strict
  (jax.default_matmul_precision "float32", i.e. highest: no TF32), tf32
  ("tensorfloat32"); fp16/bf16 "pure": convolution and fully-connected weights,
  the input, activations and their gradients in 16 bits, batch-norm gamma/beta
  and statistics in fp32, the loss in fp32; amp-fp16/amp-bf16: every parameter
  and the input kept in fp32 (so the gradients are fp32) and cast to 16 bits
  inside the jitted step (the usual JAX mixed-precision recipe).

Importing this module imports neither jax nor numpy: jax inside the functions that use it, numpy and
common.synthetic at the first Network or mask (_import_numpy_and_synthetic), so that a python
without them says so in the worker's hello instead of failing to start.
"""
import os
import sys

try:
    from common import recipes
except ImportError:  # imported by path, without src/workers on sys.path
    sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from common import recipes
from common.protocol import WorkerError

np = synthetic = None  # numpy and common.synthetic, imported on first use (_import_numpy_and_synthetic)


def _import_numpy_and_synthetic():
    global np, synthetic
    if synthetic is None:
        import numpy as np
        from common import synthetic


# ---- The network as a pure function ----------------------------------------------------------

class Network:
    """Parameters (a list of arrays in layer order: weight, bias, gamma, beta) and forward()."""

    def __init__(self, graph, seed):
        _import_numpy_and_synthetic()
        self.graph = graph
        self.layers = graph["layers"]
        self.seed = int(seed)
        self.loss_index = len(self.layers) - 1
        self.logits_index = int(self.layers[self.loss_index]["inputs"][0])
        self.slots = {}  # layer index -> {slot: position in the parameter list}
        self.host_params = []
        for i, layer in enumerate(self.layers):
            kind = layer["kind"]
            if kind in ("convolution", "fully_connected"):
                slots = [synthetic.WEIGHT] + ([synthetic.BIAS] if layer["params"]["bias"] else [])
            elif kind == "batch_norm":
                slots = [synthetic.BN_GAMMA, synthetic.BN_BETA]
            else:
                continue
            self.slots[i] = {}
            for slot in slots:
                self.slots[i][slot] = len(self.host_params)
                self.host_params.append(synthetic.parameter(graph, i, slot, self.seed))
        self.dropouts = [i for i, layer in enumerate(self.layers)
                         if layer["kind"] == "dropout" and float(layer["params"]["rate"]) > 0]

    def dropout_states(self, step):
        """(layers, 2) uint32: the (high, low) words of each dropout layer's stream state at `step`."""
        states = [synthetic.stream_state(self.seed, synthetic.dropout_tensor_id(i, step)) for i in self.dropouts]
        return np.array([[v >> 32, v & 0xFFFFFFFF] for v in states], dtype=np.uint32).reshape(-1, 2)

    def device_masks(self, states, batch, dtype):
        """Inside the jitted step: each dropout layer's keep * fp32(1/(1-rate)), from `states`."""
        masks = []
        for k, i in enumerate(self.dropouts):
            rate = float(self.layers[i]["params"]["rate"])
            count = batch * int(np.prod(self.layers[i]["output"]))
            keep = device_keep_mask(states[k, 0], states[k, 1], count, synthetic.dropout_threshold(rate))
            scale = np.float32(1.0 / (1.0 - rate)) if rate < 1 else np.float32(0.0)
            import jax.numpy as jnp
            masks.append((keep.astype(jnp.float32) * scale).astype(dtype))
        return masks

    def dropout_masks(self, batch, step, dtype):
        """{layer: keep * fp32(1/(1-rate))} of training step `step`, NCHW-flat over the batch."""
        masks = []
        for i in self.dropouts:
            rate = float(self.layers[i]["params"]["rate"])
            count = batch * int(np.prod(self.layers[i]["output"]))
            keep = synthetic.dropout_keep_mask(self.seed, i, step, count, rate)
            scale = np.float32(1.0 / (1.0 - rate)) if rate < 1 else np.float32(0.0)
            masks.append((keep.astype(np.float32) * scale).astype(dtype))
        return masks

    def forward(self, params, x, masks, training):
        """The logits (N, classes) in the compute dtype."""
        import jax.numpy as jnp
        from jax import lax

        values = [None] * self.loss_index
        values[0] = x
        drop = dict(zip(self.dropouts, masks)) if training else {}
        for i in range(1, self.loss_index):
            layer = self.layers[i]
            kind, p = layer["kind"], layer["params"]
            ins = [values[int(j)] for j in layer["inputs"]]
            a = ins[0]
            s = self.slots.get(i, {})
            if kind == "convolution":
                pad = int(p["padding"])
                y = lax.conv_general_dilated(a, params[s[synthetic.WEIGHT]], (int(p["stride"]),) * 2,
                                             [(pad, pad), (pad, pad)],
                                             dimension_numbers=("NCHW", "OIHW", "NCHW"))
                if synthetic.BIAS in s:
                    y = y + params[s[synthetic.BIAS]][None, :, None, None]
            elif kind in ("max_pool", "avg_pool"):
                k, st, pad = int(p["kernel"]), int(p["stride"]), int(p["padding"])
                _, out_h, out_w = [int(v) for v in layer["output"]]
                h, w = a.shape[2], a.shape[3]
                extra_h = max(0, (out_h - 1) * st + k - (h + 2 * pad))
                extra_w = max(0, (out_w - 1) * st + k - (w + 2 * pad))
                padding = [(0, 0), (0, 0), (pad, pad + extra_h), (pad, pad + extra_w)]
                if kind == "max_pool":
                    init = -jnp.inf
                    y = lax.reduce_window(a, init, lax.max, (1, 1, k, k), (1, 1, st, st), padding)
                else:
                    y = lax.reduce_window(a, 0.0, lax.add, (1, 1, k, k), (1, 1, st, st),
                                          padding) / jnp.array(k * k, a.dtype)
                y = y[:, :, :out_h, :out_w]
            elif kind == "lrn":
                size = int(p["size"])
                alpha, beta, k = float(p["alpha"]), float(p["beta"]), float(p["k"])
                sq = lax.reduce_window(a * a, 0.0, lax.add, (1, size, 1, 1), (1, 1, 1, 1),
                                       [(0, 0), (size // 2, (size - 1) // 2), (0, 0), (0, 0)])
                y = a / (k + (alpha / size) * sq) ** beta
            elif kind == "relu":
                y = jnp.maximum(a, jnp.array(0, a.dtype))
            elif kind == "batch_norm":
                eps = float(p["epsilon"])
                gamma, beta_ = params[s[synthetic.BN_GAMMA]], params[s[synthetic.BN_BETA]]
                axes = (0, 2, 3) if a.ndim == 4 else (0,)
                shape = (1, -1, 1, 1) if a.ndim == 4 else (1, -1)
                a32 = a.astype(jnp.float32)
                if training:
                    mean = a32.mean(axis=axes)
                    var = jnp.square(a32 - mean.reshape(shape)).mean(axis=axes)
                else:
                    mean = jnp.zeros((a.shape[1],), jnp.float32)
                    var = jnp.ones((a.shape[1],), jnp.float32)
                inv = lax.rsqrt(var + eps) * gamma.astype(jnp.float32)
                y = ((a32 - mean.reshape(shape)) * inv.reshape(shape)
                     + beta_.astype(jnp.float32).reshape(shape)).astype(a.dtype)
            elif kind == "dropout":
                y = a * drop[i].reshape(a.shape) if i in drop else a
            elif kind == "concat":
                y = jnp.concatenate(ins, axis=1)
            elif kind == "add":
                y = ins[0] + ins[1]
            elif kind == "fully_connected":
                flat = a.reshape(a.shape[0], -1)
                y = flat @ params[s[synthetic.WEIGHT]].T
                if synthetic.BIAS in s:
                    y = y + params[s[synthetic.BIAS]]
            elif kind == "flatten":
                y = a.reshape(a.shape[0], -1)
            else:
                raise ValueError(f"jax worker: layer {i} has unsupported kind {kind!r}")
            values[i] = y
        logits = values[self.logits_index]
        return logits.reshape(logits.shape[0], -1)

    @staticmethod
    def loss(logits, labels):
        import jax
        import jax.numpy as jnp
        logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))


# ---- Precision --------------------------------------------------------------------------------

class Recipe:
    """What a precision means in JAX: the parameters' storage dtype, the compute dtype inside
    the step, and the matmul precision (see the module docstring)."""

    def __init__(self, precision):
        import jax.numpy as jnp

        sixteen = {"fp16": jnp.float16, "bf16": jnp.bfloat16}
        amp = {"amp-fp16": jnp.float16, "amp-bf16": jnp.bfloat16}
        if precision not in ("fp32", "tf32") and precision not in sixteen and precision not in amp:
            raise WorkerError("unsupported", f"unknown precision {precision!r}")
        self.precision = precision
        self.compute_dtype = sixteen.get(precision) or amp.get(precision) or jnp.float32
        self.storage_dtype = sixteen.get(precision, jnp.float32)  # weights and input as stored
        self.mixed = precision in amp
        self.matmul_precision = "tensorfloat32" if precision == "tf32" else "float32"

    def describe(self):
        """The precision's recipe (common/recipes.py, the texts of every engine) and JAX's means."""
        if self.mixed:
            means = f"fp32 params cast to {self.precision[4:]} in the jitted step"
        else:
            means = f"{'fp32' if self.precision in ('fp32', 'tf32') else self.precision} params"
        return recipes.describe(self.precision, f"{means}; matmul_precision={self.matmul_precision}")


# ---- splitmix64 on the device, in 32-bit limbs ------------------------------------------------
# A 64-bit value is a (high, low) pair of uint32 arrays; XLA's integer arithmetic wraps modulo
# 2**32 and shifts of unsigned values are logical, so each step below is exact.

def _mul32(a, b):
    """The full 64-bit product of two uint32 arrays, as (high, low): 16-bit halves, exact."""
    import jax.numpy as jnp
    mask16, s16 = np.uint32(0xFFFF), np.uint32(16)
    a0, a1, b0, b1 = a & mask16, a >> s16, b & mask16, b >> s16
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = p01 + p10
    mid_carry = (mid < p01).astype(jnp.uint32)        # the 2**32 of mid, worth 2**48
    low = p00 + (mid << s16)
    low_carry = (low < p00).astype(jnp.uint32)
    high = p11 + (mid >> s16) + (mid_carry << s16) + low_carry
    return high, low


def _mul64(high, low, constant):
    """(high, low) * constant modulo 2**64."""
    c_high, c_low = np.uint32(constant >> 32), np.uint32(constant & 0xFFFFFFFF)
    h, l = _mul32(low, c_low)
    return h + low * c_high + high * c_low, l


def _xorshift(high, low, k):
    """z ^ (z >> k) for 0 < k < 32."""
    k, rest = np.uint32(k), np.uint32(32 - k)
    return high ^ (high >> k), low ^ ((low >> k) | (high << rest))


def device_keep_mask(state_high, state_low, count, threshold):
    """synthetic.dropout_keep_mask of the stream with state (high, low), elements 0 .. count-1:
    keep when (mix(state + (i + 1) * G) >> 40) >= threshold."""
    import jax.numpy as jnp
    from jax import lax
    _import_numpy_and_synthetic()
    index = lax.iota(jnp.uint32, count) + np.uint32(1)            # i + 1 < 2**32
    g = synthetic.GOLDEN_GAMMA
    high, low = _mul32(index, jnp.full((count,), np.uint32(g & 0xFFFFFFFF), jnp.uint32))
    high = high + index * np.uint32(g >> 32)                       # (i + 1) * G mod 2**64
    low = low + state_low
    high = high + state_high + (low < state_low).astype(jnp.uint32)  # + state, with the carry
    high, low = _xorshift(high, low, 30)
    high, low = _mul64(high, low, 0xBF58476D1CE4E5B9)
    high, low = _xorshift(high, low, 27)
    high, low = _mul64(high, low, 0x94D049BB133111EB)
    high, low = _xorshift(high, low, 31)
    return (high >> np.uint32(8)) >= np.uint32(threshold)          # hash >> 40 = high >> 8
