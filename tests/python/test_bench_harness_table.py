"""bench/harness_table.py on the committed harness checks (bench/results): the median ratio per cell on
the worker's values where a cell has any, the earlier harness's pairs shown apart and not counted, the
cells not measured listed, and bad input named."""
import json
import pathlib
import shutil
import statistics
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "harness_table.py"
CALL51 = REPO / "bench" / "results" / "2026-12-04" / "call51"
CALL33 = REPO / "bench" / "results" / "2026-12-02" / "call33"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=60)


def row_of(text, variant, network, precision, phase):
    prefix = f"| {variant} | {network} | {precision} | {phase} |"
    rows = [line for line in text.splitlines() if line.startswith(prefix)]
    assert len(rows) == 1, text
    return [cell.strip() for cell in rows[0].strip("|").split("|")]


def test_the_worker_values_pairs_make_the_median(tmp_path):
    # Call 51 measured alexnet tf32 inference (reduce-overhead) three times on each kind of values.
    shutil.copytree(CALL51, tmp_path / "2026-12-04" / "call51")
    result = run(tmp_path)
    assert result.returncode == 0, result.stderr
    own = json.loads((CALL51 / "fw_synthetic" / "frameworks.json").read_text())
    ratios = [r["crossbench_ms"] / r["standalone_ms"] for r in own]
    cells = row_of(result.stdout, "reduce-overhead", "alexnet", "tf32", "inference")
    assert cells[4].startswith("6 (")  # both arms' pairs are listed
    assert cells[5] == f"{statistics.median(ratios):.3f} (of 3)"  # the median of the worker's values alone
    assert cells[6] == "worker's"
    assert cells[7] == ("yes" if abs(statistics.median(ratios) - 1) <= 0.03 else "**no**")
    assert "2026-12-04/call51/fw_random" in cells[8] and "2026-12-04/call51/fw_synthetic" in cells[8]
    assert cells[10] == "H200"  # call 51's gpu.txt (nvidia-smi -L): the card of the pairs counted
    assert row_of(result.stdout, "max-autotune", "resnet50", "bf16", "training")[5] == "not measured"
    assert result.stdout.rstrip().endswith("1 of 64 cells measured, 1 of them within 3%; 63 not measured.")


def test_the_earlier_harness_is_shown_apart_and_not_counted(tmp_path):
    # Call 33's eager pairs predate the recorded standalone clock (no standalone_timing).
    shutil.copytree(CALL33, tmp_path / "2026-12-02" / "call33")
    markdown = tmp_path / "table.md"
    result = run(tmp_path, "--markdown", markdown)
    assert result.returncode == 0, result.stderr
    cells = row_of(result.stdout, "eager", "vgg11", "tf32", "inference")
    assert cells[4] == "0" and cells[5] == "not measured"
    old = json.loads((CALL33 / "frameworks.json").read_text())
    pair = next(r for r in old if (r["network"], r["precision"], r["phase"]) == ("vgg11", "tf32", "inference"))
    assert cells[9] == f"{pair['crossbench_ms'] / pair['standalone_ms']:.3f}"
    assert "0 of 64 cells measured" in result.stdout
    assert markdown.read_text() == result.stdout


def test_each_cell_names_the_gpus_of_its_pairs(tmp_path):
    # A pair's own gpu field wins; without one, the nearest gpu.txt above its file; without either, "?".
    pair = dict(network="vgg11", precision="bf16", phase="training", variant="eager", repeat=0, standalone_ms=2.0,
                standalone_status="ok", standalone_timing="cuda-events", standalone_data="synthetic", crossbench_ms=2.0)
    (tmp_path / "d" / "call1" / "w" / "training").mkdir(parents=True)
    (tmp_path / "d" / "call1" / "w" / "gpu.txt").write_text("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n")
    (tmp_path / "d" / "call1" / "w" / "training" / "frameworks.json").write_text(json.dumps([pair]))
    (tmp_path / "d" / "call2").mkdir(parents=True)
    (tmp_path / "d" / "call2" / "frameworks.json").write_text(json.dumps([dict(pair, gpu="NVIDIA H200")]))
    (tmp_path / "d" / "call3").mkdir(parents=True)
    (tmp_path / "d" / "call3" / "frameworks.json").write_text(json.dumps([dict(pair, network="alexnet")]))
    result = run(tmp_path)
    assert result.returncode == 0, result.stderr
    assert row_of(result.stdout, "eager", "vgg11", "bf16", "training")[10] == "H100, H200"
    assert row_of(result.stdout, "eager", "alexnet", "bf16", "training")[10] == "?"
    assert row_of(result.stdout, "eager", "resnet50", "bf16", "training")[10] == ""


def test_bad_input_is_named(tmp_path):
    (tmp_path / "call1").mkdir()
    bad = tmp_path / "call1" / "frameworks.json"
    bad.write_text('{"not": "a list"}')
    result = run(tmp_path)
    assert result.returncode != 0 and str(bad) in result.stderr and "expected a list of pairs" in result.stderr
    bad.write_text("[{")
    result = run(tmp_path)
    assert result.returncode != 0 and str(bad) in result.stderr and "not a frameworks.json" in result.stderr
    result = run(tmp_path / "missing")
    assert result.returncode != 0 and "no such folder" in result.stderr
