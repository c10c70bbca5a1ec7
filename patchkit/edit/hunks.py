"""Hunks of a ``-U0`` diff, and git-absorb's rule: a hunk goes to the latest patch it does not
commute with (a patch whose changed lines overlap or touch the lines the hunk replaces).

Ranges are gaps between lines: lines a..a+n-1 occupy gaps [a-1, a+n-1]; an insertion after line
L is the point [L, L]. Two changes do not commute when those closed ranges meet."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.edit import gitops

_HUNK = re.compile(rb"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class Hunk:
    path: str
    old_start: int
    old_count: int
    new_start: int
    new_count: int
    header: bytes  # the file's diff header (diff --git … +++ …)
    body: bytes  # the @@ line and its -/+ lines
    binary: bool = False
    target: int | None = None  # index of the patch it goes to (None: commutes with every patch)
    line_in_target: int = 0  # its first line in that patch's post-image

    @property
    def old_gaps(self) -> tuple[int, int]:
        start = self.old_start - 1 if self.old_count else self.old_start
        return start, start + self.old_count

    @property
    def new_gaps(self) -> tuple[int, int]:
        start = self.new_start - 1 if self.new_count else self.new_start
        return start, start + self.new_count

    def where(self) -> str:
        if self.binary:
            return f"{self.path} (binary)"
        if self.old_count == 0:
            return f"{self.path}:{self.old_start} (+{self.new_count} after it)"
        end = self.old_start + self.old_count - 1
        lines = f"{self.old_start}" if end == self.old_start else f"{self.old_start}-{end}"
        return f"{self.path}:{lines} (-{self.old_count}/+{self.new_count})"

    def patch(self) -> bytes:
        return self.header + self.body


@dataclass
class FileDiff:
    path: str
    header: bytes
    hunks: list[Hunk] = field(default_factory=list)
    whole: bool = False  # created or deleted: spans the whole file
    raw: list[bytes] = field(default_factory=list)  # every line before the first @@


def parse_u0(data: bytes) -> list[FileDiff]:
    files: list[FileDiff] = []
    current: FileDiff | None = None
    header: list[bytes] = []
    hunk: Hunk | None = None
    for line in data.splitlines(keepends=True):
        if line.startswith(b"diff --git "):
            path = line.rstrip(b"\n").split(b" b/", 1)[-1].decode("utf-8", "surrogateescape")
            current = FileDiff(path, b"", raw=[line])
            files.append(current)
            header, hunk = current.raw, None
            continue
        if current is None:
            continue
        match = _HUNK.match(line)
        if match:
            current.header = b"".join(header)
            a, b, c, d = match.groups()
            hunk = Hunk(
                current.path,
                int(a),
                1 if b is None else int(b),
                int(c),
                1 if d is None else int(d),
                current.header,
                line,
            )
            current.hunks.append(hunk)
        elif hunk is not None:
            hunk.body += line
        else:
            header.append(line)
            if line.startswith((b"new file mode", b"deleted file mode")):
                current.whole = True
    for fd in files:
        if not fd.hunks:  # binary, a mode change or an empty new file: one whole-file change
            fd.header = b"".join(fd.raw)
            fd.hunks.append(Hunk(fd.path, 0, 0, 0, 0, fd.header, b"", binary=True))
    return files


def diff_u0(repo: Path, old: str, new: str, paths: list[str] | None = None) -> list[FileDiff]:
    args = [
        "diff-tree",
        "-r",
        "-p",
        "-U0",
        "--no-renames",
        "--no-color",
        "--binary",
        "--full-index",
        old,
        new,
    ]
    return parse_u0(gitops.run(repo, args + (["--", *paths] if paths else [])))


def _meet(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def assign(repo: Path, commits: list[str], parent_of_first: str, hunks: list[Hunk]) -> None:
    """Set each hunk's ``target``: walking back from the last patch, the first whose changes meet
    the hunk's lines (mapped into that patch's post-image as the walk goes)."""
    chain = [parent_of_first, *commits]
    by_path: dict[str, list[Hunk]] = {}
    for hunk in hunks:
        by_path.setdefault(hunk.path, []).append(hunk)
    for path, group in by_path.items():
        ranges = {id(h): h.old_gaps for h in group}
        open_ = list(group)
        for index in range(len(commits) - 1, -1, -1):
            if not open_:
                break
            touched = diff_u0(repo, chain[index], chain[index + 1], [path])
            if not touched:
                continue
            fd = touched[0]
            for hunk in list(open_):
                gaps = ranges[id(hunk)]
                if (
                    fd.whole
                    or hunk.binary
                    or any(k.binary for k in fd.hunks)
                    or any(_meet(k.new_gaps, gaps) for k in fd.hunks)
                ):
                    hunk.target = index
                    hunk.line_in_target = gaps[0] + 1
                    open_.remove(hunk)
                    continue
                shift = sum(k.new_count - k.old_count for k in fd.hunks if k.new_gaps[1] < gaps[0])
                ranges[id(hunk)] = (gaps[0] - shift, gaps[1] - shift)
        for hunk in open_:
            hunk.target = None
            hunk.line_in_target = ranges[id(hunk)][0] + 1


def join(hunks: list[Hunk]) -> bytes:
    """One -U0 patch of ``hunks`` (grouped by file, in file order)."""
    out: dict[str, list[Hunk]] = {}
    for hunk in hunks:
        out.setdefault(hunk.path, []).append(hunk)
    data = b""
    for group in out.values():
        data += group[0].header + b"".join(h.body for h in group)
    return data
