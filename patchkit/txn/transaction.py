"""The API every writing command uses: a ``Transaction`` over a set of files (the journal's
protocol) and ``replace_dir_atomically`` for a directory patchkit owns whole.

    with Transaction(state_dir, root) as txn:   # state_dir: patchkit's own, on the same file system
        txn.write(root / "a.py", b"new bytes")
        txn.remove(root / "old.py")
    # committed here; an exception in the body commits nothing; a kill -9 during the commit leaves
    # a journal that ``recover(state_dir)`` (run first by the next command) rolls back

A file's pre-image is read when the commit starts, without following links, and checked again
immediately before it is replaced: a file someone changed meanwhile aborts (rolled back).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

from patchkit.txn import journal
from patchkit.txn.journal import FileChange, Recovery

__all__ = ["Transaction", "recover", "replace_dir_atomically", "read_nofollow", "FileChange", "Recovery"]

recover = journal.recover


def read_nofollow(path: Path) -> tuple[bytes | None, int | None]:
    """(bytes, permission bits) of a regular file, (None, None) when absent; a link, directory or
    other non-regular file in its place is an OSError (never followed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None, None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise IsADirectoryError(f"{path} is not a regular file")
        return handle.read(), stat.S_IMODE(info.st_mode)


class Transaction:
    """Collect writes and removals; commit them all or none on leaving the ``with`` body."""

    def __init__(self, state_dir: Path, root: Path | None = None) -> None:
        self.state_dir, self.root = Path(state_dir), root
        self.planned: dict[Path, tuple[bytes | None, int | None]] = {}

    def write(self, path: Path, data: bytes, mode: int = 0o644) -> None:
        self.planned[Path(path)] = (data, mode)

    def remove(self, path: Path) -> None:
        self.planned[Path(path)] = (None, None)

    def changes(self) -> list[FileChange]:
        found = []
        for path, (new, mode) in self.planned.items():
            old, old_mode = read_nofollow(path)
            if old == new and (new is None or old_mode == mode):
                continue
            found.append(FileChange(path, old, new, old_mode, mode))
        return found

    def commit(self) -> int:
        """Replace the files; return how many changed."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        journal.recover(self.state_dir)
        changes = self.changes()
        if changes:
            journal.commit(self.state_dir, changes, self.root)
        return len(changes)

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, kind, value, trace) -> None:
        if kind is None:
            self.commit()


# --------------------------------------------------------------------------- whole directories

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
try:
    _LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
except OSError:  # pragma: no cover
    _LIBC = None


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (``renameat2(RENAME_EXCHANGE)``); False where the system cannot."""
    if _LIBC is None or not hasattr(_LIBC, "renameat2"):
        return False
    done = _LIBC.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if done != 0:
        err = ctypes.get_errno()
        if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: this file system cannot swap
            return False
        raise OSError(err, os.strerror(err), str(a))
    return True


def _staging_prefix(directory: Path) -> str:
    return f".{directory.name}.patchkit-swap-"


def replace_dir_atomically(directory: Path, new_contents: dict[str, bytes]) -> None:
    """Make ``directory`` hold exactly ``new_contents`` (relative path → bytes) in one step: the
    new tree is built and fsynced beside it, then swapped in (one rename into an absent name, one
    ``RENAME_EXCHANGE`` over an existing one) and the old tree removed. Readers see the old
    directory or the new one, never a mix; a kill leaves at most a ``.NAME.patchkit-swap-*``
    sibling, removed by the next call. For a directory patchkit owns whole: whatever else it
    held is replaced too. Where the system cannot swap, an OSError (nothing changed)."""
    directory = Path(directory)
    parent = directory.parent
    parent.mkdir(parents=True, exist_ok=True)
    for leftover in parent.glob(_staging_prefix(directory) + "*"):
        shutil.rmtree(leftover, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=_staging_prefix(directory), dir=parent))
    try:
        for rel, data in new_contents.items():
            target = staging / rel
            if ".." in Path(rel).parts or Path(rel).is_absolute():
                raise ValueError(f"{rel!r} leaves the directory")
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        for top, _dirs, _files in os.walk(staging):
            journal.fsync_dir(Path(top))
        staging.chmod(0o755)
        if not os.path.lexists(directory):
            os.rename(staging, directory)
        elif not exchange(staging, directory):
            raise OSError(95, "this file system cannot swap two directories in one step", str(directory))
        journal.fsync_dir(parent)
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(staging)
