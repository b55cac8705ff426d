"""bench/gpu_session.sh unpacks the device bundle (.bundle/payload.tar.xz) where the bundle runs, and
leaves it packed where a caller names its own binary (CB: the tests of the stages on a CPU build). The
tests run the script in the checkout: unpacked there, the bundle (over 100 MB) made the next device
call's working tree too large to carry."""
import io
import os
import pathlib
import shutil
import subprocess
import tarfile

REPO = pathlib.Path(__file__).resolve().parents[2]


def checkout_with_a_bundle(tmp_path):
    root = tmp_path / "checkout"
    (root / "bench").mkdir(parents=True)
    shutil.copy(REPO / "bench" / "gpu_session.sh", root / "bench" / "gpu_session.sh")
    (root / ".bundle").mkdir()
    with tarfile.open(root / ".bundle" / "payload.tar.xz", "w:xz") as payload:
        script = b"#!/bin/bash\necho bundled crossbench\n"
        entry = tarfile.TarInfo("bin/crossbench")
        entry.size, entry.mode = len(script), 0o755
        payload.addfile(entry, io.BytesIO(script))
    return root


def run_stage(root, tmp_path, **environment):
    env = {key: value for key, value in os.environ.items() if key != "CB"}
    env.update(OUT=str(tmp_path / "out"), **environment)
    # No stage named: the script's preamble alone (the unpacking, the settings) runs.
    return subprocess.run(["bash", "bench/gpu_session.sh"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=60)


def test_the_bundle_is_unpacked_where_it_runs(tmp_path):
    root = checkout_with_a_bundle(tmp_path)
    result = run_stage(root, tmp_path)
    assert result.returncode == 0, result.stderr
    assert (root / ".bundle" / "bin" / "crossbench").read_text() == "#!/bin/bash\necho bundled crossbench\n"


def test_a_caller_with_its_own_binary_leaves_the_bundle_packed(tmp_path):
    root = checkout_with_a_bundle(tmp_path)
    result = run_stage(root, tmp_path, CB="/bin/true")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (root / ".bundle").iterdir()) == ["payload.tar.xz"]
