"""bench/study_beside.py: which cudnn cells a study call re-measures beside its framework cells (issue 24:
every ratio from one GPU and one call), and the table that pairs each framework cell with them."""
import json
import os
import pathlib
import subprocess
import sys
import zlib

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "study_beside.py"
sys.path.insert(0, str(REPO / "bench"))
import study_beside  # noqa: E402


def write_journal(path, records):
    """A crossbench journal: a header line, then "<crc32> <json>" per record."""
    lines = ['00000000 {"schema":"crossbench-journal/3"}']
    for record in records:
        payload = json.dumps(record)
        lines.append(f"{zlib.crc32(payload.encode()):08x} {payload}")
    path.write_text("\n".join(lines) + "\n")


def result(engine, network, precision, phase, segment, status="ok", batch=64):
    return {"type": "result", "result": {"engine": engine, "network": network, "precision": precision,
                                         "phase": phase, "batch": batch, "segment": segment, "status": status}}


def test_the_filter_names_the_cudnn_cells_of_the_last_segments_framework_cells(tmp_path):
    journal = tmp_path / "study.h5.journal"
    write_journal(journal, [
        {"type": "segment", "segment": 0},
        result("pytorch-compile", "resnet152", "fp32", "training", 0),   # an earlier call's: not this one's
        {"type": "segment_end"},
        {"type": "segment", "segment": 1},
        result("pytorch-compile", "resnet50", "tf32", "training", 1),
        result("jax", "resnet50", "tf32", "training", 1),                 # the same cell: once
        result("jax", "alexnet", "amp-bf16", "inference", 1),
        result("pytorch", "vgg11", "bf16", "inference", 1, status="oom"),  # no ratio to make
        result("cudnn", "googlenet", "bf16", "training", 1),              # cudnn itself: nothing beside
    ])
    done = subprocess.run([sys.executable, str(SCRIPT), "filter", str(journal)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    regex, segment = done.stdout.splitlines()
    assert segment == "1"
    assert regex == "^cudnn/(alexnet/amp-bf16/b64/inference|resnet50/tf32/b64/training)/"


def test_no_framework_cell_finished_prints_nothing(tmp_path):
    journal = tmp_path / "study.h5.journal"
    write_journal(journal, [{"type": "segment", "segment": 0}, result("cudnn", "alexnet", "fp32", "training", 0)])
    done = subprocess.run([sys.executable, str(SCRIPT), "filter", str(journal)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout == "", (done.stdout, done.stderr)


def test_the_filter_selects_exactly_those_cells_in_crossbench(crossbench_binary):
    """The regex against the binary's own cell names (`plan --filter`)."""
    regex = study_beside.cudnn_filter([("alexnet", "tf32", "training", 64), ("resnet50", "amp-bf16", "inference", 64)])
    done = subprocess.run([str(crossbench_binary), "plan", "--job", str(REPO / "jobs" / "seed2017.ini"),
                           "--set", "matrix.engines=cudnn", "--set", "matrix.precisions=fp32,tf32,bf16,amp-bf16",
                           "--filter", regex], capture_output=True, text=True, timeout=120, cwd=REPO,
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert "crossbench plan: 2 cells" in done.stdout, done.stdout
    assert "cudnn/alexnet/tf32/b64/training/r0" in done.stdout
    assert "cudnn/resnet50/amp-bf16/b64/inference/r0" in done.stdout


def row(engine, network, precision, phase, segment, ms):
    return dict(engine=engine, network=network, precision=precision, phase=phase, segment=segment, median_ms=ms)


def test_each_framework_is_held_against_the_cudnn_cell_of_its_own_call():
    study = [
        row("pytorch-compile", "resnet50", "tf32", "training", 1, 19.3),  # call 1 (one GPU)
        row("jax", "resnet50", "tf32", "training", 2, 24.0),              # call 2 (another GPU)
        row("pytorch", "resnet50", "tf32", "training", 2, 30.0),
        row("cudnn", "resnet50", "tf32", "training", 0, 99.0),            # the study's own cudnn: not a pairing
        row("jax", "alexnet", "bf16", "inference", 3, 0.55),              # no beside cube for call 3
    ]
    beside = {(1, "resnet50", "tf32", "training"): 18.5, (2, "resnet50", "tf32", "training"): 20.0}
    extras = [("max-autotune", [row("pytorch-compile", "resnet50", "tf32", "training", 0, 18.0),
                                row("cudnn", "resnet50", "tf32", "training", 0, 18.9)])]
    columns, table = study_beside.pair_cells(study, beside, extras)
    assert columns == ["pytorch", "pytorch-compile", "jax", "max-autotune"]
    entry = table[("resnet50", "tf32", "training")]
    assert entry["ratio"]["pytorch-compile"] == 19.3 / 18.5   # against call 1's cudnn, not call 2's
    assert entry["ratio"]["jax"] == 24.0 / 20.0
    assert entry["ratio"]["max-autotune"] == 18.0 / 18.9      # an extra cube's own cudnn
    assert table[("alexnet", "bf16", "inference")]["ratio"] == {}
    cells, geomean, lowest, wins = study_beside.summary(table)
    assert cells == 1 and lowest == 18.0 / 18.9 and wins == 0  # the best framework is max-autotune's
    assert abs(geomean - 18.0 / 18.9) < 1e-12


def test_an_extra_cube_is_held_against_the_cudnn_cells_measured_beside_its_own_segments():
    """A STUDY_NAME cube (e.g. max-autotune) whose stage measured cudnn beside each segment: each cell
    against its own segment's cudnn (autotune_beside_s<N>.h5), the cube's own cudnn cell where none."""
    study = [row("jax", "resnet50", "tf32", "training", 0, 24.0)]
    extras = [("max-autotune", [row("pytorch-compile", "resnet50", "tf32", "training", 1, 18.0),
                                row("pytorch-compile", "vgg11", "bf16", "training", 2, 7.0),
                                row("cudnn", "resnet50", "tf32", "training", 0, 30.0),
                                row("cudnn", "vgg11", "bf16", "training", 0, 7.5)],
               {(1, "resnet50", "tf32", "training"): 18.9})]
    _, table = study_beside.pair_cells(study, {}, extras)
    assert table[("resnet50", "tf32", "training")]["ratio"]["max-autotune"] == 18.0 / 18.9  # segment 1's beside
    assert table[("vgg11", "bf16", "training")]["ratio"]["max-autotune"] == 7.0 / 7.5      # no beside: its own


def test_two_cubes_under_one_name_fill_one_column_each_against_its_own_beside_cells():
    """max-autotune's inference and training cells came from two STUDY_NAME cubes (autotune.h5 and
    autotune_training.h5, each with its own beside cubes): --extra max-autotune=... twice is one column."""
    study = [row("jax", "overfeat", "tf32", "inference", 0, 1.539)]
    extras = [("max-autotune", [row("pytorch-compile", "overfeat", "tf32", "inference", 0, 1.686)],
               {(0, "overfeat", "tf32", "inference"): 1.479}),
              ("max-autotune", [row("pytorch-compile", "overfeat", "tf32", "training", 0, 6.069)],
               {(0, "overfeat", "tf32", "training"): 5.329})]
    columns, table = study_beside.pair_cells(study, {}, extras)
    assert columns == ["pytorch", "pytorch-compile", "jax", "max-autotune"]
    assert table[("overfeat", "tf32", "inference")]["ratio"]["max-autotune"] == 1.686 / 1.479
    assert table[("overfeat", "tf32", "training")]["ratio"]["max-autotune"] == 6.069 / 5.329  # its own segment 0


def test_beside_cubes_are_named_by_the_segment_they_were_measured_beside(tmp_path):
    for bad in ("beside.h5", "autotune_beside_sx.h5", "besides_s1.h5"):
        try:
            study_beside.beside_medians([str(tmp_path / bad)])
        except SystemExit as refused:
            assert "expected a name [NAME_]beside_s<N>.h5" in str(refused)
        else:
            raise AssertionError(f"{bad} accepted")
