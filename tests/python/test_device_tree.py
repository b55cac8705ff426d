"""bench/device_tree.sh in a scratch git checkout: `stash` moves the committed results but README files and
the folders kept, and says what a device call would carry; a second stash, an unknown KEEP and a restore
that would overwrite are refused with the reason; `restore` brings every file back, so git sees no change;
`size` says when the tree is over the 64 MiB a call carries."""
import os
import pathlib
import shutil
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "device_tree.sh"


def git(checkout, *args):
    return subprocess.run(["git", *args], cwd=checkout, capture_output=True, text=True, check=True).stdout


def checkout_with_results(tmp_path):
    checkout = tmp_path / "repo"
    (checkout / "bench" / "results" / "2026-12-01" / "call1").mkdir(parents=True)
    (checkout / "bench" / "results" / "2026-12-02").mkdir(parents=True)
    shutil.copy(SCRIPT, checkout / "bench" / "device_tree.sh")
    (checkout / "bench" / "results" / "README.md").write_text("index\n")
    (checkout / "bench" / "results" / "2026-12-01" / "call1" / "cube.h5").write_bytes(b"x" * 4096)
    (checkout / "bench" / "results" / "2026-12-02" / "README.md").write_text("latest\n")
    git(checkout, "init", "-q")
    git(checkout, "add", ".")
    git(checkout, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "results")
    return checkout


def run(checkout, stash, *args):
    env = dict(os.environ, CROSSBENCH_RESULTS_STASH=str(stash))
    return subprocess.run(["bash", "bench/device_tree.sh", *args], cwd=checkout, env=env, capture_output=True,
                          text=True, timeout=60)


def test_stash_and_restore_leave_git_unchanged(tmp_path):
    checkout = checkout_with_results(tmp_path)
    stash = tmp_path / "stash"
    result = run(checkout, stash, "stash", "2026-12-02")
    assert result.returncode == 0, result.stderr
    assert "1 entries of bench/results/ stashed" in result.stdout
    assert "of 64 MiB" in result.stdout
    assert (stash / "2026-12-01" / "call1" / "cube.h5").exists()
    assert (checkout / "bench" / "results" / "README.md").exists()  # README files stay
    assert (checkout / "bench" / "results" / "2026-12-02" / "README.md").exists()  # kept
    assert not (checkout / "bench" / "results" / "2026-12-01").exists()

    again = run(checkout, stash, "stash")
    assert again.returncode == 1 and "already holds a stash" in again.stderr

    result = run(checkout, stash, "restore")
    assert result.returncode == 0, result.stderr
    assert "1 entries restored" in result.stdout
    assert not stash.exists()
    assert git(checkout, "status", "--porcelain") == ""


def test_bad_input_is_named(tmp_path):
    checkout = checkout_with_results(tmp_path)
    stash = tmp_path / "stash"
    result = run(checkout, stash, "stash", "2031-01-01")
    assert result.returncode == 2 and "KEEP '2031-01-01' is not an entry of bench/results/" in result.stderr
    assert (checkout / "bench" / "results" / "2026-12-01").exists()  # nothing moved
    result = run(checkout, stash, "restore")
    assert result.returncode == 1 and "no stash at" in result.stderr
    result = run(checkout, stash, "shuffle")
    assert result.returncode == 2 and "usage:" in result.stderr
    # A restore never overwrites: an entry made again in the checkout since the stash stays as it is.
    assert run(checkout, stash, "stash").returncode == 0
    (checkout / "bench" / "results" / "2026-12-01").mkdir()
    result = run(checkout, stash, "restore")
    assert result.returncode == 1 and "2026-12-01 exists" in result.stderr
    assert (stash / "2026-12-01" / "call1" / "cube.h5").exists()


def test_size_refuses_a_tree_over_64_mib(tmp_path):
    checkout = checkout_with_results(tmp_path)
    (checkout / "bench" / "results" / "2026-12-02" / "big.bin").write_bytes(b"\0" * (65 << 20))
    result = run(checkout, tmp_path / "stash", "size")
    assert result.returncode == 1 and "over 64 MiB" in result.stderr
    assert "the tree 65 MiB" in result.stdout
