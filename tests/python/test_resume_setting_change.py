"""--resume --allow-setting-change: a setting that changes only some engines' numbers (its schema row
names them: engine.jax_timing -> jax) or a framework's worker command may change between run segments;
the journal's cells of those engines run again under the new value, every other cell is kept as
measured, the journal as it was stays beside it (`.superseded`), and the cube and the report say so.
Without the flag the resume is refused, naming the setting and the engines. On this machine's CPU:
oneDNN (auto) beside the JAX worker on alexnet at batch 1."""
import json
import pathlib
import sys

import h5py

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "analysis"))
from conftest import as_text as text  # noqa: E402
from test_jax_worker import jax_worker_setting  # noqa: E402
from test_jax_worker import jax_interpreter  # noqa: E402,F401  (the fixture)


def run(run_crossbench, python, output, timing, *extra):
    return run_crossbench("run", "--set", "matrix.engines=auto,jax", "--set", "matrix.networks=alexnet",
                          "--set", "matrix.precisions=fp32", "--set", "matrix.batches=1",
                          "--set", "matrix.phases=inference", "--set", "measure.warmup=1",
                          "--set", "measure.min_steps=2", "--set", "measure.max_steps=2",
                          "--set", f"engine.jax_timing={timing}", "--set", "engine.compile_cache=none",
                          "--set", jax_worker_setting(python), "--quiet", *extra, "--output", output, timeout=600)


def results(journal):
    """{engine: (started_utc, decisions)} of every cell result in a journal."""
    found = {}
    for line in pathlib.Path(journal).read_text().splitlines()[1:]:
        record = json.loads(line[9:])
        if "result" in record:
            result = record["result"]
            found[result["engine"]] = (result["started_utc"], result["decisions"])
    return found


def header(journal):
    return json.loads(pathlib.Path(journal).read_text().splitlines()[0][9:])


def test_a_jax_only_setting_reruns_the_jax_cells_and_keeps_the_rest(run_crossbench, tmp_path, jax_interpreter):
    cube = tmp_path / "cube.h5"
    journal = pathlib.Path(str(cube) + ".journal")
    first = run(run_crossbench, jax_interpreter, cube, "host")
    assert first.returncode == 0, first.stderr
    before = results(journal)
    assert set(before) == {"onednn", "jax"}, before
    assert "host" in before["jax"][1], before["jax"][1]

    # Refused without the flag, naming the setting, both values and the one engine it changes.
    refused = run(run_crossbench, jax_interpreter, cube, "device-paced", "--resume")
    assert refused.returncode == 2, refused.stderr
    assert "setting engine.jax_timing is 'host' in the journal, 'device-paced' in this run" in refused.stderr
    assert "engine(s) 'jax'" in refused.stderr and "--allow-setting-change" in refused.stderr
    assert results(journal) == before and not pathlib.Path(str(journal) + ".superseded").exists()

    resumed = run(run_crossbench, jax_interpreter, cube, "device-paced", "--resume", "--allow-setting-change")
    assert resumed.returncode == 0, resumed.stderr
    assert "--allow-setting-change" in resumed.stderr and "1 cell(s) of engine(s) 'jax' run again" in resumed.stderr
    after = results(journal)
    assert after["onednn"] == before["onednn"]  # kept as measured, not run again
    assert after["jax"][0] != before["jax"][0]  # run again, under the new value
    assert header(journal)["settings"]["engine.jax_timing"] == "device-paced"
    # The journal as it was, untouched, beside it.
    superseded = pathlib.Path(str(journal) + ".superseded")
    assert results(superseded) == before and header(superseded)["settings"]["engine.jax_timing"] == "host"

    with h5py.File(cube, "r") as f:
        change = text(f.attrs["allowed_setting_change"])
        assert change.startswith("segment 1: setting engine.jax_timing is 'host' in the journal, 'device-paced'")
        assert "superseded" in change
        assert text(f.attrs["engine_jax_timing"]) == "device-paced"

    # A second change keeps the first superseded journal: the next free name.
    again = run(run_crossbench, jax_interpreter, cube, "host", "--resume", "--allow-setting-change")
    assert again.returncode == 0, again.stderr
    assert results(superseded) == before
    assert results(pathlib.Path(str(journal) + ".superseded.1"))["jax"] == after["jax"]

    # The report names the change among what a reader must know before comparing cells.
    from crossbench_analysis import cube as cube_module
    loaded = cube_module.load(cube)
    assert len(loaded.segments) == 3
    assert any("--allow-setting-change" in line for line in loaded.mixed_runs())


def test_the_flag_applies_to_resume_only(run_crossbench, tmp_path):
    done = run_crossbench("run", "--set", "matrix.networks=alexnet", "--allow-setting-change",
                          "--output", tmp_path / "x.h5")
    assert done.returncode == 2
    assert "--allow-setting-change applies to --resume only" in done.stderr


def test_a_setting_of_an_engine_the_run_does_not_measure_is_no_difference(run_crossbench, tmp_path):
    def native(timing, *extra):
        return run_crossbench("run", "--set", "matrix.engines=auto", "--set", "matrix.networks=alexnet",
                              "--set", "matrix.precisions=fp32", "--set", "matrix.batches=1",
                              "--set", "matrix.phases=inference", "--set", "measure.warmup=1",
                              "--set", "measure.min_steps=2", "--set", "measure.max_steps=2",
                              "--set", f"engine.jax_timing={timing}", "--quiet", *extra,
                              "--output", tmp_path / "native.h5")
    first = native("host")
    assert first.returncode == 0, first.stderr
    # No jax cell in the matrix: the changed JAX clock is no difference, and nothing is superseded.
    resumed = native("device-paced", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert not pathlib.Path(str(tmp_path / "native.h5") + ".journal.superseded").exists()
    # A setting of every engine still refuses.
    refused = run_crossbench("run", "--set", "matrix.engines=auto", "--set", "matrix.networks=alexnet",
                             "--set", "matrix.precisions=fp32", "--set", "matrix.batches=1",
                             "--set", "matrix.phases=inference", "--set", "measure.warmup=2",
                             "--set", "measure.min_steps=2", "--set", "measure.max_steps=2",
                             "--set", "engine.jax_timing=host", "--resume", "--quiet",
                             "--output", tmp_path / "native.h5")
    assert refused.returncode == 2 and "measure.warmup" in refused.stderr, refused.stderr
