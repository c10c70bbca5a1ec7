"""Reaching a file in the target without following a symlink: parent directories walked from the
target root one component at a time, the file itself opened with ``O_NOFOLLOW``."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path


class ChangedUnderUs(Exception):
    """A file no longer holds the pre-image it was checked against."""


def open_parent(path: Path, root: Path | None, create: bool = False) -> int:
    """A descriptor of ``path``'s directory, reached from ``root`` one component at a time without
    following a symlink (ChangedUnderUs if one is met); ``create`` makes missing directories."""
    if root is None or not path.is_relative_to(root):
        return os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in path.relative_to(root).parts[:-1]:
            try:
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o755, dir_fd=fd)
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise ChangedUnderUs(f"{path}: a parent directory is now a symlink or a file") from None
                raise
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def current_state(dirfd: int, name: str) -> tuple[str | None, int | None] | str:
    """(sha256, permission bits) of a regular file, (None, None) when absent, or a word for
    anything else (a symlink, a directory) — never following a link."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dirfd)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symlink"
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        digest = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            digest.update(chunk)
        return digest.hexdigest(), stat.S_IMODE(st.st_mode)
    finally:
        os.close(fd)
