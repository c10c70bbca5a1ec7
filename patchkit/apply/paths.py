"""What a patch may name in a target: a path that stays inside it, a mode git would give."""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from patchkit.errors import UserError

NAME_MAX = 255  # bytes per path component on every file system patchkit writes to


def check_rel(root: Path, rel: str) -> PurePosixPath:
    """``rel`` as a relative POSIX path, or UserError when it could leave ``root`` or cannot exist."""
    if not rel or "\0" in rel:
        raise UserError(f"path {rel!r} is empty or holds a NUL byte")
    parts = PurePosixPath(rel).parts
    if rel.startswith("/") or "\\" in rel or ".." in parts or "." in rel.split("/"):
        raise UserError(f"path {rel!r} leaves the target root {root}")
    for part in parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise UserError(f"path {rel[:60]!r}...: a component is longer than {NAME_MAX} bytes")
    return PurePosixPath(rel)


def safe_path(root: Path, rel: str, reserved: tuple[Path, ...]) -> Path:
    """``root/rel`` after refusing absolute paths, ``..``, symlinks leading out (each component
    checked with lstat), a symlink as the file itself, a file used as a directory, and
    ``reserved`` (patchkit's own state, ``.git``)."""
    parts = check_rel(root, rel).parts
    current = root
    linked = False  # a component is a symlink (inside root): only then can the path differ from rel
    for index, part in enumerate(parts):
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            break
        except OSError as exc:
            raise UserError(f"path {rel!r}: {exc.strerror}") from None
        last = index == len(parts) - 1
        if stat.S_ISLNK(mode):
            if last:
                raise UserError(f"path {rel!r} is a symlink in {root}; refusing to replace it")
            if not current.resolve().is_relative_to(root):
                raise UserError(f"path {rel!r} goes through a symlink leading out of {root}")
            linked = True
        elif not last and not stat.S_ISDIR(mode):
            raise UserError(f"path {rel!r}: {current.relative_to(root)} is a file, not a directory")
        elif last and stat.S_ISDIR(mode):
            raise UserError(f"path {rel!r} is a directory in {root}, not a file")
    full = root / rel
    for place in reserved:
        if _inside(full, parts, root, place, linked):
            raise UserError(f"path {rel!r} is inside {place}, which patchkit will not patch")
    return full


def _inside(full: Path, parts: tuple[str, ...], root: Path, place: Path, linked: bool) -> bool:
    """``full`` (``root`` + ``parts``) is ``place`` or below it. With no symlink on the way and
    ``place`` named below ``root`` (``root/.git``), comparing the names is the answer (what
    ``resolve`` would find, without its ``lstat`` of every component); else both are resolved."""
    try:
        named = place.relative_to(root).parts
    except ValueError:
        named = None
    if not linked and named and ".." not in named and not _is_link_below(root, named):
        return parts[: len(named)] == named
    return full.resolve().is_relative_to(place.resolve())


def _is_link_below(root: Path, named: tuple[str, ...]) -> bool:
    """A component of ``root/named`` is a symlink (then the names alone do not tell)."""
    current = root
    for part in named:
        current = current / part
        try:
            if stat.S_ISLNK(os.lstat(current).st_mode):
                return True
        except OSError:
            return False
    return False


def file_mode(mode: str | None, default: int | None, rel: str) -> int | None:
    """The permission bits for a patch's ``mode`` as git gives them: 0755 when any execute bit is
    set, else 0644 — never setuid, setgid or sticky. A symlink or submodule is refused."""
    if not mode:
        return default
    try:
        value = int(mode, 8)
    except ValueError:
        raise UserError(f"{rel}: mode {mode!r} is not an octal file mode") from None
    kind = stat.S_IFMT(value)
    if kind == stat.S_IFLNK:
        raise UserError(f"{rel}: the patch makes a symlink (mode {mode}); patchkit creates no symlinks "
                        "(see docs/guarantees.md) — apply this patch with git")  # fmt: skip
    if kind not in (0, stat.S_IFREG):
        raise UserError(f"{rel}: mode {mode} is not a regular file (submodule or unknown type)")
    return 0o755 if value & 0o111 else 0o644
