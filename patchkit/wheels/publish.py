"""Put a built wheel into ``--out`` whole or not at all.

The bytes go to an unnamed file in ``--out``'s file system (Linux ``O_TMPFILE``: a crash, even
``kill -9``, leaves nothing behind), are fsynced, and get the final name in one step (``linkat``) — or,
when a wheel of that name is there, a temporary name renamed over it (a kill between the two leaves
that name, which the next build removes); where ``O_TMPFILE`` is not supported, a named temporary
file beside it, removed on any error. ``--out`` itself is only created here, after the series applied.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from patchkit.errors import UserError

_NO_TMPFILE = {errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT}


def publish(out_dir: Path, filename: str, write: Callable[[BinaryIO], None]) -> Path:
    """``out_dir/filename`` filled by ``write(handle)``; any failure leaves ``out_dir`` as it was
    (apart from ``out_dir`` itself, created when missing)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir} is not a directory")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create --out {out_dir}: {exc.strerror}") from None
    final = out_dir / filename
    _sweep(out_dir, filename)
    try:
        fd = os.open(out_dir, os.O_TMPFILE | os.O_WRONLY, 0o644) if hasattr(os, "O_TMPFILE") else -1
    except OSError as exc:
        if exc.errno not in _NO_TMPFILE:
            raise UserError(f"cannot write in --out {out_dir}: {exc.strerror}") from None
        fd = -1
    temp: Path | None = None
    named = False  # the unnamed file linked to the final name itself (nothing to rename)
    try:
        if fd < 0:
            fd, made = tempfile.mkstemp(prefix=f".{filename[:200]}.", suffix=".tmp", dir=out_dir)
            temp = Path(made)
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fchmod(handle.fileno(), 0o644)
            os.fsync(handle.fileno())
            if temp is None:  # the unnamed file gets a name only now that it is complete
                try:  # no wheel of that name yet: the final name in one step, no window at all
                    _link_unnamed(handle.fileno(), out_dir, filename)
                    named = True
                except FileExistsError:  # replaced: a temporary name, renamed over it
                    temp = out_dir / f".{filename[:200]}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
                    _link_unnamed(handle.fileno(), out_dir, temp.name)
        if not named:
            assert temp is not None
            os.replace(temp, final)
        temp = None
        _fsync_dir(out_dir)
    except OSError as exc:
        raise UserError(f"cannot write {final}: {exc.strerror or exc}; nothing was written") from None
    finally:
        if temp is not None:
            with contextlib.suppress(OSError):
                temp.unlink()
    return final


def _sweep(out_dir: Path, filename: str) -> None:
    """Remove the temporary names of ``filename`` a killed build left between naming its complete
    file and renaming it over the old wheel (``.<name>.<pid>.<hex>.tmp`` of a process now gone)."""
    pattern = re.compile(rf"\.{re.escape(filename[:200])}\.(\d+)\.[0-9a-f]{{8}}\.tmp")
    for path in out_dir.iterdir():
        if (found := pattern.fullmatch(path.name)) and not _alive(int(found[1])):
            with contextlib.suppress(OSError):
                path.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process: alive
    return True


def _link_unnamed(fd: int, directory: Path, name: str) -> None:
    """Give the O_TMPFILE file ``fd`` the name ``directory/name`` (linkat with AT_SYMLINK_FOLLOW:
    ``os.link`` uses it only when a directory fd is passed)."""
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=dir_fd, follow_symlinks=True)
    finally:
        os.close(dir_fd)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
