"""One exclusive lock per target, held while apply / status / recover work on it."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from patchkit.errors import CheckFailed

LOCK_NAME = "lock"


def _holder(path: Path) -> str:
    try:
        pid = path.read_text().strip()
    except OSError:
        return "unknown"
    return pid or "unknown"


def _still_there(fd: int, path: Path) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def remove_if_idle(state_dir: Path, keep: tuple[str, ...]) -> None:
    """Remove ``state_dir`` when it holds only the lock (and empty ``keep`` dirs) and nobody holds
    it — after a reverse nothing of patchkit's stays in the target."""
    path = state_dir / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if not _still_there(fd, path) or set(os.listdir(state_dir)) - {LOCK_NAME, *keep}:
            return
        for name in keep:
            with contextlib.suppress(OSError):
                os.rmdir(state_dir / name)
        path.unlink()
        with contextlib.suppress(OSError):
            os.rmdir(state_dir)
    except OSError:
        return
    finally:
        os.close(fd)


@contextlib.contextmanager
def target_lock(state_dir: Path, timeout: float, what: str) -> Iterator[None]:
    """Hold ``state_dir/lock`` exclusively; wait up to ``timeout`` seconds, then CheckFailed
    naming the holder's pid (written into the lock file by whoever holds it)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if _still_there(fd, path):
                    break
                os.close(fd)  # the holder removed the lock file with the state dir: use a new one
                state_dir.mkdir(parents=True, exist_ok=True)
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                continue
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise CheckFailed(
                        f"{what} is locked by pid {_holder(path)} ({path}); gave up after {timeout:g} s"
                    ) from None
                time.sleep(0.05)
        try:  # the pid is only for the message of whoever waits: a full disk must not stop us
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
