"""Every process patchkit starts goes through here (argument lists, never a shell): run to its end
with its output captured and a timeout, or started with one merged text pipe read as it comes.

``own_group``: the child gets its own process group and ``PR_SET_PDEATHSIG`` (Linux) sends it
SIGTERM when patchkit dies, even by kill -9; git ends the children it runs on SIGTERM and drops its
lock files, so a killed rebase's git never keeps writing into a worktree. git's calls use it
(``git.call``); the rest stay in patchkit's group, so a terminal's Ctrl-C reaches them and their
own children (pytest's workers) too."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

CompletedProcess = subprocess.CompletedProcess
TimeoutExpired = subprocess.TimeoutExpired  # raised by run_process once the child is killed
Popen = subprocess.Popen

_PR_SET_PDEATHSIG = 1


def run_process(
    argv: Sequence[str | Path],
    *,
    timeout: float,
    cwd: Path | str | None = None,
    input: bytes | str | None = None,
    env: Mapping[str, str] | None = None,
    text: bool = False,
    errors: str | None = None,
    own_group: bool = False,
) -> subprocess.CompletedProcess:
    """Run ``argv`` to its end, stdout and stderr captured (bytes, or str with ``text``); a child
    still running after ``timeout`` seconds is killed and ``TimeoutExpired`` raised; a program that
    cannot start raises ``OSError``. ``env``: the child's whole environment (None: patchkit's)."""
    return subprocess.run(list(argv), cwd=cwd, input=input, env=env, capture_output=True, timeout=timeout,
                          text=text, errors=errors, **(_child_options() if own_group else {}))  # fmt: skip


def stream_process(
    argv: Sequence[str | Path], *, cwd: Path | str | None, env: Mapping[str, str] | None
) -> Popen:
    """Start ``argv`` with stdout and stderr merged into one text pipe (undecodable bytes replaced),
    for a caller that reads it line by line as it comes; the caller waits, and kills on its timeout."""
    return subprocess.Popen(list(argv), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace")  # fmt: skip


@functools.cache
def _libc():  # noqa: ANN202 - a ctypes library, loaded by the parent on its first child only
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # not at import: commands that start no child (apply --check) do not load it

    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover - no libc to load
        return None


def _die_with_parent(parent: int, libc) -> None:  # noqa: ANN001
    if libc is not None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before prctl ran
        os._exit(1)


def _child_options() -> dict:
    """Keyword arguments for ``subprocess``: a new process group, killed with us."""
    parent, libc = os.getpid(), _libc()
    return {"process_group": 0, "preexec_fn": lambda: _die_with_parent(parent, libc)}
