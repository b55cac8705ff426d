"""bench/layer_spread.py on real cubes: three oneDNN processes of AlexNet at batch 1 (both phases), each with
every layer's time (--layer-times=all). Each cell's medians, each layer's time in each cube (read back through
the analysis package's own reader), the ranking by range, the share of the move and the correlation; and the
refusals."""
import math
import pathlib
import subprocess
import sys

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "layer_spread.py"
sys.path.insert(0, str(REPO / "bench"))
from layer_spread import cell_spread  # noqa: E402
from test_bench_pytorch_ratio import JOB, medians  # noqa: E402  the same tiny oneDNN cube


@pytest.fixture(scope="module")
def cubes(tmp_path_factory, crossbench_binary):
    directory = tmp_path_factory.mktemp("layer_spread")
    job = directory / "job.ini"
    job.write_text(JOB)
    outputs = []
    for i in range(3):
        output = directory / f"run{i}.h5"
        subprocess.run([str(crossbench_binary), "run", "--job", str(job), "--layer-times=all", "--output", str(output),
                        "--quiet"], check=True, timeout=300)
        outputs.append(output)
    return outputs


def run_script(*arguments):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, arguments)], capture_output=True, text=True,
                          timeout=60)


def printed_cells(stdout):
    """{phase: (header fields, {layer: fields})} from the script's output."""
    cells, current = {}, None
    for line in stdout.splitlines():
        if line.startswith("alexnet "):
            current = line.split()[2]
            cells[current] = (line, {})
        elif current and line.startswith("  ") and not line.split()[0] == "layer":
            fields = line.split()
            cells[current][1][fields[0]] = fields
    return cells


def test_each_layer_in_each_cube_its_range_and_the_cells_medians(cubes):
    from crossbench_analysis.cube import load
    from crossbench_analysis.cube_extras import layer_times

    result = run_script(*cubes, "--engine", "onednn", "--top", "100")
    assert result.returncode == 0, result.stderr
    cells = printed_cells(result.stdout)
    assert sorted(cells) == ["inference", "training"]
    assert "2 cells profiled in all 3 cubes" in result.stdout
    per_cube_medians = [medians(c) for c in cubes]
    for phase, (header, rows) in cells.items():
        shown = [float(v) for v in header.split("medians ")[1].split(" ms")[0].split()]
        assert shown == pytest.approx([m[phase] for m in per_cube_medians], abs=5e-4)
        # every layer of the network, each cube's forward + backward as the analysis package reads them
        frames = [layer_times(load(path)) for path in cubes]
        expected = {}
        for i, frame in enumerate(frames):
            for _, row in frame[frame.phase == phase].iterrows():
                expected.setdefault(row.layer, []).append(row.forward_ms + row.backward_ms)
        assert sorted(rows) == sorted(expected)
        ranges = []
        for layer, fields in rows.items():
            times = [float(v) for v in fields[2:5]]
            assert times == pytest.approx(expected[layer], abs=5e-5)
            assert float(fields[5]) == pytest.approx(max(expected[layer]) - min(expected[layer]), abs=1e-4)
            ranges.append(float(fields[5]))
        # ranked by range, the most moving first (the printed order)
        printed_order = [float(fields[5]) for fields in rows.values()]
        assert printed_order == sorted(printed_order, reverse=True)


def test_the_move_its_shares_and_the_correlation_of_one_cell():
    # Three processes: the cell's median 10, 11, 10.5 ms; layer a carries the move, b does not move, c moves against it.
    medians = [10.0, 11.0, 10.5]
    layers = [[("a", "conv", 1.0, 2.0), ("b", "relu", 0.5, 0.5), ("c", "fc", 1.0, 0.0)],
              [("a", "conv", 1.5, 2.5), ("b", "relu", 0.5, 0.5), ("c", "fc", 0.9, 0.0)],
              [("a", "conv", 1.25, 2.25), ("b", "relu", 0.5, 0.5), ("c", "fc", 0.95, 0.0)]]
    spread = cell_spread(medians, layers)
    assert spread["slowest"] == 1 and spread["fastest"] == 0
    assert spread["sums"] == pytest.approx([5.0, 5.9, 5.45])
    by_name = {row["layer"]: row for row in spread["layers"]}
    assert [row["layer"] for row in spread["layers"]] == ["a", "c", "b"]  # by range: 1.0, 0.1, 0
    assert by_name["a"]["move_ms"] == pytest.approx(1.0) and by_name["a"]["share"] == pytest.approx(1.0)
    assert by_name["c"]["move_ms"] == pytest.approx(-0.1) and by_name["c"]["share"] == pytest.approx(-0.1)
    assert by_name["a"]["r"] == pytest.approx(np.corrcoef([3.0, 4.0, 3.5], medians)[0, 1])
    assert by_name["c"]["r"] == pytest.approx(-1.0)
    assert by_name["b"]["r"] is None  # it does not vary: no correlation to speak of
    # Two cubes: no correlation either.
    two = cell_spread(medians[:2], layers[:2])
    assert all(row["r"] is None for row in two["layers"])
    # Equal medians: no move to share.
    flat = cell_spread([10.0, 10.0, 10.0], layers)
    assert all(row["share"] is None for row in flat["layers"])
    assert not math.isnan(flat["layers"][0]["range_ms"])


def test_cubes_that_profiled_other_layers_are_refused():
    with pytest.raises(ValueError, match="cube 2 profiled other layers than cube 1"):
        cell_spread([1.0, 1.1], [[("a", "conv", 1.0, 0.0)], [("b", "conv", 1.0, 0.0)]])


def test_a_cube_without_layer_times_one_cube_and_a_bad_top_are_refused_by_name(cubes, tmp_path, crossbench_binary):
    plain = tmp_path / "plain.h5"
    job = tmp_path / "job.ini"
    job.write_text(JOB)
    subprocess.run([str(crossbench_binary), "run", "--job", str(job), "--output", str(plain), "--quiet"], check=True,
                   timeout=300)
    result = run_script(cubes[0], plain, "--engine", "onednn")
    assert result.returncode != 0
    assert f"{plain} holds no layer times of engine 'onednn' (run with --layer-times)" in result.stderr
    result = run_script(cubes[0], "--engine", "onednn")
    assert result.returncode == 2 and "give two cubes at least" in result.stderr
    result = run_script(*cubes, "--engine", "onednn", "--top", "0")
    assert result.returncode == 2 and "--top must be at least 1, not 0" in result.stderr
    result = run_script(*cubes)  # the default engine, cudnn, is not in a oneDNN cube
    assert result.returncode != 0 and "no 'cudnn' engine in the cube" in result.stderr
