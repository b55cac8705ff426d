"""A worker's end at `exit` (src/workers/common/protocol.py, ``leave``): its replies are out, the
cleanups registered with ``on_exit`` run (the compile cache's scratch directory among them), and the
interpreter's shutdown, where the frameworks' exit handlers wait (Inductor's compile-worker pool), does
not. At the end of input, with no `exit`, the interpreter ends as usual and the cleanups run too."""
import json
import os
import pathlib
import subprocess
import sys
import textwrap

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src" / "workers"))
from common.protocol import PROTOCOL  # noqa: E402

WORKER = textwrap.dedent("""
    import atexit, pathlib, sys
    sys.path.insert(0, sys.argv[1])
    from common import compile_cache
    from common.protocol import on_exit, serve

    marks = pathlib.Path(sys.argv[2])
    # A framework's exit handler (as torch._inductor registers one for its compile-worker pool).
    atexit.register(lambda: (marks / "framework_exit_handler").write_text("ran"))
    on_exit(lambda: (marks / "cleanup").write_text("ran"))
    scratch = compile_cache.process_scratch_directory("crossbench-exit-test-")
    (marks / "scratch").write_text(scratch)


    class Adapter:
        def hello(self):
            return dict(framework="none", device="cpu", status="ok")


    serve(Adapter())
""")


def converse(tmp_path, requests):
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    marks = tmp_path / "marks"
    marks.mkdir()
    text = "".join(json.dumps(dict(protocol=PROTOCOL, **r)) + "\n" for r in requests)
    done = subprocess.run([sys.executable, str(worker), str(REPO / "src" / "workers"), str(marks)], input=text,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    replies = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return replies, marks


def test_exit_runs_the_cleanups_and_skips_the_frameworks_exit_handlers(tmp_path):
    replies, marks = converse(tmp_path, [dict(type="exit")])
    assert [r["type"] for r in replies] == ["hello"]  # the reply written before the exit is out
    assert (marks / "cleanup").read_text() == "ran"
    scratch = pathlib.Path((marks / "scratch").read_text())
    assert scratch.name.startswith("crossbench-exit-test-") and not scratch.exists()
    assert not (marks / "framework_exit_handler").exists()


def test_the_end_of_input_ends_the_interpreter_as_usual(tmp_path):
    replies, marks = converse(tmp_path, [])
    assert [r["type"] for r in replies] == ["hello"]
    assert (marks / "cleanup").read_text() == "ran"
    assert not pathlib.Path((marks / "scratch").read_text()).exists()
    assert (marks / "framework_exit_handler").read_text() == "ran"
