"""A killed run resumes without loss; --resume refuses what would mix runs;
damaged journals are repaired or refused."""
import json
import pathlib
import signal
import subprocess
import zlib

from helpers import cube_cells, journal_of, journal_records, journal_results, wait_until


def cell_keys(results):
    return [(r["device_key"], r["engine"], r["network"], r["precision"], r["batch"], r["phase"], r["replica"])
            for r in results]


def test_sigkill_then_resume_measures_every_cell_once(tmp_path, write_job, binary, crossbench):
    job = write_job(networks="alexnet, googlenet", batches="1, 2", phases="inference, training")
    output = tmp_path / "killed.h5"
    process = subprocess.Popen([str(binary), "run", "--job", job, "--output", output, "--quiet"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_until(lambda: journal_of(output).exists() and len(journal_results(output)) >= 2, process, what="2 results")
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=60)
    before = journal_results(output)
    resumed = crossbench("run", "--job", job, "--output", output, "--quiet", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    after = journal_results(output)
    assert after[: len(before)] == before
    assert len(set(cell_keys(after))) == len(after) == 8


def finished_run(tmp_path, write_job, crossbench, **settings):
    job = write_job(**settings)
    output = tmp_path / "done.h5"
    first = crossbench("run", "--job", job, "--output", output, "--quiet")
    assert first.returncode == 0, first.stderr
    return job, output


def test_resume_refuses_a_changed_number_changing_setting(tmp_path, write_job, crossbench):
    job, output = finished_run(tmp_path, write_job, crossbench)
    journal_before = journal_of(output).read_bytes()
    for override, key in (("measure.learning_rate=0.5", "measure.learning_rate"), ("engine.algo=exhaustive", "engine.algo"),
                          ("measure.seed=7", "measure.seed")):
        refused = crossbench("run", "--job", job, "--output", output, "--quiet", "--resume", "--set", override)
        assert refused.returncode == 2, refused.stderr
        assert "--resume refused" in refused.stderr and key in refused.stderr, refused.stderr
    assert journal_of(output).read_bytes() == journal_before


def test_resume_refuses_changed_worker_commands(tmp_path, write_job, crossbench):
    from conftest import HOSTILE_WORKER
    extra = f"[workers]\nhostile = python3 {HOSTILE_WORKER} --fault ok\n"
    job, output = finished_run(tmp_path, write_job, crossbench, engines="hostile", extra=extra)
    assert [status for status, _ in cube_cells(output)[0]] == ["ok"]
    job.write_text(job.read_text().replace("--fault ok", "--fault ok --changed"))
    refused = crossbench("run", "--job", job, "--output", output, "--quiet", "--resume")
    assert refused.returncode == 2 and "worker command workers.hostile" in refused.stderr, refused.stderr


def mpmd(binary, tags, arguments):
    command = ["mpirun", "--oversubscribe"]
    for index, tag in enumerate(tags):
        command += ([":"] if index else []) + ["-np", "1", "-x", f"CROSSBENCH_DEVICE_TAG={tag}", str(binary), *map(str, arguments)]
    return command


def test_resume_refuses_new_device_keys_unless_allowed(tmp_path, write_job, binary):
    job = write_job()
    output = tmp_path / "devices.h5"
    run = ["run", "--job", job, "--output", output, "--quiet"]
    assert subprocess.run(mpmd(binary, ["site=a"], run), capture_output=True, timeout=300).returncode == 0
    refused = subprocess.run(mpmd(binary, ["site=a", "site=b"], run + ["--resume"]), capture_output=True, text=True,
                             timeout=300)
    assert refused.returncode == 2, refused.stderr
    assert "site=b" in refused.stderr and "--allow-new-devices" in refused.stderr
    missing = subprocess.run(mpmd(binary, ["site=b"], run + ["--resume", "--allow-new-devices"]), capture_output=True,
                             text=True, timeout=300)
    assert missing.returncode == 2 and "have no rank in this run" in missing.stderr, missing.stderr
    allowed = subprocess.run(mpmd(binary, ["site=a", "site=b"], run + ["--resume", "--allow-new-devices"]),
                             capture_output=True, text=True, timeout=300)
    assert allowed.returncode == 0, allowed.stderr
    devices = sorted(result["device_key"] for result in journal_results(output))
    assert len(devices) == 2 and "site=a" in devices[0] and "site=b" in devices[1]
    assert [record["type"] for record in journal_records(output)].count("devices") == 1


def test_forged_record_outside_the_plan_is_dropped_with_a_warning(tmp_path, write_job, crossbench):
    job, output = finished_run(tmp_path, write_job, crossbench, batches="1, 2")
    journal = journal_of(output)
    lines = journal.read_text().splitlines(keepends=True)
    # The last cell's record (the run's segment_end record follows it).
    last = max(i for i, line in enumerate(lines) if json.loads(line.split(" ", 1)[1])["type"] == "result")
    record = json.loads(lines[last].split(" ", 1)[1])
    record["result"]["batch"] = 999  # not in the matrix
    payload = json.dumps(record, separators=(",", ":"))
    forged = f"{zlib.crc32(payload.encode()):08x} {payload}\n"
    journal.write_text("".join(lines[:last]) + forged + "".join(lines[last + 1:]))  # the real cell is gone, the forged one is in
    for _ in range(2):  # every later resume works too
        resumed = crossbench("run", "--job", job, "--output", output, "--quiet", "--resume")
        assert resumed.returncode == 0, resumed.stderr
        assert "outside this run's plan" in resumed.stderr
    cells, state = cube_cells(output)
    assert state == "complete" and [status for status, _ in cells] == ["ok", "ok"]


def test_garbage_journal_is_refused(tmp_path, write_job, crossbench):
    job, output = finished_run(tmp_path, write_job, crossbench)
    journal_of(output).write_bytes(b"\x00garbage\xff\n" * 10)
    refused = crossbench("run", "--job", job, "--output", output, "--quiet", "--resume")
    assert refused.returncode == 2 and "not a crossbench journal" in refused.stderr, refused.stderr


def test_journal_header_records_the_settings(tmp_path, write_job, crossbench):
    _, output = finished_run(tmp_path, write_job, crossbench)
    header = journal_records(output)[0]
    assert header["schema"] == "crossbench-journal/3"
    assert header["settings"]["measure.max_steps"] == "3" and "engine.algo" in header["settings"]
    assert len(header["device_keys"]) == 1


def damage_the_header(output):
    """Flips one bit inside the header's JSON (line 1): its checksum no longer matches."""
    journal = journal_of(output)
    data = bytearray(journal.read_bytes())
    position = data.index(b'"job_name"') + 2
    assert position < data.index(b"\n")
    data[position] ^= 0x01
    journal.write_bytes(bytes(data))


def test_a_damaged_header_is_named_and_salvage_rebuilds_it(tmp_path, write_job, crossbench):
    job, output = finished_run(tmp_path, write_job, crossbench, batches="1, 2")
    journal = journal_of(output)
    lines = journal.read_text().splitlines(keepends=True)
    last_result = max(i for i, line in enumerate(lines) if '"type":"result"' in line)
    journal.write_text("".join(lines[:last_result]))  # the last cell (and the segment's end) runs again on resume
    damage_the_header(output)
    damaged = journal.read_bytes()
    refused = crossbench("run", "--job", job, "--output", output, "--quiet", "--resume")
    assert refused.returncode == 2, refused.stderr
    assert f"{journal}:1: the journal's header fails its checksum" in refused.stderr, refused.stderr
    assert "1 intact cell record" in refused.stderr and "--salvage" in refused.stderr
    assert journal.read_bytes() == damaged
    salvaged = crossbench("run", "--job", job, "--output", output, "--quiet", "--resume", "--salvage")
    assert salvaged.returncode == 0, salvaged.stderr
    assert "rebuilt the damaged header" in salvaged.stderr, salvaged.stderr
    assert pathlib.Path(str(journal) + ".damaged").read_bytes() == damaged
    records = journal_records(output)
    assert records[0]["type"] == "header" and len(journal_results(output)) == 2
    cells, state = cube_cells(output)
    assert state == "complete" and [status for status, _ in cells] == ["ok", "ok"]


def test_salvage_never_mixes_another_jobs_records(tmp_path, write_job, crossbench):
    job, output = finished_run(tmp_path, write_job, crossbench, batches="1, 2")
    damage_the_header(output)
    damaged = journal_of(output).read_bytes()
    other = write_job(name="other.ini", batches="3, 4")
    refused = crossbench("run", "--job", other, "--output", output, "--quiet", "--resume", "--salvage")
    assert refused.returncode == 2, refused.stderr
    assert "--salvage refused" in refused.stderr and "is not a cell of this run" in refused.stderr, refused.stderr
    assert journal_of(output).read_bytes() == damaged
    assert not pathlib.Path(str(journal_of(output)) + ".damaged").exists()


def test_salvage_applies_to_resume_only(tmp_path, write_job, crossbench):
    result = crossbench("run", "--job", write_job(), "--output", tmp_path / "x.h5", "--salvage")
    assert result.returncode == 2 and "--salvage applies to --resume only" in result.stderr, result.stderr
