"""The rough edges of daily use (issue 27), each held by a real run: `run -o`,
clean numeric-flag errors, `plan`'s unsupported cells and capped estimates, the
heartbeat while a cell runs, the layer-times summary, and the closing `next:`
hint written once, whole, after the table."""
import json
import re
import subprocess

import h5py

FAST = ["--set", "measure.warmup=0", "--set", "measure.min_steps=2", "--set", "measure.max_steps=2"]


def job(tmp_path, networks="alexnet", engines="onednn", batches="1", phases="inference", extra=""):
    path = tmp_path / "job.ini"
    path.write_text(f"[matrix]\nnetworks = {networks}\nengines = {engines}\nprecisions = fp32\nbatches = {batches}\n"
                    f"phases = {phases}\n{extra}")
    return path


def test_run_takes_o_for_output(tmp_path, run_crossbench):
    result = run_crossbench("run", "--job", job(tmp_path), "-o", tmp_path / "short.h5", "--quiet", *FAST)
    assert result.returncode == 0, result.stderr
    with h5py.File(tmp_path / "short.h5", "r") as f:
        assert f["status"][()].reshape(-1)[0] == 1
    assert "-o, --output PATH" in run_crossbench("run", "--help").stdout


def test_numeric_flag_errors_are_clean(tmp_path, run_crossbench):
    cases = [("run", "--replicas", "abc", "--replicas 'abc' must be an integer"),
             ("run", "--checkpoint-s", "-5", "--checkpoint-s '-5' is out of range"),
             ("run", "--heartbeat-s", "1.5", "--heartbeat-s '1.5' must be an integer"),
             ("plan", "--ranks", "0", "--ranks '0' is out of range")]
    for command, flag, value, expected in cases:
        result = run_crossbench(command, "--job", job(tmp_path), flag, value)
        assert result.returncode == 2, (flag, result.stderr)
        assert expected in result.stderr, result.stderr
        assert "[]" not in result.stderr and "[ ]" not in result.stderr, result.stderr


def test_plan_marks_unsupported_cells_and_capped_estimates(tmp_path, run_crossbench):
    # This machine has no GPU: every cudnn cell is unsupported here. vgg16 training at batch 512
    # under a 5 s cell limit is capped.
    path = job(tmp_path, networks="alexnet, vgg16", engines="cudnn, onednn", batches="512", phases="training",
               extra="[measure]\ncell_time_limit_s = 5\n")
    text = run_crossbench("plan", "--job", path, "--ranks", "1")
    assert text.returncode == 0, text.stderr
    cudnn = [ln for ln in text.stdout.splitlines() if ln.strip().startswith("cudnn/")]
    assert cudnn and all("unsupported: cudnn runs on a GPU; this device is a CPU" in ln for ln in cudnn), cudnn
    assert not any(" 0.00 s" in ln for ln in cudnn)
    vgg = [ln for ln in text.stdout.splitlines() if ln.strip().startswith("onednn/vgg16/")]
    assert vgg and "5.00 s  model (capped at the cell time limit)" in vgg[0], vgg
    assert "2 cells can run here, 2 are unsupported" in text.stdout
    assert "capped at the cell time limit of 5 s" in text.stdout
    plan = json.loads(run_crossbench("plan", "--job", path, "--ranks", "1", "--json").stdout)
    by_name = {c["name"]: c for c in plan["cells"]}
    assert by_name["cudnn/vgg16/fp32/b512/training/r0"]["unsupported"].startswith("cudnn runs on a GPU")
    assert by_name["onednn/vgg16/fp32/b512/training/r0"]["capped"] is True
    assert by_name["onednn/alexnet/fp32/b512/training/r0"]["capped"] in (True, False)
    assert by_name["onednn/vgg16/fp32/b512/training/r0"]["unsupported"] == ""


def test_heartbeat_while_a_cell_runs(tmp_path, run_crossbench):
    # vgg11 training at batch 4 on the CPU takes seconds: a heartbeat every second shows it alive.
    path = job(tmp_path, networks="vgg11", batches="4", phases="training")
    result = run_crossbench("run", "--job", path, "-o", tmp_path / "h.h5", "--heartbeat-s", "1", *FAST)
    assert result.returncode == 0, result.stderr
    beats = re.findall(r"^crossbench: rank 0 still running onednn/vgg11/fp32/b4/training/r0 \((\d+)s\)$",
                       result.stderr, re.M)
    assert beats, result.stderr
    assert [int(b) for b in beats] == sorted(int(b) for b in beats)
    assert "still running" not in result.stdout
    quiet = run_crossbench("run", "--job", path, "-o", tmp_path / "q.h5", "--heartbeat-s", "1", "--quiet", *FAST)
    assert quiet.returncode == 0 and "still running" not in quiet.stderr
    never = run_crossbench("run", "--job", path, "-o", tmp_path / "n.h5", "--heartbeat-s", "0", *FAST)
    assert never.returncode == 0 and "still running" not in never.stderr


def layer_rows(stdout: str) -> list[str]:
    block = stdout.split("Layer times (--layer-times)", 1)[1]
    rows = block.split("forward_ms", 1)[1].splitlines()[1:]
    # The cell's "  by kind:" line sums the layers per kind after its rows (test_layer_times.py).
    return [r for r in rows if r.startswith("  ") and not r.startswith("  by kind: ")]


def test_layer_times_prints_the_top_10_or_all(tmp_path, run_crossbench):
    path = job(tmp_path, phases="training", extra="[measure]\nlayer_time_repetitions = 1\n")
    top = run_crossbench("run", "--job", path, "-o", tmp_path / "t.h5", "--layer-times", "--quiet", *FAST)
    assert top.returncode == 0, top.stderr
    everything = run_crossbench("run", "--job", path, "-o", tmp_path / "a.h5", "--layer-times=all", "--quiet", *FAST)
    assert everything.returncode == 0, everything.stderr
    with h5py.File(tmp_path / "a.h5", "r") as f:
        group = f["layer_times"][f["layer_times"]["group"][()].reshape(-1)[0]]
        layers = len(group["layer"][()])
        assert f.attrs["measure_layer_times"] in (b"all", "all")
    with h5py.File(tmp_path / "t.h5", "r") as f:   # the cube keeps every layer either way
        assert len(f["layer_times"][f["layer_times"]["group"][()].reshape(-1)[0]]["layer"][()]) == layers
    assert layers > 10
    rows = layer_rows(top.stdout)
    assert len(rows) == 11 and rows[-1].strip().startswith(f"({layers - 10} more layers)"), rows
    assert "the 10 slowest layers per cell" in top.stdout
    # The per-kind sums cover every layer, listed or not: the same kinds with the top 10 and with all.
    def kinds_of(stdout):
        lines = [ln for ln in stdout.splitlines() if ln.startswith("  by kind: ")]
        assert len(lines) == 1, lines
        return sorted(re.findall(r"(\S+) [0-9.]+\+[0-9.]+ ms", lines[0]))
    assert kinds_of(top.stdout) == kinds_of(everything.stdout)
    assert len(layer_rows(everything.stdout)) == layers


def test_next_hint_once_whole_and_after_the_table(tmp_path, run_crossbench, crossbench_binary):
    path = job(tmp_path)
    output = tmp_path / "n.h5"
    # One process, stdout and stderr into one pipe: the hint follows the table.
    merged = subprocess.run([str(crossbench_binary), "run", "--job", str(path), "-o", str(output), *FAST],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    assert merged.returncode == 0, merged.stdout
    lines = merged.stdout.splitlines()
    hints = [i for i, ln in enumerate(lines) if "next:" in ln]
    table_end = max(i for i, ln in enumerate(lines) if ln.startswith("D0 "))
    assert len(hints) == 1 and hints[0] > table_end
    assert lines[hints[0]] == f"next: scripts/report report {output} -o {tmp_path / 'n-report'}" or \
        lines[hints[0]].endswith(f"report report {output} -o {tmp_path / 'n-report'}")
    # Under mpirun (2 ranks): the hint is one whole line on stderr, once.
    result = run_crossbench("run", "--job", path, "-o", tmp_path / "m.h5", *FAST, mpi_ranks=2)
    assert result.returncode == 0, result.stderr
    hint_lines = [ln for ln in result.stderr.splitlines() if "next:" in ln]
    assert len(hint_lines) == 1 and hint_lines[0].startswith("next: ")
    assert hint_lines[0].endswith(f"report {tmp_path / 'm.h5'} -o {tmp_path / 'm-report'}")
    assert "next:" not in result.stdout
