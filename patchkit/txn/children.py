"""Child processes (git) in their own process group, ended when patchkit dies, even by kill -9:
``PR_SET_PDEATHSIG`` (Linux) sends them SIGTERM, on which git ends the children it runs and drops
its lock files; a killed rebase's git never keeps writing into a worktree."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1
try:
    _LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
except OSError:  # pragma: no cover - no libc to load
    _LIBC = None


def _die_with_parent(parent: int) -> None:
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before prctl ran
        os._exit(1)


def child_options() -> dict:
    """Keyword arguments for ``subprocess.run``/``Popen``: a new process group, killed with us."""
    parent = os.getpid()
    return {"process_group": 0, "preexec_fn": lambda: _die_with_parent(parent)}
