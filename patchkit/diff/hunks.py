"""Apply a ``FilePatch`` to file bytes in memory, and render the model back to diff text.

Matching follows ``git apply`` without fuzz: context must match exactly, a hunk may move by an
offset (nearest first), hunks stay in order, a hunk at line 1 must match at the start and one
without trailing context must match at the end.
"""

from __future__ import annotations

from patchkit import git
from patchkit.diff.model import FilePatch, Hunk
from patchkit.diff.splice import splice

NO_NEWLINE = "\\ No newline at end of file"


class HunkMismatch(Exception):
    """A hunk whose preimage is not in the file: what was expected, what was found, the nearest.

    The closest-match search is done only when the message is asked for, so probing whether a
    patch applies (dependency computation) stays cheap.
    """

    def __init__(self, path: str, hunk_index: int, hunk: Hunk, lines: list[str], old: list[str],
                 want: int, floor: int) -> None:  # fmt: skip
        super().__init__(path)
        self.path = path
        self.hunk_index = hunk_index
        self.hunk_header = hunk.header()
        self.expected = old
        self.found = lines[max(want, 0) : max(want, 0) + len(old)]
        self.expected_line = want + 1
        self._lines, self._floor = lines, floor

    def closest(self) -> tuple[int | None, float]:
        """0-based index of the most similar window at or after the floor, and its similarity."""
        old, lines, want = self.expected, self._lines, self.expected_line - 1
        best_at, best_score = None, 0.0
        if old:
            for at in range(self._floor, max(self._floor, len(lines) - len(old)) + 1):
                window = lines[at : at + len(old)]
                score = sum(a == b for a, b in zip(window, old)) / len(old)
                closer = best_at is None or abs(at - want) < abs(best_at - want)
                if score > best_score or (score == best_score and score > 0 and closer):
                    best_at, best_score = at, score
        return best_at, best_score

    def to_dict(self) -> dict:
        at, score = self.closest()
        want = self.expected_line - 1
        return {
            "path": self.path,
            "hunk": self.hunk_index + 1,
            "header": self.hunk_header,
            "expected_line": self.expected_line,
            "expected": self.expected,
            "found": self.found,
            "closest_line": at + 1 if at is not None else None,
            "closest_offset": at - want if at is not None else None,
            "closest_similarity": round(score, 3),
        }

    def __str__(self) -> str:
        at, score = self.closest()
        near = ""
        if at is not None:
            offset = at - (self.expected_line - 1)
            near = f"; closest match at line {at + 1} (offset {offset:+d}, {score:.0%} of lines equal)"
        first_diff = next(
            (k for k, (e, f) in enumerate(zip(self.expected, self.found)) if e != f),
            min(len(self.expected), len(self.found)),
        )
        want = self.expected[first_diff].rstrip("\n") if first_diff < len(self.expected) else "EOF"
        got = self.found[first_diff].rstrip("\n") if first_diff < len(self.found) else "EOF"
        return (
            f"{self.path}: hunk #{self.hunk_index + 1} {self.hunk_header} does not apply at line "
            f"{self.expected_line}: line {self.expected_line + first_diff} expected {want!r}, "
            f"found {got!r}{near}"
        )


def split_lines(data: bytes) -> list[str]:
    """File bytes → lines keeping their terminators (the last may lack one)."""
    text = data.decode("utf-8", errors="surrogateescape")
    if "\r" in text:
        return text.splitlines(keepends=True)
    lines = text.splitlines(keepends=True)  # also splits at \f, \x1c, U+2028 ...: then count differs
    if len(lines) == text.count("\n") + (not text.endswith("\n") and bool(text)):
        return lines
    return _split_lf(text)


def _split_lf(text: str) -> list[str]:
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def join_lines(lines: list[str]) -> bytes:
    return "".join(lines).encode("utf-8", errors="surrogateescape")


def hunk_sides(hunk: Hunk) -> tuple[list[str], list[str]]:
    """The hunk's old and new lines with terminators, honouring 'No newline at end of file'."""
    lines = hunk.lines
    if not any(line.startswith("\\") for line in lines):  # the common case, in comprehensions
        old_lines = [line[1:] + "\n" for line in lines if line.startswith((" ", "-"))]
        return old_lines, [line[1:] + "\n" for line in lines if line.startswith((" ", "+"))]
    old: list[str] = []
    new: list[str] = []
    last: list[list[str]] = []
    for line in hunk.lines:
        op, text = line[:1], line[1:]
        if op == "\\":
            for side in last:
                side[-1] = side[-1][:-1]
            continue
        if op == " ":
            old.append(text + "\n")
            new.append(text + "\n")
            last = [old, new]
        elif op == "-":
            old.append(text + "\n")
            last = [old]
        elif op == "+":
            new.append(text + "\n")
            last = [new]
    return old, new


def apply_file_patch(old: bytes | None, fp: FilePatch) -> bytes | None:
    """The file's new bytes (None when the patch deletes it); raises HunkMismatch."""
    if fp.binary:
        raise ValueError(f"{fp.path}: binary patches are not supported")
    if old is not None and not fp.is_deleted and (spliced := splice(old, fp.hunks)) is not None:
        return spliced  # every hunk where it says: on the bytes (diff/splice.py), the same result
    lines = split_lines(old) if old is not None else []
    lines = apply_hunks(lines, fp.hunks, fp.path)
    if fp.is_deleted:
        if lines:
            raise HunkMismatch(fp.path, 0, Hunk(1, 0, 0, 0, []), lines, [], 0, 0)
        return None
    return join_lines(lines)


def apply_hunks(lines: list[str], hunks: list[Hunk], path: str) -> list[str]:
    out: list[str] = []
    pos = 0
    for at, old_len, new in splice_plan(lines, hunks, path):
        out.extend(lines[pos:at])
        out.extend(new)
        pos = at + old_len
    out.extend(lines[pos:])
    return out


def splice_plan(lines: list[str], hunks: list[Hunk], path: str) -> list[tuple[int, int, list[str]]]:
    """Where each hunk lands: (index into ``lines``, lines replaced, new lines), in order."""
    plan = []
    pos = 0  # next unconsumed line of ``lines``
    delta = 0  # how far hunks have moved so far
    for index, hunk in enumerate(hunks):
        old, new = hunk_sides(hunk)
        anchor = hunk.old_start - 1 if hunk.old_count else hunk.old_start
        want = anchor + delta
        at = _locate(lines, old, want, pos, hunk)
        if at is None:
            raise HunkMismatch(path, index, hunk, lines, old, want, pos)
        delta = at - anchor
        plan.append((at, len(old), new))
        pos = at + len(old)
    return plan


def _context_edges(hunk: Hunk) -> tuple[int, int]:
    body = [ln for ln in hunk.lines if not ln.startswith("\\")]
    lead = next((k for k, ln in enumerate(body) if ln[:1] != " "), len(body))
    trail = next((k for k, ln in enumerate(reversed(body)) if ln[:1] != " "), len(body))
    return lead, trail


def _locate(lines: list[str], old: list[str], want: int, floor: int, hunk: Hunk) -> int | None:
    # git's match_beginning / match_end (without --unidiff-zero): a hunk at line 0 or 1 must sit at
    # the start, one without trailing context at the end, context or not
    _, trail = _context_edges(hunk)
    must_start = hunk.old_start <= 1
    must_end = trail == 0
    if must_start:
        candidates = [0]
    elif must_end:
        candidates = [len(lines) - len(old)]
    else:
        candidates = _nearest_first(want, floor, len(lines) - len(old))
    for at in candidates:
        if at < floor or at + len(old) > len(lines):
            continue
        if must_end and at + len(old) != len(lines):
            continue
        if lines[at : at + len(old)] == old:
            return at
    return None


def _nearest_first(want: int, low: int, high: int):
    yield want
    for step in range(1, max(want - low, high - want) + 1):
        if want - step >= low:
            yield want - step
        if want + step <= high:
            yield want + step


def preimage_matches(fp: FilePatch, old: bytes | None) -> bool:
    """Whether ``old`` is the blob the patch's ``index`` line names (True when it names none)."""
    if fp.old_blob is None:
        return True
    return old is not None and git.blob_id(old).startswith(fp.old_blob)


# --------------------------------------------------------------------------- rendering


def render_file_patch(fp: FilePatch) -> str:
    old, new = fp.old_path, fp.new_path
    a, b = old or new, new or old
    out = [f"diff --git a/{a} b/{b}"]
    if fp.is_new:
        out.append(f"new file mode {fp.new_mode or '100644'}")
    elif fp.is_deleted:
        out.append(f"deleted file mode {fp.old_mode or '100644'}")
    elif fp.old_mode and fp.new_mode and fp.old_mode != fp.new_mode:
        out += [f"old mode {fp.old_mode}", f"new mode {fp.new_mode}"]
    if fp.is_rename:
        out += [f"similarity index {fp.similarity or 0}%", f"rename from {old}", f"rename to {new}"]
    if fp.old_blob or fp.new_blob:
        same_mode = fp.old_mode if fp.old_mode == fp.new_mode and fp.old_mode else None
        index = f"index {fp.old_blob or '0' * 7}..{fp.new_blob or '0' * 7}"
        out.append(f"{index} {same_mode}" if same_mode and not fp.is_new else index)
    if fp.hunks:
        out.append(f"--- {'a/' + old if old else '/dev/null'}")
        out.append(f"+++ {'b/' + new if new else '/dev/null'}")
        for hunk in fp.hunks:
            out.append(hunk.header())
            out.extend(hunk.lines)
    return "\n".join(out) + "\n"


def render_diff(files: list[FilePatch]) -> str:
    return "".join(render_file_patch(fp) for fp in files)


def diffstat(files: list[FilePatch]) -> str:
    width = max((len(fp.path) for fp in files), default=0)
    rows = []
    for fp in files:
        changes = fp.added + fp.removed
        rows.append(
            f" {fp.path.ljust(width)} | {changes:>4} {'+' * min(fp.added, 40)}{'-' * min(fp.removed, 40)}"
        )
    added = sum(fp.added for fp in files)
    removed = sum(fp.removed for fp in files)
    rows.append(
        f" {len(files)} file{'s' if len(files) != 1 else ''} changed, "
        f"{added} insertions(+), {removed} deletions(-)"
    )
    return "\n".join(rows) + "\n"
