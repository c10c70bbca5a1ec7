"""Scratch directories for short-lived files, such as the two sides ``git diff --no-index`` reads.

A split writes every touched file twice per step only for git to read it back at once. On a
virtual disk a file create costs over a millisecond, a tmpfs create a few microseconds, so the
scratch goes to ``/dev/shm`` when that is a writable tmpfs with ample room for what will be
written (containers often give it only 64 MiB). ``TMPDIR`` or ``PATCHKIT_SCRATCH``, when set,
win: the user chose where temporary files go.
"""

from __future__ import annotations

import os
import tempfile

SHM = "/dev/shm"
HEADROOM = 32 * 1024 * 1024  # leave this much of the tmpfs free for everybody else


def scratch_root(need_bytes: int) -> str | None:
    """Where to create the scratch directory; None means the platform's temporary directory."""
    chosen = os.environ.get("PATCHKIT_SCRATCH")
    if chosen:
        return chosen
    if os.environ.get("TMPDIR") or not os.path.isdir(SHM) or not os.access(SHM, os.W_OK | os.X_OK):
        return None
    try:
        stats = os.statvfs(SHM)
    except OSError:
        return None
    return SHM if stats.f_bavail * stats.f_frsize >= 2 * need_bytes + HEADROOM else None


def scratch_dir(prefix: str, need_bytes: int = 0) -> tempfile.TemporaryDirectory:
    """A temporary directory (a context manager, removed on exit) for about ``need_bytes``."""
    return tempfile.TemporaryDirectory(prefix=prefix, dir=scratch_root(need_bytes))
