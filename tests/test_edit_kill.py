"""The edit loop on patchkit.txn: kill -9 in absorb, refresh, new, drop, move (and in their
recovery) ends in the old series or the new one, byte for byte, with the user's edits as they were
and git's fsck clean (bench/edit_kill.py in CI size; the long run's figures: docs/guarantees.md);
a second edit command waits for the lock of one in progress; git of a killed edit command is ended
with it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.edit_kill import ROOT, Profile, main, sub
from patchkit.edit import ops, render


def test_short_edit_kill_profile_ends_old_or_new_with_the_users_edits_kept(tmp_path: Path) -> None:
    figures = tmp_path / "ek.json"
    code = main(["--kills", "15", "--work", str(tmp_path / "work"), "--json", str(figures)])
    result = json.loads(figures.read_text())
    assert code == 0, result["problems"]
    assert result["kills_total"] >= 15 and result["wrong"] == 0 and result["problems"] == []
    assert result["old"] >= 1 and result["new"] >= 1, result["ends"]
    assert set(result["killed_at"]) - {"random delay"}, "no kill landed at a step of patchkit.txn"
    assert result["before_recovery"].get("record, series new", 0) >= 1, "no kill between swap and forward"
    assert result["recovery_said"].get("finished", 0) >= 1, "no kill after a swap was finished by recovery"


def _loop(tmp_path: Path) -> Profile:
    profile = Profile(tmp_path / "work")
    profile.build()
    return profile


def test_a_second_edit_command_waits_for_the_one_in_progress(tmp_path: Path, monkeypatch) -> None:
    """absorb stopped between its staged series and its swap; a refresh started meanwhile must wait
    for the work tree's lock (not stage over it, not recover it away), then run on absorb's result."""
    profile = _loop(tmp_path)
    for key in ("GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_GLOBAL", "HOME"):
        monkeypatch.setenv(key, profile.env[key])
    sub(profile.wt / "pkg/a.py", "return 3 + 100\n", "return 3 + 101\n")
    inside, release = threading.Event(), threading.Event()
    check = render.check

    def slow_check(*args, **kwargs):
        if not inside.is_set():
            inside.set()
            assert release.wait(60)
        return check(*args, **kwargs)

    monkeypatch.setattr(render, "check", slow_check)
    errors: list[BaseException] = []

    def absorb() -> None:
        try:
            ops.absorb(profile.wt)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    first = threading.Thread(target=absorb)
    first.start()
    assert inside.wait(60), "absorb never reached its checks"
    finished: list[str] = []

    def refresh() -> None:
        try:
            sub(profile.wt / "pkg/b.py", "return 5 + 200\n", "return 5 + 202\n")
            ops.refresh(profile.wt, "0002")
            finished.append("refresh")
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    second = threading.Thread(target=refresh)
    second.start()
    second.join(2.0)
    held = second.is_alive() and not finished
    release.set()
    first.join(60)
    second.join(60)
    assert held, "refresh ran while absorb was in the middle of its change"
    assert errors == [] and finished == ["refresh"]
    text = {p.name: p.read_text() for p in profile.series.glob("*.patch")}
    assert "+    return 3 + 101" in text["0001-alpha-change-a.patch"]
    assert "+    return 5 + 202" in text["0002-beta-change-b.patch"]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=profile.wt, capture_output=True, text=True,
                            check=True).stdout  # fmt: skip
    assert status == ""  # both changes in the patches, HEAD and index moved with them


def test_git_of_a_killed_edit_command_is_ended_with_it(tmp_path: Path) -> None:
    """kill -9 absorb while its git (commit-tree) runs: that git is ended too (it would otherwise
    go on writing into the work tree), and the next command finds the series as it was."""
    profile = _loop(tmp_path)
    sub(profile.wt / "pkg/a.py", "return 3 + 100\n", "return 3 + 101\n")
    before = {p.name: p.read_bytes() for p in profile.series.iterdir()}
    bin_dir, started, went_on = tmp_path / "bin", tmp_path / "git-started", tmp_path / "git-went-on"
    bin_dir.mkdir()
    real = shutil.which("git")
    (bin_dir / "git").write_text(f'#!/bin/sh\nif [ "$3" = "commit-tree" ]; then touch {started}; sleep 3; '
                                 f'touch {went_on}; fi\nexec {real} "$@"\n')  # fmt: skip
    (bin_dir / "git").chmod(0o755)
    env = {**profile.env, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "patchkit", "absorb", "--path", str(profile.wt)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 60
    while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert started.exists(), "absorb never ran git commit-tree"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(3.5)
    assert not went_on.exists(), "git went on after the edit command was killed"
    code, said = profile.run(["edit", "--path", str(profile.wt)])
    assert code == 0, said
    assert {p.name: p.read_bytes() for p in profile.series.iterdir()} == before
    assert "return 3 + 101\n" in (profile.wt / "pkg/a.py").read_text()  # the user's edit, uncommitted still
