"""The common case of ``hunks.apply_file_patch``, on the file's bytes: every hunk sits where the
general path looks first (its line, shifted as the hunks before it shifted). The file is split at
``\\n`` and joined again as bytes — no decode and encode of the whole file, which the UCS-2 text of a
file with one CJK character makes the dearest part of ``apply --check``. Anything else (a hunk that
moved, a mismatch, ``\\r``, a missing newline in the middle) returns None and the general path
applies or explains it; where both apply, the bytes are the same (tests/test_splice.py)."""

from __future__ import annotations

from patchkit.diff.model import Hunk

ENCODING = ("utf-8", "surrogateescape")  # how hunks.split_lines reads a file


def splice(old: bytes, hunks: list[Hunk]) -> bytes | None:
    """``old`` with ``hunks`` applied, or None when the general path is needed."""
    if b"\r" in old:  # split_lines keeps \r\n together and splits at a lone \r: its way, not ours
        return None
    rows = old.split(b"\n")  # the lines without their \n; the last is b"" when old ends with one
    open_end = rows[-1] != b""
    if not open_end:
        rows.pop()
    total, out = len(rows), []
    pos = delta = 0  # the next line not yet copied; how far the hunks before moved
    final_open = open_end
    for hunk in hunks:
        sides = _sides(hunk)
        if sides is None:
            return None
        old_rows, old_open, new_rows, new_open = sides
        count = len(old_rows)
        anchor = hunk.old_start - 1 if hunk.old_count else hunk.old_start
        must_end = _trailing_context(hunk) == 0  # git: a hunk without trailing context ends the file
        at = 0 if hunk.old_start <= 1 else total - count if must_end else anchor + delta
        if at < pos or at + count > total or (must_end and at + count != total):
            return None
        at_end = at + count == total
        if rows[at : at + count] != old_rows or old_open != (at_end and open_end and count > 0):
            return None
        if (new_open and not at_end) or (at_end and open_end and count == 0):
            return None  # a line without \n in the middle: joined with the next, as the general path does
        out.extend(rows[pos:at])
        out.extend(new_rows)
        pos, delta = at + count, at - anchor
        if at_end:
            final_open = new_open if new_rows else False
    out.extend(rows[pos:])
    if not out:
        return b""
    return b"\n".join(out) + (b"" if final_open else b"\n")


def _sides(hunk: Hunk) -> tuple[list[bytes], bool, list[bytes], bool] | None:
    """(old lines, its last lacks \\n, new lines, its last lacks \\n), as bytes without the \\n; None
    when a "No newline" marker is not on the last line of its side."""
    old: list[bytes] = []
    new: list[bytes] = []
    old_open = new_open = False
    last: tuple[str, ...] = ()
    try:
        for line in hunk.lines:
            op = line[:1]
            if op == "\\":
                old_open, new_open = old_open or "old" in last, new_open or "new" in last
                continue
            if old_open and op in " -" or new_open and op in " +":
                return None
            text = line[1:].encode(*ENCODING)
            if op == " ":
                old.append(text)
                new.append(text)
                last = ("old", "new")
            elif op == "-":
                old.append(text)
                last = ("old",)
            elif op == "+":
                new.append(text)
                last = ("new",)
    except UnicodeEncodeError:
        return None
    return old, old_open, new, new_open


def _trailing_context(hunk: Hunk) -> int:
    body = [line for line in hunk.lines if not line.startswith("\\")]
    return next((k for k, line in enumerate(reversed(body)) if line[:1] != " "), len(body))
