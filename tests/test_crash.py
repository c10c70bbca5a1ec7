"""One crash handler: an exception patchkit did not expect is one line on stderr, its traceback in a
file that line names, and exit 4 — CI can tell a patchkit bug (4) from a failed gate (1). It once
was a Python traceback and exit 1."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from patchkit import cli
from patchkit.errors import EXIT_BUG

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"patchkit bug: KeyError: 'forced' — traceback in (\S+)")


def _boom(project, options):  # noqa: ANN001
    raise KeyError("forced")


@pytest.fixture(autouse=True)
def _env(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PATCHKIT_DEBUG", raising=False)


def test_a_forced_internal_error_is_one_line_a_traceback_file_and_exit_4(tmp_path, monkeypatch, capsys):
    from patchkit.commands import cache as command

    monkeypatch.setattr(command, "run", _boom)
    monkeypatch.setattr(sys, "argv", ["patchkit", "cache"])
    with pytest.raises(SystemExit) as exit_:
        cli.main()
    assert exit_.value.code == EXIT_BUG == 4
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    match = LINE.fullmatch(err.strip())
    assert match, err
    trace = Path(match.group(1))
    assert trace.parent == tmp_path / "cache" / "crash" and trace.is_file()
    text = trace.read_text()
    assert "Traceback (most recent call last)" in text and "in _boom" in text and "KeyError: 'forced'" in text
    assert "argv: ['patchkit', 'cache']" in text


def test_patchkit_debug_lets_the_exception_through(monkeypatch):
    from patchkit.commands import cache as command

    monkeypatch.setattr(command, "run", _boom)
    monkeypatch.setattr(sys, "argv", ["patchkit", "cache"])
    monkeypatch.setenv("PATCHKIT_DEBUG", "1")
    with pytest.raises(KeyError, match="forced"):
        cli.main()


def test_the_console_script_exits_4_and_a_failed_gate_stays_1(tmp_path):
    """The installed command as a process: a bug is 4, its one line; a user error is still 2."""
    code = (
        "import sys; sys.argv = ['patchkit', 'cache']\n"
        "from patchkit.commands import cache\n"
        "def boom(project, options): raise RuntimeError('forced\\nsecond line')\n"
        "cache.run = boom\n"
        "from patchkit.entry import main; main()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATCHKIT_CACHE": str(tmp_path / "cache")}
    env.pop("PATCHKIT_DEBUG", None)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 4
    assert re.fullmatch(r"patchkit bug: RuntimeError: forced — traceback in \S+\n", proc.stderr), proc.stderr
    user = subprocess.run([sys.executable, "-m", "patchkit", "apply", str(tmp_path / "none"), "--path",
                           str(tmp_path)], env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert user.returncode == 2 and user.stderr.startswith("patchkit: error: ")
