"""Several applies, reverses and status runs on one target at once: the lock serializes them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from test_journal import digest, make_checkout, spawn, wait_for

FIXTURES = Path(__file__).parent / "fixtures" / "apply"


def _patched(tmp_path: Path, series: Path) -> dict[str, str]:
    expected = tmp_path / "expected"
    shutil.copytree(FIXTURES / "base", expected)
    for name in ("0001-pool.patch", "0002-envs.patch"):
        subprocess.run(["git", "apply", str(series / name)], cwd=expected, check=True)
    return digest(expected)


def _run(tree: Path, *args: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "patchkit", *args, "--target", "checkout", "--path", str(tree)]
    return subprocess.Popen(argv, cwd=tree.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_four_applies_and_a_status_at_once(tmp_path: Path) -> None:
    tree, series = make_checkout(tmp_path)
    marker = tmp_path / "paused"
    holder = spawn(tree, series, "replace:2", marker, 8)  # holds the lock mid-transaction for 8 s
    wait_for(marker, holder)
    waiting = [_run(tree, "apply", str(series), "--lock-timeout", "60") for _ in range(3)]
    status = _run(tree, "status", "--lock-timeout", "60")
    impatient = _run(tree, "apply", str(series), "--lock-timeout", "0.2")
    out = impatient.communicate(timeout=60)[0].decode()
    assert impatient.returncode == 1 and f"locked by pid {marker.read_text()}" in out, out
    assert holder.wait(timeout=60) == 0
    outs = [p.communicate(timeout=60)[0].decode() for p in waiting]
    assert all(p.returncode == 0 for p in waiting), outs
    assert sum("already applied" in o for o in outs) == 3  # none of them applied twice
    status_out = status.communicate(timeout=60)[0].decode()
    assert status.returncode in (0, 1) and "rolled back" not in status_out, status_out
    assert digest(tree) == _patched(tmp_path, series)
    assert not (tree / ".patchkit/journal.json").exists()


def test_apply_and_reverse_racing_end_consistent(tmp_path: Path) -> None:
    tree, series = make_checkout(tmp_path)
    base = digest(tree)
    patched = _patched(tmp_path, series)
    procs = []
    for i in range(6):
        args = ["apply", str(series), "--lock-timeout", "60", *(["--reverse"] if i % 2 else [])]
        procs.append(_run(tree, *args))
    outs = [p.communicate(timeout=120)[0].decode() for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert digest(tree) in (base, patched)
    assert (tree / ".patchkit/state.json").exists() == (digest(tree) == patched)
    assert not (tree / ".patchkit/journal.json").exists()
    # a reverse leaves nothing of patchkit's behind (the state dir goes with the kept bytes)
    assert not (tree / ".patchkit").exists() or digest(tree) == patched
