"""The cudnn engine's single-GPU cells of a results cube, read with h5py.

h5py rather than xarray or the analysis package: the GPU machine's xarray has
no netCDF backend, and the bench scripts must run there as well as here.
Shared by gpu_pytorch_vs_crossbench.py and pytorch_ratio.py.
"""

import math

import h5py
import numpy


def _text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def cudnn_cells(path, engine_name="cudnn"):
    """{(network, precision, phase, batch): {"median_ms", "loss", "peak_memory_bytes", "decisions",
    "mean_sm_clock_mhz", "max_temperature_c", "throttled", "repetition_medians_ms"}} for every measured cell of `engine_name` at gpus = 1
    and replica 0 of the first device (the clock and temperature NaN and throttled -1 where the cube has no
    telemetry: a CPU, no NVML, or a cube written before the temperature was recorded; the repetitions' medians
    in run order, empty where the cell was measured once)."""
    cells = {}
    with h5py.File(path, "r") as cube:
        names = {d: [_text(v) for v in cube[d][()]]
                 for d in ("device", "engine", "network", "precision", "batch", "phase", "replica")}
        if engine_name not in names["engine"]:
            raise ValueError(f"{path}: no '{engine_name}' engine in the cube (engines: {', '.join(names['engine'])})")
        # Schema 2 has a gpus axis between phase and replica: the single-GPU cells are at gpus = 1.
        gpus_axis = ((list(cube["gpus"][()]).index(1),) if "gpus" in cube else ())
        median, peak, message = cube["median_ms"][()], cube["peak_memory_bytes"][()], cube["message"][()]
        decisions = cube["decisions"][()] if "decisions" in cube else None
        clock = cube["mean_sm_clock_mhz"][()] if "mean_sm_clock_mhz" in cube else None
        temperature = cube["max_temperature_c"][()] if "max_temperature_c" in cube else None
        throttled = cube["throttled"][()] if "throttled" in cube else None
        # --repetitions (schema 4): every repetition's median over the cell dimensions and `repetition`, NaN past
        # a cell's last one.
        repetitions = cube["repetition_median_ms"][()] if "repetition_median_ms" in cube else None
        engine = names["engine"].index(engine_name)
        for i_n, network in enumerate(names["network"]):
            for i_p, precision in enumerate(names["precision"]):
                for i_b, batch in enumerate(names["batch"]):
                    for i_ph, phase in enumerate(names["phase"]):
                        at = (0, engine, i_n, i_p, i_b, i_ph) + gpus_axis + (0,)
                        if math.isnan(median[at]):
                            continue
                        text = _text(message[at])
                        loss = float(text.rsplit("loss ", 1)[1].split(";")[0].split()[0]) if "loss " in text else float("nan")
                        cells[(network, precision, phase, int(batch))] = {
                            "median_ms": float(median[at]), "loss": loss, "peak_memory_bytes": float(peak[at]),
                            "decisions": _text(decisions[at]) if decisions is not None else "",
                            "mean_sm_clock_mhz": float(clock[at]) if clock is not None else float("nan"),
                            "max_temperature_c": float(temperature[at]) if temperature is not None else float("nan"),
                            "throttled": int(throttled[at]) if throttled is not None else -1,
                            "repetition_medians_ms": ([float(v) for v in repetitions[at] if not math.isnan(v)]
                                                      if repetitions is not None else [])}
    return cells


def layer_times(path, engine_name="cudnn"):
    """{(network, precision, phase, batch): [(layer, kind, forward_ms, backward_ms), ...]} in network order, for
    every profiled cell (`--layer-times`) of `engine_name` at gpus = 1 and replica 0 of the first device; {} for
    a cube without layer times."""
    cells = {}
    with h5py.File(path, "r") as cube:
        if "layer_times" not in cube or "group" not in cube["layer_times"]:
            return cells
        index = cube["layer_times"]
        first_device = _text(cube["device"][()][0])
        for name in (_text(v) for v in index["group"][()].reshape(-1)):
            group = index[name]
            attribute = {k: _text(group.attrs[k]) for k in ("device", "engine", "network", "precision", "phase")}
            number = {k: int(numpy.asarray(group.attrs.get(k, 1 if k == "gpus" else 0)).reshape(-1)[0])
                      for k in ("batch", "gpus", "replica")}
            if (attribute["engine"] != engine_name or attribute["device"] != first_device or number["gpus"] != 1
                    or number["replica"] != 0):
                continue
            layers = [_text(v) for v in group["layer"][()].reshape(-1)]
            kinds = [_text(v) for v in group["kind"][()].reshape(-1)] if "kind" in group else [""] * len(layers)
            forward = [float(v) for v in group["forward_ms"][()].reshape(-1)]
            backward = ([float(v) for v in group["backward_ms"][()].reshape(-1)] if "backward_ms" in group
                        else [0.0] * len(layers))
            cells[(attribute["network"], attribute["precision"], attribute["phase"], number["batch"])] = list(
                zip(layers, kinds, forward, backward))
    return cells
