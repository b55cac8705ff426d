"""The framework workers' persistent compile caches (the options schema's ``engine.compile_cache``).

crossbench sends the directory (absolute; ``<output>`` already replaced by the cube's path) or
``none`` in every ``prepare`` request's settings. Each framework keeps its own subdirectory of it
(``inductor/`` and ``triton/`` for torch.compile, ``jax/`` for JAX), so one directory serves every
cell, rank and run that names it; the frameworks' caches are safe for several processes at once
(they write each entry to a temporary file and rename it).

A cache only shortens the untimed compile in ``prepare``: the timed steps run the same compiled
code either way. Each cell's ``decisions`` says which cache it used and whether it was cold (empty)
or warm (``entries`` files before the compile), and how many it held after.
"""
import os
import shutil
import tempfile

from common.protocol import WorkerError, on_exit

SETTING = "engine.compile_cache"
NONE = "none"


def count_entries(directory):
    """Files under `directory` (every level); 0 when it does not exist. A framework writes one or
    more files per compiled graph or kernel, so the count says cold (0) or warm, not how many
    graphs a cell will find."""
    if not directory or not os.path.isdir(directory):
        return 0
    return sum(len(files) for _, _, files in os.walk(directory))


def framework_directory(root, name):
    """`root`/`name`, created; a directory that cannot be made fails the cell naming it."""
    path = os.path.join(root, name)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        raise WorkerError("failed", f"{SETTING}: cannot create {path}: {error.strerror or error}") from error
    if not os.access(path, os.W_OK | os.X_OK):
        raise WorkerError("failed", f"{SETTING}: {path} is not writable by this worker")
    return path


_scratch = None


def process_scratch_directory(prefix):
    """`none`: a fresh temporary directory for this process's framework caches (removed when the
    worker exits), so every compile of the process's first cell is cold, as with no cache."""
    global _scratch
    if _scratch is None:
        _scratch = tempfile.mkdtemp(prefix=prefix)
        directory = _scratch
        on_exit(lambda: shutil.rmtree(directory, True))
    return _scratch


def describe(directory, before, after, detail=""):
    """The decisions text: `compile_cache=DIR (cold: empty before, 12 entries after; DETAIL)` or
    `(warm: 40 entries before, 40 after; ...)`."""
    state = f"warm: {before} entries before" if before > 0 else "cold: empty before"
    counted = f"{after} after" if before > 0 else f"{after} entries after"
    return f"compile_cache={directory} ({state}, {counted}{'; ' + detail if detail else ''})"
