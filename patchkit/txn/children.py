"""Child processes (git) in their own process group, ended when patchkit dies, even by kill -9:
``PR_SET_PDEATHSIG`` (Linux) sends them SIGTERM, on which git ends the children it runs and drops
its lock files; a killed rebase's git never keeps writing into a worktree."""

from __future__ import annotations

import functools
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


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


def child_options() -> dict:
    """Keyword arguments for ``subprocess.run``/``Popen``: a new process group, killed with us."""
    parent, libc = os.getpid(), _libc()
    return {"process_group": 0, "preexec_fn": lambda: _die_with_parent(parent, libc)}
