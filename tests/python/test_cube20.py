"""Issue 20's cube (bench/gpu_session.sh stage `cube20`): resumable across device calls through a
folder the working tree carries, and a report whose headline names the fastest engine of every
(phase, network, precision) cell, amp-bf16 included where the native engine is unsupported."""
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "analysis"))
from crossbench_analysis.cube import load  # noqa: E402
from crossbench_analysis.report import HEADLINE, Report, fmt  # noqa: E402
from crossbench_analysis.synthetic import ok_cell, write_cube  # noqa: E402

H200 = "NVIDIA H200 (132 SMs, sm_90, 140 GiB)"
ENGINES = ["cudnn", "pytorch", "pytorch-compile", "jax"]
PRECISIONS = ["fp32", "tf32", "bf16", "amp-bf16"]
NETWORKS = ["alexnet", "resnet50"]
# Made-up medians [ms] at batch 64: the fastest engine differs per cell, so a wrong pick shows.
FASTEST = {("inference", "alexnet"): "cudnn", ("inference", "resnet50"): "pytorch-compile",
           ("training", "alexnet"): "jax", ("training", "resnet50"): "cudnn"}


def cube20_like(path):
    axes = {"device": [H200], "engine": ENGINES, "network": NETWORKS, "precision": PRECISIONS, "batch": [64],
            "phase": ["inference", "training"], "replica": [0]}
    cells = []
    for (phase, network), fastest in FASTEST.items():
        for precision in PRECISIONS:
            for rank, engine in enumerate(ENGINES):
                coords = dict(device=H200, engine=engine, network=network, precision=precision, batch=64,
                              phase=phase, replica=0)
                if engine == "cudnn" and precision == "amp-bf16":
                    cells.append(dict(coords, status="unsupported",
                                      message="amp-bf16 is the frameworks' mixed-precision recipe (...)"))
                    continue
                base = 10.0 / (1 + PRECISIONS.index(precision))
                ms = base if engine == fastest and precision != "amp-bf16" else base * (1.2 + 0.1 * rank)
                cells.append(ok_cell(coords, [ms, ms * 1.01, ms * 0.99], 64))
    write_cube(path, axes, cells)


def test_the_report_names_the_fastest_engine_of_every_cell(tmp_path):
    path = tmp_path / "cube20.h5"
    cube20_like(path)
    report = Report(load(path), tmp_path / "report")
    md = report.build().markdown(report.out)
    head = md.split(f"## {HEADLINE}")[1].split("## Summary")[0]
    cells = load(path).cells
    ok = cells[cells["status"] == "ok"]
    for (phase, network), fastest in FASTEST.items():
        row = [line for line in head.splitlines() if line.startswith(f"| {phase} | {network} |")]
        assert len(row) == 1, head
        for precision in PRECISIONS:
            group = ok[(ok["phase"] == phase) & (ok["network"] == network) & (ok["precision"] == precision)]
            best = group.sort_values("images_per_s", ascending=False).iloc[0]
            if precision != "amp-bf16":
                assert best.engine == fastest
            else:  # cudnn is unsupported: the fastest framework
                assert best.engine == "pytorch"
            assert f"{best.engine}: {fmt(best.images_per_s, 4)}" in row[0], (precision, row[0])


def session(tmp_path, crossbench_binary, cube_dir):
    """The cube20 stage on this CPU build: cudnn only (every cell unsupported here, fast)."""
    env = dict(os.environ, OUT=str(tmp_path / "out"), CB=str(crossbench_binary), CUBE20_DIR=str(cube_dir),
               CUBE20_ENGINES="cudnn", CUBE20_NETWORKS="alexnet", TLIMIT="120", PYTHONPATH=str(REPO / "analysis"))
    return subprocess.run(["bash", str(REPO / "bench" / "gpu_session.sh"), "cube20"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def test_the_stage_keeps_its_cube_in_the_tree_and_resumes_it(tmp_path, crossbench_binary):
    cube_dir = tmp_path / "tree" / "cube20"
    first = session(tmp_path, crossbench_binary, cube_dir)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "cube20: complete" in first.stdout and "continuing" not in first.stdout
    assert (cube_dir / "cube20.h5").exists() and (cube_dir / "cube20.h5.journal").exists()
    for name in ("cube20.h5", "cube20.h5.journal", "cube20.log"):  # what comes back from the device call
        assert (tmp_path / "out" / "cube20" / name).exists(), name
    entries = len((cube_dir / "cube20.h5.journal").read_text().splitlines())
    second = session(tmp_path, crossbench_binary, cube_dir)  # the next call: the journal means --resume
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"cube20: continuing {cube_dir}/cube20.h5 ({entries - 1} journal entries)" in second.stdout
    assert "cube20: complete" in second.stdout
    statuses = load(cube_dir / "cube20.h5").cells["status"]
    assert len(statuses) == 8 and set(statuses) == {"unsupported"}


def test_the_default_folder_is_carried_by_the_working_tree():
    """Untracked and not ignored: the device call's copy of the tree carries it (bench/README.md)."""
    ignored = subprocess.run(["git", "check-ignore", "-q", "bench/results/2026-12-01/cube20/cube20.h5.journal"],
                             cwd=REPO).returncode
    assert ignored == 1  # 1: not ignored
    assert "bench/results/2026-12-01/cube20" in (REPO / "bench" / "gpu_session.sh").read_text()
