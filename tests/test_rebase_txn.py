"""rebase keeps apply's promise (issue 26): state before the first change, --out never touched but
by one publish transaction, --abort undoes only what it wrote and survives its own kill, --continue
takes nothing from the worktree it would drop or follow, git children die with patchkit."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bench.rebase_kill import snapshot
from patchkit import cli

FIXTURES = Path(__file__).parent / "fixtures" / "rebase"
ROOT = Path(__file__).resolve().parents[1]


class Crash(BaseException):
    """Stands for kill -9 at an exact point (nothing after it runs; no cleanup handler sees it)."""


def run_cli(args: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "argv", ["patchkit", *args])
    with pytest.raises(SystemExit) as info:
        cli.main()
    return info.value.code


def rebase_args(series: Path, out: Path, *extra: str) -> list[str]:
    return ["rebase", str(series), "--from-base", str(FIXTURES / "old"), "--to-base", str(FIXTURES / "new"),
            "--out", str(out), *extra]  # fmt: skip


def users_out(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    (out / "mine").mkdir(parents=True)
    (out / "notes.txt").write_text("keep me\n")
    os.symlink("notes.txt", out / "notes-link")
    os.symlink("mine", out / "mine-link")
    (out / "mine" / "x.txt").write_text("mine\n")
    os.mkfifo(out / "a-fifo")  # a traceback on main's --abort
    return out


def kill_at(step: str, args: list[str], tmp_path: Path) -> None:
    """Run patchkit, paused at ``step`` (PATCHKIT_PAUSE_AT), then kill -9 it there."""
    marker = tmp_path / "paused"
    marker.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATCHKIT_PAUSE_AT": step}
    env["PATCHKIT_PAUSE_FILE"] = str(marker)
    proc = subprocess.Popen([sys.executable, "-m", "patchkit", *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=tmp_path)  # fmt: skip
    deadline = time.monotonic() + 60
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert marker.exists(), f"patchkit never reached {step} (exit {proc.poll()})"
    proc.send_signal(signal.SIGKILL)
    proc.wait()


# --------------------------------------------------------------------------- 1: transactions, abort


def test_a_second_abort_after_a_killed_abort_restores_out_exactly(tmp_path: Path, monkeypatch) -> None:
    out = users_out(tmp_path)
    before = snapshot(out)
    assert run_cli(rebase_args(FIXTURES / "series-conflict", out), monkeypatch) == 1
    kill_at("abort:restored", ["rebase", "--abort", "--out", str(out)], tmp_path)
    assert run_cli(["rebase", "--abort", "--out", str(out)], monkeypatch) == 0
    assert snapshot(out) == before  # links came back as links, the directory link too


def test_a_crash_while_the_stop_is_written_is_abortable_and_continuable(tmp_path: Path, monkeypatch) -> None:
    from patchkit import git

    out = users_out(tmp_path)
    before = snapshot(out)

    def crash(*args, **kwargs):
        raise Crash()

    monkeypatch.setattr(git, "init_with_commit", crash)  # the worktree half built
    with pytest.raises(Crash):
        run_cli(rebase_args(FIXTURES / "series-conflict", out), monkeypatch)
    monkeypatch.undo()
    assert run_cli(["rebase", "--continue", "--out", str(out)], monkeypatch) == 1  # stops at the conflict
    assert json.loads((out / ".rebase" / "state.json").read_text())["phase"] == "stopped"
    assert run_cli(["rebase", "--abort", "--out", str(out)], monkeypatch) == 0
    assert snapshot(out) == before


def test_a_kill_while_publishing_rolls_back_to_the_old_series(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "out"
    assert run_cli(rebase_args(FIXTURES / "series-clean", out), monkeypatch) == 0
    old = snapshot(out)
    args = ["rebase", str(FIXTURES / "series-conflict"), "--from-base", str(FIXTURES / "old"), "--to-base",
            str(FIXTURES / "new"), "--out", str(out)]  # fmt: skip
    assert run_cli(args, monkeypatch) == 1
    (out / ".rebase/worktree/vllm/d.py").write_text('import math\n\nLIMIT = 25\nNAME = "d"\n')
    kill_at("replace:2", ["rebase", "--continue", "--out", str(out)], tmp_path)
    assert run_cli(["rebase", "--abort", "--out", str(out)], monkeypatch) == 0
    assert snapshot(out) == old  # the old series whole, not a mix


def test_rebase_never_deletes_or_overwrites_a_patch_it_did_not_write(tmp_path: Path, monkeypatch,
                                                                     capsys) -> None:  # fmt: skip
    out = tmp_path / "out"
    out.mkdir()
    (out / "0001-alpha.patch").write_text("the user's own patch\n")
    (out / "0042-other.patch").write_text("another of the user's own\n")
    before = snapshot(out)
    assert run_cli(rebase_args(FIXTURES / "series-clean", out), monkeypatch) == 2
    err = capsys.readouterr().err
    assert "0001-alpha.patch, which patchkit did not write" in err and len(err.strip().splitlines()) == 1
    assert snapshot(out) == before


def test_rebase_refuses_out_equal_to_the_series_dir(tmp_path: Path, monkeypatch, capsys) -> None:
    series = tmp_path / "series"
    shutil.copytree(FIXTURES / "series-clean", series)
    before = snapshot(series)
    assert run_cli(rebase_args(series, series), monkeypatch) == 2
    assert "--out is the series directory itself" in capsys.readouterr().err
    assert snapshot(series) == before


def test_git_children_are_ended_with_a_killed_patchkit(tmp_path: Path) -> None:
    flag = tmp_path / "still-running"
    script = textwrap.dedent(f"""
        from patchkit import git
        git.run(["-c", "alias.slow=!sleep 3 && touch {flag}", "slow"], "{tmp_path}")
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(ROOT)})
    time.sleep(1.0)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(3.5)
    assert not flag.exists(), "git's child went on after patchkit was killed"


# --------------------------------------------------------------------------- 3: --continue reads the worktree


def stopped_with_two_files(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """A stop on 0002-delta, which also changes vllm/c.py cleanly (c.py is not in conflict)."""
    series = tmp_path / "series"
    shutil.copytree(FIXTURES / "series-conflict", series)
    delta = series / "0002-delta.patch"
    text = delta.read_text()
    extra = ("diff --git a/vllm/c.py b/vllm/c.py\n--- a/vllm/c.py\n+++ b/vllm/c.py\n@@ -10,3 +10,3 @@\n"
             " ten = 10\n eleven = 11\n-twelve = 12\n+twelve = 120\n")  # fmt: skip
    delta.write_text(text.replace("-- \n", extra + "-- \n", 1))
    out = tmp_path / "out"
    assert run_cli(rebase_args(series, out), monkeypatch) == 1
    return out, out / ".rebase" / "worktree"


def _link_passwd(path: Path) -> None:
    path.unlink()
    os.symlink("/etc/passwd", path)


def _dir_in_place(path: Path) -> None:
    path.unlink()
    path.mkdir()
    (path / "x").write_text("x\n")


@pytest.mark.parametrize(
    ("case", "change", "said"),
    [
        ("conflicted-deleted", lambda w: (w / "vllm/d.py").unlink(), "d.py: the conflicted file was deleted"),
        ("conflicted-dir", lambda w: _dir_in_place(w / "vllm/d.py"), "vllm/d.py is a directory now"),
        ("conflicted-link", lambda w: _link_passwd(w / "vllm/d.py"), "vllm/d.py is a symbolic link now"),
        ("other-deleted", lambda w: (w / "vllm/c.py").unlink(), "vllm/c.py: a file of this patch (not in "),
        ("added", lambda w: (w / "vllm/new.py").write_text("x = 1\n"), "new.py was added to the worktree"),
        ("outside", lambda w: (w / "vllm/b.py").write_text("y = 3\n"), "vllm/b.py changed in the worktree"),
    ],
)
def test_continue_stops_on_what_it_would_drop_or_follow(tmp_path: Path, monkeypatch, capsys, case, change,
                                                        said) -> None:  # fmt: skip
    out, worktree = stopped_with_two_files(tmp_path, monkeypatch)
    if case != "conflicted-deleted" and case != "conflicted-dir" and case != "conflicted-link":
        (worktree / "vllm/d.py").write_text('import math\n\nLIMIT = 25\nNAME = "d"\n')
    change(worktree)
    capsys.readouterr()
    code = run_cli(["rebase", "--continue", "--out", str(out)], monkeypatch)
    err = capsys.readouterr().err
    assert code == 1 and said in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1
    assert not (out / "series").exists() and (out / ".rebase" / "state.json").is_file()


def test_accept_delete_takes_a_deleted_file_as_the_patchs_deletion(tmp_path: Path, monkeypatch) -> None:
    out, worktree = stopped_with_two_files(tmp_path, monkeypatch)
    (worktree / "vllm/d.py").write_text('import math\n\nLIMIT = 25\nNAME = "d"\n')
    (worktree / "vllm/c.py").unlink()
    assert run_cli(["rebase", "--continue", "--accept-delete", "--out", str(out)], monkeypatch) == 0
    assert "deleted file mode" in (out / "0002-delta.patch").read_text()


def test_a_truncated_state_is_one_line_and_abort_still_restores(tmp_path: Path, monkeypatch, capsys) -> None:
    out = users_out(tmp_path)
    before = snapshot(out)
    assert run_cli(rebase_args(FIXTURES / "series-conflict", out), monkeypatch) == 1
    state = out / ".rebase" / "state.json"
    state.write_bytes(state.read_bytes()[:100])
    capsys.readouterr()
    assert run_cli(["rebase", "--continue", "--out", str(out)], monkeypatch) == 2
    err = capsys.readouterr().err
    assert "rebase state is unreadable" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert run_cli(["rebase", "--abort", "--out", str(out)], monkeypatch) == 0
    assert snapshot(out) == before


def test_short_rebase_kill_profile_restores_or_completes(tmp_path: Path) -> None:
    from bench.rebase_kill import main

    figures = tmp_path / "rk.json"
    assert main(["--kills", "6", "--work", str(tmp_path / "work"), "--json", str(figures)]) == 0
    result = json.loads(figures.read_text())
    assert result["kills_total"] >= 6 and result["problems"] == []


# --------------------------------------------------------------------------- split --out, same mechanism


def test_a_split_killed_while_publishing_leaves_the_previous_series_whole(tmp_path: Path) -> None:
    fixtures = ROOT / "tests" / "fixtures"
    out = tmp_path / "out"

    def split(replay: str) -> list[str]:
        return [
            "split",
            str(fixtures / "replays" / replay),
            "--base",
            str(fixtures / "base"),
            "--out",
            str(out),
            "--replace",  # a series is there: replaced, a copy kept in the state dir (of the cwd)
        ]

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    assert subprocess.run([sys.executable, "-m", "patchkit", *split("tangled.mbox")], env=env,
                          capture_output=True, cwd=tmp_path).returncode == 0  # fmt: skip
    previous = snapshot(out)
    kill_at("replace:1", split("tangled-pkg.mbox"), tmp_path)
    base = str(fixtures / "base")
    argv = ["rebase", str(out), "--from-base", base, "--to-base", base, "--out", str(tmp_path / "o2")]
    reader = subprocess.run(
        [sys.executable, "-m", "patchkit", *argv], env=env, capture_output=True, text=True
    )
    assert reader.returncode == 2 and "cut short" in reader.stderr and "Traceback" not in reader.stderr
    again = subprocess.run([sys.executable, "-m", "patchkit", *split("tangled.mbox")], env=env,
                           capture_output=True, text=True, cwd=tmp_path)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert snapshot(out) == previous  # rolled back first, then the same series: not a mix
