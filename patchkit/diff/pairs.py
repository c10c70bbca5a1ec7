"""Diffs of in-memory file pairs: one ``git diff --no-index`` over many (path, old, new) sides."""

from __future__ import annotations

import stat
from pathlib import Path

from patchkit import git
from patchkit.diff.filediff import parse_diff
from patchkit.diff.model import FilePatch
from patchkit.tmpdir import scratch_dir

Side = tuple[bytes | None, str | None]  # (content or None when absent, git mode)


def diff_sides(pairs: list[tuple[str, Side, Side]], context: int = 3) -> list[FilePatch]:
    """``git diff`` of in-memory (path, old, new) pairs, e.g. an overlay against the file it replaces."""
    sizes = sum(len(old or b"") + len(new or b"") for _, (old, _), (new, _) in pairs)
    with scratch_dir("patchkit-diff-", sizes) as tmp:
        return diff_pairs(pairs, Path(tmp), context)


def diff_pairs(pairs: list[tuple[str, Side, Side]], work: Path, context: int) -> list[FilePatch]:
    """One ``git diff --no-index`` over many (path, old, new) pairs; paths come back repo-relative."""
    a, b = work / "a", work / "b"
    made: set[Path] = set()  # each directory is created once: a create is costly on a slow disk
    for side in (a, b):
        side.mkdir(parents=True, exist_ok=True)
    for rel, (old, old_mode), (new, new_mode) in pairs:
        _write(a / rel, old, old_mode, made)
        _write(b / rel, new, new_mode, made)
    text = git.diff_no_index(Path("a"), Path("b"), cwd=work, context=context)
    lines = text.decode("utf-8", errors="surrogateescape").split("\n")
    files = parse_diff(lines, "git-diff", prefixes=("a/a/", "b/b/"))  # prefix + directory
    for fp in files:
        fp.source = ""
    return files


def _write(path: Path, data: bytes | None, mode: str | None, made: set[Path]) -> None:
    if data is None:
        return
    if path.parent not in made:
        path.parent.mkdir(parents=True, exist_ok=True)
        made.add(path.parent)
    path.write_bytes(data)
    if mode == "100755":
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
