"""Every documented command works (issue 27): the README's shell commands and
the examples of every command's --help run here, on CPU cells, and the
README's Python snippets run against a real cube. A broken example fails CI.

The commands run as written, through bash, in one scratch directory with
`crossbench` on PATH and `scripts/` beside it, in document order (a later
example reads the cube an earlier one wrote). Only their size is cut down:
`run` and `check` get batch 1 (or the batch they name), 2 timed steps and, when
they name no --filter, alexnet alone; `mpirun -np N` gets 2 ranks. What is
left out, and why, is listed in NOT_RUN."""
import ast
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
COMMANDS = ("run", "plan", "check", "merge", "list", "describe", "export-network")

# Documented commands that CI does not run, each with its reason.
NOT_RUN = {
    "scripts/run": "installs packages and builds; scripts/test is CI itself",
    "scripts/test": "is CI itself",
    "cmake ": "configures other CUDA toolkits (scripts/check-cuda-toolkits builds them in CI)",
}


def is_synopsis(line: str) -> bool:
    """A usage line ("run [--job FILE] ..."), not an example."""
    return bool(re.search(r"\[-|\.\.\.\]|\[section", line))


def readme_shell_commands() -> list[str]:
    commands = []
    for body in re.findall(r"```(?:sh|bash)\n(.*?)```", README.read_text(), re.S):
        for line in body.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if not words:
                continue
            line = shlex.join(words) if "'" not in line else line.split("  #")[0].strip()
            if is_synopsis(line) or any(line.startswith(prefix) for prefix in NOT_RUN):
                continue
            commands.append(line)
    return commands


def readme_python_snippets() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def help_examples(binary: Path, command: str) -> list[str]:
    text = subprocess.run([str(binary), command, "--help"], capture_output=True, text=True, timeout=60).stdout
    if "Examples:" not in text:
        return []
    return [line.strip() for line in text.split("Examples:", 1)[1].splitlines() if line.strip()]


def small(command: str) -> str:
    """The command with fewer steps and cells, so that it runs on the CPU in seconds."""
    parts = []
    for part in command.split(" && "):
        redirect = ""
        if " > " in part:
            part, redirect = part.split(" > ", 1)
            redirect = " > " + redirect
        part = re.sub(r"\bmpirun -np? \d+", "mpirun --oversubscribe -np 2", part)
        m = re.search(r"\bcrossbench (run|check)\b", part)
        if m and "--help" not in part:
            extra = []
            if "matrix.batches" not in part:
                extra.append("--set matrix.batches=1")
            if "--filter" not in part:
                extra.append("--filter 'alexnet/'")
            if m.group(1) == "run":
                for key, value in (("measure.warmup", 0), ("measure.min_steps", 2), ("measure.max_steps", 2),
                                   ("measure.cell_time_limit_s", 120)):
                    if key not in part:
                        extra.append(f"--set {key}={value}")
                if "--resume" not in part:
                    extra.append("--overwrite")   # examples are alternatives writing the same cube
            part = part + " " + " ".join(extra)
        parts.append(part + redirect)
    return " && ".join(parts)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, crossbench_binary):
    """A scratch directory as a user's: crossbench on PATH, scripts/ beside it,
    and the cubes the examples read that no earlier example writes."""
    work = tmp_path_factory.mktemp("documented")
    bin_dir = work / ".bin"
    bin_dir.mkdir()
    (bin_dir / "crossbench").symlink_to(crossbench_binary)
    (work / "scripts").symlink_to(REPO / "scripts")
    (work / "results").mkdir()
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", PYTHONPATH=str(REPO / "analysis"))
    tiny = ["--set", "matrix.batches=1", "--set", "measure.warmup=0", "--set", "measure.min_steps=2",
            "--set", "measure.max_steps=2", "--filter", "alexnet/.*/inference", "--quiet"]

    def run(*args, **kw):
        result = subprocess.run([str(crossbench_binary), "run", *args, *tiny], cwd=work, env=env, capture_output=True,
                                text=True, timeout=600, **kw)
        assert result.returncode == 0, result.stderr
    # The merge examples' inputs: separate runs, told apart by their device tags.
    run("--device-tag", "h100", "--output", "h100.h5")
    run("--device-tag", "h200", "--output", "h200.h5")
    run("--device-tag", "h100", "--output", "results/h100.h5")
    shutil.copy(work / "h100.h5", work / "old.h5")
    shutil.copy(work / "h100.h5", work / "rerun.h5")
    # The cube of the Python snippets: ResNet-50 training fp16 at batch 64 (unsupported on this CPU,
    # recorded at once) and fp32 at batch 2 with layer times.
    job = work / "cube.ini"
    job.write_text("[matrix]\nnetworks = resnet50\nengines = onednn\nprecisions = fp32, fp16\nbatches = 2, 64\n"
                   "phases = training\n[measure]\nwarmup = 0\nmin_steps = 2\nmax_steps = 2\nlayer_time_repetitions = 1\n")
    result = subprocess.run([str(crossbench_binary), "run", "--job", str(job), "--output", "results/cube.h5",
                             "--layer-times", "--filter", "fp32/b2/|fp16/b64/", "--quiet"], cwd=work, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return work, env


def run_documented(command: str, workdir) -> subprocess.CompletedProcess:
    work, env = workdir
    return subprocess.run(["bash", "-o", "pipefail", "-c", small(command)], cwd=work, env=env, capture_output=True,
                          text=True, timeout=900)


def test_readme_commands_are_found():
    commands = readme_shell_commands()
    assert len(commands) >= 14, commands
    assert any(c.startswith("crossbench list devices --json") for c in commands)
    assert any("--device-json devices.json" in c for c in commands)
    assert all("[" not in c.split("#")[0] or "'" in c for c in commands)


def test_every_readme_shell_command_runs(workdir):
    failures = []
    for command in readme_shell_commands():
        result = run_documented(command, workdir)
        if result.returncode != 0:
            failures.append(f"{command}\n  ran as: {small(command)}\n  exit {result.returncode}: "
                            f"{result.stderr.strip()[-600:]}")
    assert not failures, "README commands that fail:\n" + "\n".join(failures)


def test_every_help_example_runs(workdir, crossbench_binary):
    failures, count = [], 0
    for command in COMMANDS:
        for example in help_examples(crossbench_binary, command):
            count += 1
            result = run_documented(example, workdir)
            if result.returncode != 0:
                failures.append(f"{command} --help: {example}\n  exit {result.returncode}: "
                                f"{result.stderr.strip()[-600:]}")
    assert count >= 15
    assert not failures, "--help examples that fail:\n" + "\n".join(failures)


def test_every_readme_python_snippets_run_against_a_real_cube(workdir):
    """The snippets in order, in one session (a later one uses an earlier one's
    imports), as a notebook would run them: each one's last expression printed."""
    work, env = workdir
    snippets = readme_python_snippets()
    assert len(snippets) >= 2
    program = []
    for i, snippet in enumerate(snippets):
        tree = ast.parse(snippet)
        if isinstance(tree.body[-1], ast.Expr):
            tree.body[-1] = ast.Expr(ast.Call(ast.Name("print", ast.Load()), [tree.body[-1].value], []))
        program += [f"print('--- snippet {i}')", ast.unparse(ast.fix_missing_locations(tree))]
    result = subprocess.run([sys.executable, "-c", "\n".join(program)], cwd=work, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, f"a README snippet fails:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    outputs = re.split(r"^--- snippet \d+$", result.stdout, flags=re.M)[1:]
    assert len(outputs) == len(snippets) and all(o.strip() for o in outputs), result.stdout
    assert "fp16" in result.stdout or "onednn" in result.stdout   # the first table: engines by device
    assert "conv" in outputs[-1]                                  # the slowest layers of a profiled cell


@pytest.mark.parametrize("command", COMMANDS + ("version",))
def test_every_command_has_help_that_exits_0(command, crossbench_binary):
    for flag in ("--help", "-h"):
        result = subprocess.run([str(crossbench_binary), command, flag], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, (command, flag, result.stderr)
        if command != "version":
            assert result.stdout.startswith("usage: crossbench " + command), result.stdout[:200]
            assert "Exit codes" in result.stdout


def test_every_analysis_command_has_help():
    sys.path.insert(0, str(REPO / "analysis"))
    from crossbench_analysis.cli import parser
    subcommands = next(a for a in parser()._actions if a.dest == "command").choices
    assert "system-desc" in subcommands
    env = {"PYTHONPATH": str(REPO / "analysis"), "PATH": "/usr/bin:/bin"}
    for name in ["--help"] + [[name, "--help"] for name in subcommands]:
        args = name if isinstance(name, list) else [name]
        result = subprocess.run([sys.executable, "-m", "crossbench_analysis", *args], capture_output=True,
                                text=True, env=env, timeout=60)
        assert result.returncode == 0 and result.stdout.startswith("usage:"), args


def test_list_devices_json_feeds_plan_device_json(tmp_path, crossbench_binary):
    devices = subprocess.run([str(crossbench_binary), "list", "devices", "--json"], capture_output=True, text=True,
                             timeout=60)
    assert devices.returncode == 0
    (tmp_path / "dev.json").write_text(devices.stdout)
    plan = subprocess.run([str(crossbench_binary), "plan", "--ranks", "2", "--device-json", str(tmp_path / "dev.json"),
                           "--json"], capture_output=True, text=True, timeout=60)
    assert plan.returncode == 0, plan.stderr
    import json
    listed = json.loads(devices.stdout)
    planned = json.loads(plan.stdout)
    gpu_keys = [d for d in listed if d.get("kind") == "gpu"]
    assert planned["ranks"] == 2 and len(planned["groups"]) >= 1
    if not gpu_keys:   # a CPU machine: the ranks bind the CPU the file describes
        assert planned["groups"][0]["device"]["model"] == listed[-1]["model"]
