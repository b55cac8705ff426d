"""The settings a framework worker runs a cell with come from the options schema (README "Job file
keys", column "to workers"): crossbench sends exactly those keys in the `prepare` request's
`settings`, and the workers read them from there (src/workers/common/protocol.py `settings`)."""
import json
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
if str(REPO / "src" / "workers") not in sys.path:
    sys.path.insert(0, str(REPO / "src" / "workers"))

from common.protocol import PROTOCOL, WorkerError, settings  # noqa: E402

PYTHON = "/usr/bin/python3"
RECORDING = REPO / "tests" / "workers" / "recording_worker.py"


def torch_available():
    return subprocess.run([PYTHON, "-c", "import torch"], capture_output=True).returncode == 0


needs_torch = pytest.mark.skipif(not torch_available(), reason="Debian's python3-torch is not installed")


def test_settings_returns_the_keys_asked_for():
    request = {"settings": {"measure.seed": 7, "engine.layout": "nhwc", "measure.update": "sgd"}}
    assert settings(request, "measure.seed", "engine.layout") == {"measure.seed": 7, "engine.layout": "nhwc"}


def test_a_missing_setting_fails_the_cell_naming_it():
    with pytest.raises(WorkerError) as raised:
        settings({"settings": {"measure.seed": 7}}, "measure.seed", "engine.layout")
    assert raised.value.status == "failed"
    assert "engine.layout" in raised.value.message and "options schema" in raised.value.message
    # A protocol-2 style request (fields named by hand, no `settings`) says what is missing.
    with pytest.raises(WorkerError) as raised:
        settings({"seed": 42, "layout": "auto"}, "measure.seed")
    assert "no `settings` object" in raised.value.message and f"protocol {PROTOCOL}" in raised.value.message


@needs_torch
def test_the_pytorch_session_runs_with_the_requests_settings():
    import torch
    from pytorch import worker as pt_worker
    from test_worker_protocol import prepare_request

    given = {"measure.seed": 7, "measure.update": "sgd", "measure.learning_rate": 0.5, "engine.layout": "nhwc"}
    session = pt_worker.PytorchSession(torch, prepare_request(settings=given), compile_model=False)
    assert session.model.seed == 7
    assert session.layout == "channels_last"
    assert session.optimizer is not None and session.optimizer.param_groups[0]["lr"] == 0.5
    session.release()
    # The defaults: no optimizer (update = none), contiguous fp32 on the CPU.
    session = pt_worker.PytorchSession(torch, prepare_request(), compile_model=False)
    assert session.optimizer is None and session.layout == "contiguous" and session.model.seed == 42
    session.release()


@needs_torch
def test_a_worker_refuses_a_request_without_settings_and_an_old_protocol():
    from test_worker_protocol import converse, prepare_request

    bare = prepare_request()
    del bare["settings"]
    replies, _ = converse([bare, dict(type="exit")])
    assert replies[1]["type"] == "prepared" and replies[1]["status"] == "failed"
    assert "no `settings` object" in replies[1]["message"]
    replies, stderr = converse([prepare_request()], protocol=2)
    assert [r["type"] for r in replies] == ["hello"]
    assert f"request with protocol 2; this worker speaks protocol {PROTOCOL}" in stderr
    assert "update crossbench or the worker" in stderr


@needs_torch
def test_a_run_sends_exactly_the_schemas_worker_keys(run_crossbench, tmp_path):
    schema = json.loads(run_crossbench("list", "options", "--json").stdout)
    worker_keys = {row["key"] for row in schema if row["sent_to_workers"]}
    assert {"measure.seed", "engine.layout"} <= worker_keys
    record, sent = tmp_path / "steps.jsonl", tmp_path / "settings.jsonl"
    job = tmp_path / "job.ini"
    job.write_text("[matrix]\nnetworks = alexnet\nengines = recording\nprecisions = fp32\nbatches = 1\n"
                   "phases = inference\n[measure]\nwarmup = 1\nmin_steps = 2\nmax_steps = 2\ncell_time_limit_s = 300\n"
                   f"[workers]\nrecording = {PYTHON} -u {RECORDING} --record {record} --settings {sent}\n")
    result = run_crossbench("run", "--job", job, "--output", tmp_path / "cube.h5", "--quiet",
                            "--set", "measure.seed=7", "--layout", "nhwc", "--set", "measure.learning_rate=2e-3",
                            timeout=600)
    assert result.returncode == 0, result.stderr + result.stdout
    settings_sent = [json.loads(line) for line in sent.read_text().splitlines()]
    assert len(settings_sent) == 1
    assert set(settings_sent[0]) == worker_keys
    assert settings_sent[0]["measure.seed"] == 7 and settings_sent[0]["engine.layout"] == "nhwc"
    assert settings_sent[0]["measure.learning_rate"] == 0.002 and settings_sent[0]["measure.update"] == "none"
