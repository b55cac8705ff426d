"""A framework worker's own module, loaded into a bench script's process, and the `prepare` request
crossbench sends it (protocol 3): what bench/gpu_jax_clock.py and bench/gpu_torch_kernels.py time
and profile is exactly the worker's session, without the pipe."""
import importlib.util
import pathlib
import sys

WORKERS = pathlib.Path(__file__).resolve().parents[1] / "src" / "workers"

# Every key the options schema sends to workers, at the schema's defaults (tests/python/test_jax_worker.py).
DEFAULT_SETTINGS = {"measure.seed": 42, "measure.update": "none", "measure.learning_rate": 0.01,
                    "engine.layout": "auto", "engine.compile_mode": "reduce-overhead",
                    "engine.compile_cache": "none", "engine.jax_timing": "events"}


def load_worker(name):
    """src/workers/<name>/worker.py as a module (its imports of src/workers/common resolved)."""
    if str(WORKERS) not in sys.path:
        sys.path.insert(0, str(WORKERS))
    spec = importlib.util.spec_from_file_location(f"crossbench_{name}_worker", WORKERS / name / "worker.py")
    worker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(worker)
    return worker


def prepare_request(graph, network, precision, phase, batch, **settings):
    """The cell's `prepare` request; `settings` override DEFAULT_SETTINGS by key with '.' as '__'
    (engine__compile_cache="none")."""
    given = dict(DEFAULT_SETTINGS)
    given.update({key.replace("__", "."): value for key, value in settings.items()})
    return dict(type="prepare", cell=dict(network=network, precision=precision, batch=batch, phase=phase, replica=0),
                graph=graph, threads=1, settings=given)
