"""crossbench's synthetic data in numpy: an exact port of include/crossbench/synthetic.hpp.

Every engine (native or framework worker) computes on the same weights, inputs,
labels and dropout masks, drawn from one counter-based generator: element
``index`` of tensor ``tensor_id`` is output number ``index`` of a splitmix64
stream whose state starts at ``mix(seed ^ tensor_id * G)``. All arithmetic is
on uint64, wrapping modulo 2**64 (numpy uint64 arrays wrap silently).

    hash(seed, tensor_id, index) = mix(mix(seed ^ (tensor_id * G)) + (index + 1) * G)
    uniform01 = float(hash >> 40) * 2**-24                    (exact in fp32 and fp64)
    fill_uniform element i = fp32(scale) * fp32(2 * uniform01 - 1)     (one fp32 rounding)
    weights: He-uniform, scale = fp32(sqrt(6 / fan_in)) (sqrt in fp64), canonical layouts:
             convolution OIHW, fully-connected (out, in) with `in` in (C, H, W) order
    biases, batch-norm beta: 0; batch-norm gamma: 1
    input: NCHW over the batch, fill_uniform(seed, INPUT_TENSOR_ID, 1)
    labels[n] = hash(seed, LABELS_TENSOR_ID, n) % classes
    dropout: element i (NCHW over the batch) of layer L's output at step s is kept when
             fp64(uniform01(seed, tensor_id(L, DROPOUT_MASK) + (s << 32), i)) >= rate

Layer-dependent functions take the network as the parsed JSON document of
``crossbench export-network`` (format "crossbench-network/1", see
src/networks/json.cpp). Importing this module has no side effects; it needs
only numpy.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

__all__ = [
    "GOLDEN_GAMMA", "WEIGHT", "BIAS", "BN_GAMMA", "BN_BETA", "DROPOUT_MASK",
    "INPUT_TENSOR_ID", "LABELS_TENSOR_ID", "tensor_id", "mix", "stream_state", "hash", "hash_array",
    "uniform01", "uniform01_array", "fill_uniform", "he_scale", "parameter_shape", "parameter",
    "input", "labels", "dropout_tensor_id", "dropout_keep", "dropout_keep_mask", "dropout_threshold",
]

_M64 = (1 << 64) - 1
GOLDEN_GAMMA = 0x9E3779B97F4A7C15  # splitmix64's increment
_C1 = np.uint64(0xBF58476D1CE4E5B9)
_C2 = np.uint64(0x94D049BB133111EB)
_G = np.uint64(GOLDEN_GAMMA)
_S30, _S27, _S31, _S40 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(40)
_TWO_TO_MINUS_24 = np.float32(1.0 / 16777216.0)

# Parameter slots (synthetic::Slot): tensor id = (layer index + 1) * 16 + slot.
WEIGHT, BIAS, BN_GAMMA, BN_BETA, DROPOUT_MASK = 0, 1, 2, 3, 4
INPUT_TENSOR_ID = 1
LABELS_TENSOR_ID = 2

# Elements generated per numpy pass: 512 KiB uint64 buffers stay in cache.
_CHUNK = 1 << 16


def _u64(value: int) -> int:
    value = int(value)
    if value < 0 or value > _M64:
        raise ValueError(f"synthetic: {value} is not a 64-bit unsigned integer")
    return value


# ---- Scalar reference (Python integers) ---------------------------------------------

def mix(z: int) -> int:
    """The splitmix64 finaliser on a Python integer (mod 2**64)."""
    z &= _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def stream_state(seed: int, tensor_id_: int) -> int:
    """State of a tensor's splitmix64 stream: mix(seed ^ tensor_id * G)."""
    return mix(_u64(seed) ^ ((_u64(tensor_id_) * GOLDEN_GAMMA) & _M64))


def hash(seed: int, tensor_id_: int, index: int) -> int:  # noqa: A001 (the C++ name)
    """hash(seed, tensor_id, index) as a Python int."""
    return mix((stream_state(seed, tensor_id_) + (_u64(index) + 1) * GOLDEN_GAMMA) & _M64)


def uniform01(seed: int, tensor_id_: int, index: int) -> np.float32:
    """Uniform in [0, 1) from the top 24 bits of hash() (exact in fp32)."""
    return np.float32(hash(seed, tensor_id_, index) >> 40) * _TWO_TO_MINUS_24


def tensor_id(layer_index: int, slot: int) -> int:
    if layer_index < 0:
        raise ValueError(f"synthetic: negative layer index {layer_index}")
    if slot not in (WEIGHT, BIAS, BN_GAMMA, BN_BETA, DROPOUT_MASK):
        raise ValueError(f"synthetic: unknown slot {slot}")
    return (layer_index + 1) * 16 + slot


# ---- Vectorised (numpy uint64, wrapping) ----------------------------------------------

def _mix_inplace(z: np.ndarray, tmp: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser on a uint64 array, in place (tmp: scratch of the same shape)."""
    np.right_shift(z, _S30, out=tmp)
    z ^= tmp
    z *= _C1
    np.right_shift(z, _S27, out=tmp)
    z ^= tmp
    z *= _C2
    np.right_shift(z, _S31, out=tmp)
    z ^= tmp
    return z


def _stream_hashes(state: int, start: int, count: int) -> np.ndarray:
    """hash for indices start .. start+count-1 of the stream with `state` (one pass; small counts)."""
    z = np.arange(start + 1, start + 1 + count, dtype=np.uint64)  # index + 1
    z *= _G
    z += np.uint64(state)
    return _mix_inplace(z, np.empty_like(z))


def _stream_chunks(state: int, count: int):
    """Yields (start, top24) for consecutive chunks of indices 0 .. count-1, where top24 (uint64,
    reused between chunks) holds hash >> 40. Chunks stay in cache: about 6x faster than one pass."""
    chunk = min(_CHUNK, max(int(count), 1))
    steps = np.arange(1, chunk + 1, dtype=np.uint64)
    steps *= _G  # (i + 1) * G
    z = np.empty(chunk, dtype=np.uint64)
    tmp = np.empty(chunk, dtype=np.uint64)
    for start in range(0, int(count), chunk):
        n = min(chunk, int(count) - start)
        zn, tn = z[:n], tmp[:n]
        # state + (start + i + 1) * G  =  (state + start * G) + (i + 1) * G   (mod 2**64)
        np.add(steps[:n], np.uint64((state + start * GOLDEN_GAMMA) & _M64), out=zn)
        _mix_inplace(zn, tn)
        zn >>= _S40
        yield start, zn


def hash_array(seed: int, tensor_id_: int, indices) -> np.ndarray:
    """hash(seed, tensor_id, i) for an array of indices (any shape), as uint64."""
    idx = np.asarray(indices)
    if idx.dtype.kind not in "iu":
        raise TypeError("synthetic: indices must be integers")
    if idx.dtype.kind == "i" and idx.size and idx.min() < 0:
        raise ValueError("synthetic: negative index")
    z = idx.astype(np.uint64, copy=True)
    z += np.uint64(1)
    z *= _G
    z += np.uint64(stream_state(seed, tensor_id_))
    return _mix_inplace(z, np.empty_like(z))


def uniform01_array(seed: int, tensor_id_: int, indices) -> np.ndarray:
    """uniform01 for an array of indices, as float32."""
    return (hash_array(seed, tensor_id_, indices) >> _S40).astype(np.float32) * _TWO_TO_MINUS_24


def fill_uniform(count: int, seed: int, tensor_id_: int, scale: float) -> np.ndarray:
    """`count` float32 values fp32(scale) * (2 * uniform01(i) - 1), i = 0 .. count-1."""
    count = int(count)
    if count < 0:
        raise ValueError("synthetic: negative count")
    scale32 = np.float32(scale)
    out = np.empty(count, dtype=np.float32)
    centred = np.empty(min(_CHUNK, max(count, 1)), dtype=np.float32)
    for start, top24 in _stream_chunks(stream_state(seed, tensor_id_), count):
        c = centred[:top24.size]
        c[...] = top24              # exact: < 2**24
        c *= _TWO_TO_MINUS_24       # u, exact
        c *= np.float32(2.0)        # 2u, exact
        c -= np.float32(1.0)        # 2u - 1, exact (u has 24 significant bits)
        np.multiply(c, scale32, out=out[start:start + top24.size])  # the one rounding
    return out


# ---- Network-dependent parts (the JSON graph of `crossbench export-network`) ---------

def _layers(network: Mapping[str, Any]):
    return network["layers"]


def _layer(network: Mapping[str, Any], layer_index: int) -> Mapping[str, Any]:
    layers = _layers(network)
    if layer_index < 0 or layer_index >= len(layers):
        raise IndexError(f"synthetic: layer index {layer_index} is out of range for network "
                         f"'{network.get('name', '?')}' ({len(layers)} layers)")
    return layers[layer_index]


def _output_of(network: Mapping[str, Any], layer_index: int):
    return [int(v) for v in _layer(network, layer_index)["output"]]


def _input_shape(network: Mapping[str, Any], layer: Mapping[str, Any]):
    return _output_of(network, int(layer["inputs"][0]))


def he_scale(fan_in: int) -> np.float32:
    """fp32(sqrt(6 / fan_in)), the square root in fp64."""
    return np.float32(math.sqrt(6.0 / float(fan_in)))


def parameter_shape(network: Mapping[str, Any], layer_index: int, slot: int) -> tuple:
    """Canonical shape of `slot` of a layer; () when the layer has no such parameter."""
    layer = _layer(network, layer_index)
    kind, p = layer["kind"], layer["params"]
    if kind == "convolution":
        c, _, _ = _input_shape(network, layer)
        k = int(p["kernel"])
        if slot == WEIGHT:
            return (int(p["out_channels"]), c, k, k)
        if slot == BIAS and p["bias"]:
            return (int(p["out_channels"]),)
    elif kind == "fully_connected":
        c, h, w = _input_shape(network, layer)
        if slot == WEIGHT:
            return (int(p["out_features"]), c * h * w)
        if slot == BIAS and p["bias"]:
            return (int(p["out_features"]),)
    elif kind == "batch_norm":
        if slot in (BN_GAMMA, BN_BETA):
            return (_output_of(network, layer_index)[0],)
    return ()


def parameter(network: Mapping[str, Any], layer_index: int, slot: int, seed: int) -> np.ndarray:
    """Values of `slot` of a layer in its canonical layout (float32, shaped; size 0 when absent)."""
    shape = parameter_shape(network, layer_index, slot)
    if not shape:
        return np.zeros((0,), dtype=np.float32)
    count = int(np.prod(shape, dtype=np.int64))
    if slot == WEIGHT:
        fan_in = count // shape[0]  # in_channels * k * k, or in_features
        return fill_uniform(count, seed, tensor_id(layer_index, slot), he_scale(fan_in)).reshape(shape)
    if slot == BN_GAMMA:
        return np.ones(shape, dtype=np.float32)
    return np.zeros(shape, dtype=np.float32)  # bias, beta


def input(network: Mapping[str, Any], batch: int, seed: int) -> np.ndarray:  # noqa: A001 (the C++ name)
    """The input batch, (batch, C, H, W) float32, uniform in [-1, 1)."""
    if batch <= 0:
        raise ValueError(f"synthetic: batch must be positive, got {batch}")
    inp = network["input"]
    shape = (int(batch), int(inp["channels"]), int(inp["height"]), int(inp["width"]))
    return fill_uniform(int(np.prod(shape)), seed, INPUT_TENSOR_ID, 1.0).reshape(shape)


def _classes(network: Mapping[str, Any]) -> int:
    if "classes" in network:
        return int(network["classes"])
    layers = _layers(network)
    c, h, w = _output_of(network, int(layers[-1]["inputs"][0]))
    return c * h * w


def labels(network: Mapping[str, Any], batch: int, seed: int) -> np.ndarray:
    """Labels in [0, classes): hash(seed, LABELS_TENSOR_ID, n) % classes, int32."""
    if batch <= 0:
        raise ValueError(f"synthetic: batch must be positive, got {batch}")
    h = _stream_hashes(stream_state(seed, LABELS_TENSOR_ID), 0, int(batch))
    return (h % np.uint64(_classes(network))).astype(np.int32)


def dropout_tensor_id(layer_index: int, step: int) -> int:
    return (tensor_id(layer_index, DROPOUT_MASK) + (_u64(step) << 32)) & _M64


def dropout_threshold(rate: float) -> int:
    """Smallest t with t * 2**-24 >= rate: keep exactly when (hash >> 40) >= t.

    Equivalent to the fp64 comparison uniform01 >= rate (u * 2**24 is an integer)."""
    return max(0, min(1 << 24, math.ceil(float(rate) * 16777216.0)))


def dropout_keep(seed: int, layer_index: int, step: int, index: int, rate: float) -> bool:
    """Whether element `index` (NCHW over the batch) of a dropout layer's output is kept at `step`."""
    return float(uniform01(seed, dropout_tensor_id(layer_index, step), index)) >= float(rate)


def dropout_keep_mask(seed: int, layer_index: int, step: int, count: int, rate: float) -> np.ndarray:
    """Keep-mask (bool) of elements 0 .. count-1 of a dropout layer's output at `step`."""
    out = np.empty(int(count), dtype=bool)
    threshold = np.uint64(dropout_threshold(rate))
    for start, top24 in _stream_chunks(stream_state(seed, dropout_tensor_id(layer_index, step)), count):
        np.greater_equal(top24, threshold, out=out[start:start + top24.size])
    return out
