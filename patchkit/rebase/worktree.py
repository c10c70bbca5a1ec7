"""What ``rebase --continue`` takes from the worktree: the stopped patch's files, read without
following links, and nothing it would drop or turn into a change without a word.

Each of these stops with one line naming the path and what to do: a conflicted file deleted (or a
directory or a link in its place), any other file of the patch deleted or replaced by a non-file,
a file added or changed outside the patch's files, conflict markers left. ``--accept-delete``
takes a deleted file of the patch as the patch's deletion of it.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from patchkit import git
from patchkit.errors import CheckFailed
from patchkit.rebase.merge import marker_lines


def _kind(info: os.stat_result) -> str:
    if stat.S_ISDIR(info.st_mode):
        return "a directory"
    if stat.S_ISLNK(info.st_mode):
        return "a symbolic link"
    return "not a regular file"


def _read(worktree: Path, rel: str) -> tuple[bytes | None, str | None]:
    """(bytes, None) for a regular file; (None, None) when absent; (None, what it is) otherwise."""
    path = worktree / rel
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None, None
    except NotADirectoryError:
        return None, "under a path that is no longer a directory"
    if not stat.S_ISREG(info.st_mode):
        return None, _kind(info)
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        return handle.read(), None


def _stop(message: str, where: Path) -> CheckFailed:
    return CheckFailed(message, str(where))


def take(worktree: Path, files: list[str], written: dict[str, str | None], conflicts: list[str],
         accept_delete: bool) -> dict[str, bytes | None]:  # fmt: skip
    """The stopped patch's resolved files (None: the patch deletes it)."""
    restore = f"restore it (git -C {worktree} checkout -- PATH, then resolve) or pass --accept-delete"
    results: dict[str, bytes | None] = {}
    for rel in files:
        data, other = _read(worktree, rel)
        where = worktree / rel
        if other is not None:
            raise _stop(f"{rel} is {other} now, not a file; put the resolved file there, then --continue",
                        where)  # fmt: skip
        if data is None and written.get(rel) is not None and not accept_delete:
            what = "the conflicted file" if rel in conflicts else "a file of this patch (not in conflict)"
            raise _stop(f"{rel}: {what} was deleted; {restore.replace('PATH', rel)}", where)
        if rel in conflicts and data is not None and (left := marker_lines(data)):
            raise CheckFailed(f"conflict markers remain ({len(left)} line(s)); resolve them, then --continue",
                              f"{where}:{left[0]}")  # fmt: skip
        results[rel] = data
    _outside(worktree, set(files))
    return results


def _outside(worktree: Path, files: set[str]) -> None:
    """A change git sees in the worktree outside the patch's files stops the continue."""
    argv = ["status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"]
    out = git.run(argv, worktree).stdout
    for item in out.decode("utf-8", errors="surrogateescape").split("\0"):
        if len(item) < 4:
            continue
        code, rel = item[:2], item[3:]
        if rel in files or rel.rstrip("/") in files:
            continue
        if code == "??":
            raise _stop(
                f"{rel} was added to the worktree but is no file of the stopped patch; patchkit "
                "would drop it: remove it (a new file goes in a patch of its own)",
                worktree / rel,
            )
        raise _stop(
            f"{rel} changed in the worktree but is no file of the stopped patch; patchkit would "
            f"drop the change: undo it (git -C {worktree} checkout -- {rel})",
            worktree / rel,
        )


def digest(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()
