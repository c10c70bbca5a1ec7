"""Faults during apply and reverse: SIGKILL anywhere, a read-only or immutable file, a full disk.

After recovery the target is byte-identical to the base or to the fully patched tree, never
between. CI: 20 kills. ``PATCHKIT_LONG=1``: 200 kills (figures printed).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_journal import STEPS, digest, invoke, make_checkout

LONG = os.environ.get("PATCHKIT_LONG") == "1"
KILLS = 200 if LONG else 20


@pytest.fixture(autouse=True)
def _away_from_any_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def _apply_args(tree: Path, series: Path, reverse: bool) -> list[str]:
    return [
        "apply",
        str(series),
        "--target",
        "checkout",
        "--path",
        str(tree),
        *(["--reverse"] if reverse else []),
    ]


def _spawn(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "patchkit", *args], env=env, cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


def test_sigkill_anywhere_leaves_base_or_patched(tmp_path: Path) -> None:
    rng = random.Random(KILLS)
    tree, series = make_checkout(tmp_path)
    base = digest(tree)
    assert invoke(*_apply_args(tree, series, False))[0] == 0
    patched = digest(tree)
    assert invoke(*_apply_args(tree, series, True))[0] == 0 and digest(tree) == base
    state = tree / ".patchkit/state.json"
    killed = outcomes = 0
    seen = {"base": 0, "patched": 0}
    while killed < KILLS:
        reverse = state.exists()
        marker = tmp_path / f"paused-{outcomes}"
        env = dict(os.environ)
        if rng.random() < 0.5:  # at an exact journal step
            env.update(PATCHKIT_PAUSE_AT=rng.choice(STEPS), PATCHKIT_PAUSE_FILE=str(marker))
        proc = _spawn(_apply_args(tree, series, reverse), env, tmp_path)
        deadline = time.monotonic() + (30 if "PATCHKIT_PAUSE_AT" in env else rng.uniform(0.05, 0.9))
        while proc.poll() is None and time.monotonic() < deadline and not marker.exists():
            time.sleep(0.005)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        proc.wait()
        outcomes += 1
        recover = ["apply", "--target", "checkout", "--path", str(tree), "--recover"]
        status = ["status", "--target", "checkout", "--path", str(tree)]
        code, out = invoke(*(recover if rng.random() < 0.5 else status))
        assert code in (0, 1), out
        now = digest(tree)
        assert now in (base, patched), f"kill #{killed}: tree is neither base nor patched"
        assert state.exists() == (now == patched)
        assert not (tree / ".patchkit/journal.json").exists() and not (tree / ".patchkit/txn").exists()
        seen["base" if now == base else "patched"] += 1
    print(f"\nkills survived: {killed} over {outcomes} runs; ended at base {seen['base']}, "
          f"patched {seen['patched']}")  # fmt: skip
    assert seen["base"] and seen["patched"]


def test_read_only_file_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    tree, series = make_checkout(tmp_path)
    (tree / "vllm/envs.py").chmod(0o444)  # changed by the second patch: the first one's files wait
    before = digest(tree)
    code, out = invoke(*_apply_args(tree, series, False))
    assert code == 2 and "vllm/envs.py: read-only" in out and "nothing was changed" in out, out
    assert digest(tree) == before and not (tree / ".patchkit/state.json").exists()


@pytest.mark.skipif(shutil.which("chattr") is None or os.geteuid() != 0, reason="needs root and chattr")
def test_immutable_file_is_refused(tmp_path: Path) -> None:
    tree, series = make_checkout(tmp_path)
    victim = tree / "vllm/envs.py"
    if subprocess.run(["chattr", "+i", str(victim)], capture_output=True).returncode != 0:
        pytest.skip("file system without the immutable attribute")
    try:
        before = digest(tree)
        code, out = invoke(*_apply_args(tree, series, False))
        assert code == 2 and "nothing was changed" in out, out
        assert digest(tree) == before
        assert not (tree / ".patchkit/journal.json").exists() and not (tree / ".patchkit/state.json").exists()
    finally:
        subprocess.run(["chattr", "-i", str(victim)], check=True)
    assert invoke(*_apply_args(tree, series, False))[0] == 0  # and it works once writable again


@pytest.mark.parametrize("step", ["journal", "replace:1", "replace:3", "before-commit"])
@pytest.mark.parametrize("reverse", [False, True], ids=["apply", "reverse"])
def test_write_error_mid_transaction_rolls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str,
                                                reverse: bool) -> None:  # fmt: skip
    from patchkit.txn import journal

    tree, series = make_checkout(tmp_path)
    if reverse:
        assert invoke(*_apply_args(tree, series, False))[0] == 0
    before = digest(tree)

    def hook(name: str) -> None:
        if name == step:
            raise OSError(28, "No space left on device", str(tree / "vllm/pool.py"))

    monkeypatch.setattr(journal, "fault_hook", hook)
    code, out = invoke(*_apply_args(tree, series, reverse))
    assert code == 2 and "No space left on device; rolled back, nothing was changed" in out, out
    assert digest(tree) == before
    assert not (tree / ".patchkit/journal.json").exists() and not (tree / ".patchkit/txn").exists()
    assert (tree / ".patchkit/state.json").exists() == reverse


@pytest.fixture
def small_tmpfs(tmp_path: Path):
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a small tmpfs")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], capture_output=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount tmpfs: {proc.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(directory: Path, leave: int) -> Path:
    filler = directory / "filler"
    stat = os.statvfs(directory)
    free = stat.f_bavail * stat.f_frsize
    filler.write_bytes(b"\0" * max(free - leave, 0))
    return filler


@pytest.mark.parametrize("leave", [0, 4096, 12288])
def test_full_disk_is_refused_and_nothing_changes(small_tmpfs: Path, leave: int) -> None:
    tree, series = make_checkout(small_tmpfs)
    shutil.move(str(series), str(small_tmpfs.parent / "series"))
    series = small_tmpfs.parent / "series"
    (tree / ".patchkit").mkdir()
    filler = _fill(small_tmpfs, leave)
    before = digest(tree)
    code, out = invoke(*_apply_args(tree, series, False))
    if code == 0:  # enough room after all at this size: must then be fully applied
        assert leave > 0 and "applied 2 patch(es)" in out, out
        return
    assert code == 2 and "nothing was changed" in out and "No space left" in out, out
    assert digest(tree) == before
    assert not (tree / ".patchkit/journal.json").exists() and not (tree / ".patchkit/txn").exists()
    filler.unlink()
    assert invoke(*_apply_args(tree, series, False))[0] == 0
