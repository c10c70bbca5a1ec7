"""Crash at every step of a transaction (injected, and a real kill -9); recovery restores the prior state."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from patchkit.cli import app
from patchkit.txn import journal

FIXTURES = Path(__file__).parent / "fixtures" / "apply"


@pytest.fixture(autouse=True)
def _away_from_any_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no patchkit.toml (pin version, overlays) from the repo around us


# 4 files change (pool, helpers, envs, tests/test_pool) + state.json = 5 replacements
STEPS = ["staged", "journal", *[f"replace:{n}" for n in range(1, 6)], "before-commit", "committed"]


def make_checkout(tmp_path: Path) -> tuple[Path, Path]:
    tree, series = tmp_path / "tree", tmp_path / "series"
    shutil.copytree(FIXTURES / "base", tree)
    shutil.copytree(FIXTURES / "series", series)
    return tree, series


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() + oct(p.stat().st_mode)
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".patchkit" not in p.parts
    }


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


class Crash(Exception):
    pass


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("reverse", [False, True], ids=["apply", "reverse"])
def test_crash_at_every_step_rolls_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str,
                                        reverse: bool) -> None:  # fmt: skip
    tree, series = make_checkout(tmp_path)
    apply_args = ("apply", str(series), "--target", "checkout", "--path", str(tree))
    if reverse:
        assert invoke(*apply_args)[0] == 0
    before = digest(tree)
    state_before = (tree / ".patchkit/state.json").read_bytes() if reverse else None

    def hook(name: str) -> None:
        if name == step:
            raise Crash(name)

    monkeypatch.setattr(journal, "fault_hook", hook)
    with pytest.raises(Crash):
        invoke(*apply_args, *(["--reverse"] if reverse else []))
    monkeypatch.setattr(journal, "fault_hook", None)
    if step != "staged":
        assert (tree / ".patchkit/journal.json").is_file()
    code, out = invoke("apply", "--target", "checkout", "--path", str(tree), "--recover")
    assert code == 0, out
    assert not (tree / ".patchkit/journal.json").exists()
    assert not (tree / ".patchkit/txn").exists()
    if step == "committed":  # past the commit point: the transaction stands
        assert "finished a committed transaction" in out
        assert digest(tree) != before
        assert (tree / ".patchkit/state.json").exists() == (not reverse)
    else:
        assert digest(tree) == before
        state = tree / ".patchkit/state.json"
        assert (state.read_bytes() if state.exists() else None) == state_before
        if step not in ("staged",):
            assert "rolled back" in out


def test_recovery_is_automatic_on_next_apply(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree, series = make_checkout(tmp_path)
    monkeypatch.setattr(
        journal, "fault_hook", lambda name: (_ for _ in ()).throw(Crash()) if name == "replace:3" else None
    )
    with pytest.raises(Crash):
        invoke("apply", str(series), "--target", "checkout", "--path", str(tree))
    monkeypatch.setattr(journal, "fault_hook", None)
    code, out = invoke("apply", str(series), "--target", "checkout", "--path", str(tree))
    assert code == 0 and "recovered: rolled back" in out and "applied 2 patch(es)" in out


def test_check_refuses_with_a_pending_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree, series = make_checkout(tmp_path)
    monkeypatch.setattr(
        journal, "fault_hook", lambda name: (_ for _ in ()).throw(Crash()) if name == "journal" else None
    )
    with pytest.raises(Crash):
        invoke("apply", str(series), "--target", "checkout", "--path", str(tree))
    monkeypatch.setattr(journal, "fault_hook", None)
    code, out = invoke("apply", str(series), "--target", "checkout", "--path", str(tree), "--check")
    assert code == 1 and "--recover" in out
    assert (tree / ".patchkit/journal.json").is_file()


def spawn(tree: Path, series: Path, pause_at: str, marker: Path, seconds: float = 60,
          *extra: str) -> subprocess.Popen:  # fmt: skip
    env = {**os.environ, "PATCHKIT_PAUSE_AT": pause_at, "PATCHKIT_PAUSE_FILE": str(marker),
           "PATCHKIT_PAUSE_SECONDS": str(seconds)}  # fmt: skip
    args = [sys.executable, "-m", "patchkit", "apply", str(series), "--target", "checkout",
            "--path", str(tree), *extra]  # fmt: skip
    return subprocess.Popen(args, env=env, cwd=tree.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def wait_for(marker: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 20
    while not marker.exists():
        assert proc.poll() is None, proc.stdout.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.02)


@pytest.mark.parametrize("pause_at", ["replace:2", "before-commit"])
def test_sigkill_mid_apply_is_recovered_by_status(tmp_path: Path, pause_at: str) -> None:
    tree, series = make_checkout(tmp_path)
    before = digest(tree)
    marker = tmp_path / "paused"
    proc = spawn(tree, series, pause_at, marker)
    wait_for(marker, proc)
    assert digest(tree) != before  # some files were already replaced
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    record = json.loads((tree / ".patchkit/journal.json").read_text())
    assert record["status"] == "pending"
    code, out = invoke("status", "--target", "checkout", "--path", str(tree))
    assert code == 0 and "rolled back" in out and "nothing applied" in out
    assert digest(tree) == before
