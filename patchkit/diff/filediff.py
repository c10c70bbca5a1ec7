"""A diff's file sections and hunks, read the way ``git apply`` reads them: git's extended headers,
traditional ``diff -u`` headers with timestamps, prefixes and strip levels, binary sections."""

from __future__ import annotations

import re

from patchkit.diff.model import FilePatch, Hunk
from patchkit.diff.names import (
    git_header_names,
    guess_strip,
    prefix_pair,
    squash_slashes,
    strip_components,
    traditional_name,
    unquote,
)
from patchkit.errors import UserError

NAME_MAX = 255  # bytes per path component (every common file system)
_HUNK = re.compile(r"^@@ -(\d{1,18})(?:,(\d{1,18}))? \+(\d{1,18})(?:,(\d{1,18}))? @@ ?(.*)$")
_MNEMONIC = ("a/", "b/", "c/", "i/", "w/", "o/")  # git's default and mnemonic prefixes


def parse_diff(lines: list[str], name: str, offset: int = 0,
               prefixes: tuple[str, str] | None = None) -> list[FilePatch]:  # fmt: skip
    """Parse the diff part of a patch; ``offset`` is the 0-based line index of lines[0] in the file;
    ``prefixes`` (src, dst) when the caller knows them, else read from the ``diff --git`` lines."""
    files: list[FilePatch] = []
    current: FilePatch | None = None
    known = prefixes is not None
    prefixes = prefixes or _block_prefixes(lines)
    strip: list[int | None] = [None]  # traditional diffs: decided once, like ``git apply``
    traditional: set[int] = set()
    hunk_end = -1  # the line right after the last hunk: a stray diff line there means a miscount
    i = 0
    n = len(lines)
    while i < n:
        line = lines[i]
        where = f"{name}:{offset + i + 1}"
        if line.startswith("diff --git "):
            current = _start_git_file(line[11:], prefixes, where, known)
            files.append(current)
            i = _read_git_headers(lines, i + 1, current, name, offset, prefixes)
            if current.old_path is None and current.new_path is None:
                raise UserError("git diff header lacks file name information", where)
            continue
        if line.startswith("--- ") and i + 1 < n and lines[i + 1].startswith("+++ "):
            current = _traditional_file(line[4:], lines[i + 1][4:], strip, where)
            traditional.add(len(files))
            files.append(current)
            i += 2
            continue
        if line.startswith("@@"):
            if current is None or not (current.old_path or current.new_path):
                raise UserError("hunk before any file header", where)
            hunk, i = _read_hunk(lines, i, name, offset)
            hunk_end = i
            current.hunks.append(hunk)
            continue
        if line[:1] in ("+", "-", " ") and i == hunk_end and line != "-- ":  # git would misread it
            raise UserError(f"line after a hunk that its header did not count: {line[:60]!r}", where)
        i += 1  # prose, diffstat, "-- " signature: not part of any file
    for index in traditional:
        _infer_creation(files[index])
    for fp in files:
        if not fp.hunks and not fp.binary and not _is_header_only(fp):
            raise UserError(f"file {fp.path!r} has a header but no hunks", fp.source)
        for path in (fp.old_path, fp.new_path):
            _check_path(path, fp.source)
    return files


def _check_path(path: str | None, where: str) -> None:
    """A path no file system can hold is bad input here, not an OSError later."""
    if path is None:
        return
    if "\0" in path:
        raise UserError(f"path {path!r} holds a NUL byte", where)
    if any(len(part.encode("utf-8", errors="surrogateescape")) > NAME_MAX for part in path.split("/")):
        raise UserError(f"path {path[:60]!r}...: a component is longer than {NAME_MAX} bytes", where)


def _is_header_only(fp: FilePatch) -> bool:
    return fp.is_new or fp.is_deleted or fp.is_rename or fp.is_copy or fp.old_mode != fp.new_mode


def _block_prefixes(lines: list[str]) -> tuple[str, str]:
    """The src/dst prefixes of this diff's ``diff --git`` lines: the first pair a line with two
    different names shows; ('', '') when every line names one path twice (``--no-prefix``);
    ('a/', 'b/') when no line says."""
    same = False
    for line in lines:
        if not line.startswith("diff --git "):
            continue
        try:
            old, new = git_header_names(line[11:], "")
        except UserError:
            continue
        if old is not None and old == new:
            same = True
        elif old is not None and new is not None and (pair := prefix_pair(old, new)):
            return pair
    return ("", "") if same else ("a/", "b/")


def _without(prefix: str, name: str | None) -> str | None:
    if name is None:
        return None
    return squash_slashes(name[len(prefix) :]) if prefix and name.startswith(prefix) else name


def _start_git_file(rest: str, prefixes: tuple[str, str], where: str, known: bool) -> FilePatch:
    old, new = git_header_names(rest, where)
    if old is not None and new is not None:
        src, dst = prefixes
        fits = (src or dst) and old.startswith(src) and new.startswith(dst)
        if known or (fits and old[len(src) :] == new[len(dst) :]):
            old, new = _without(src, old), _without(dst, new)
        elif old == new:  # one name twice: no prefix, or the one side ``diff --no-index`` shows
            known_sides = prefixes if any(prefixes) else _MNEMONIC  # else read as git's -p1 would
            side = next((pre for pre in known_sides if pre and old.startswith(pre) and old != pre), "")
            old = new = _without(side, old)
        elif own := prefix_pair(old, new):
            old, new = _without(own[0], old), _without(own[1], new)
    return FilePatch(old_path=old, new_path=new, source=where)


def _traditional_file(first: str, second: str, strip: list[int | None], where: str) -> FilePatch:
    old_raw, old_epoch = traditional_name(first, where)
    new_raw, new_epoch = traditional_name(second, where)
    if old_raw is None and new_raw is None:
        raise UserError("both sides of the diff are /dev/null", where)
    if strip[0] is None:
        strip[0] = guess_strip(old_raw, new_raw)
    p = 1 if strip[0] is None else strip[0]
    old = strip_components(old_raw, p) if old_raw is not None else None
    new = strip_components(new_raw, p) if new_raw is not None else None
    if old_raw is not None and new_raw is not None:
        # git's find_name: the new name, unless the old one is a shorter prefix of it
        chosen = old if old and new and len(old) < len(new) and new.startswith(old) else (new or old)
        if chosen is None:
            raise UserError(f"cannot find a file name in {first.strip()!r}", where)
        old = None if old_epoch else chosen
        new = None if new_epoch and not old_epoch else chosen
    elif (old_raw or new_raw) and (old or new) is None:
        raise UserError(f"cannot find a file name in {(first if old_raw else second).strip()!r}", where)
    fp = FilePatch(old_path=old, new_path=new, source=where)
    fp.similarity = -1  # marks "creation/deletion still to infer from the hunks", cleared below
    if old_raw is None or new_raw is None or old_epoch or new_epoch:
        fp.similarity = None
    return fp


def _infer_creation(fp: FilePatch) -> None:
    """A traditional diff whose only hunk has no old lines (``-0,0``) creates the file."""
    if fp.similarity != -1:
        return
    fp.similarity = None
    if len(fp.hunks) == 1 and fp.hunks[0].old_count == 0 and fp.hunks[0].old_start == 0:
        fp.old_path = None  # (the reverse, "+0,0", empties the file: git keeps it, empty)


def _read_git_headers(lines: list[str], i: int, fp: FilePatch, name: str, offset: int,
                      prefixes: tuple[str, str]) -> int:  # fmt: skip
    n = len(lines)
    gone = ""  # "old" for a creation, "new" for a deletion
    while i < n:
        line = lines[i]
        where = f"{name}:{offset + i + 1}"
        if line.startswith("old mode "):
            fp.old_mode = line[9:].strip()
        elif line.startswith("new mode "):
            fp.new_mode = line[9:].strip()
        elif line.startswith("deleted file mode "):
            fp.old_mode, gone = line[18:].strip(), "new"
            fp.old_path, fp.new_path = fp.old_path or fp.new_path, None
        elif line.startswith("new file mode "):
            fp.new_mode, gone = line[14:].strip(), "old"
            fp.new_path, fp.old_path = fp.new_path or fp.old_path, None
        elif line.startswith(("similarity index ", "dissimilarity index ")):
            digits = re.sub(r"\D", "", line)
            if len(digits) > 9:
                raise UserError(f"malformed similarity line {line[:60]!r}", where)
            fp.similarity = int(digits or 0)
        elif line.startswith(("rename from ", "copy from ")):
            fp.old_path = _plain_name(line.split(" from ", 1)[1], where)
            fp.copy = line.startswith("copy")
        elif line.startswith(("rename to ", "copy to ")):
            fp.new_path = _plain_name(line.split(" to ", 1)[1], where)
            fp.copy = line.startswith("copy")
        elif line.startswith("index "):
            _read_index(line, fp, where)
        elif line.startswith("Binary files ") or line == "GIT binary patch":
            fp.binary = True
            if line == "GIT binary patch":
                end = next((k for k in range(i + 1, n) if not lines[k]), n)
                fp.binary_hunk = lines[i + 1 : end]  # the forward hunk; the reverse one follows
                i = _skip_binary(lines, end)
            else:
                i += 1
            continue
        elif line.startswith("--- "):
            if i + 1 >= n or not lines[i + 1].startswith("+++ "):
                raise UserError("'---' header without '+++' after it", where)
            old = _git_side(line[4:], prefixes[0], where)
            new = _git_side(lines[i + 1][4:], prefixes[1], where)
            # the header's names stand; these only fill in what it could not say
            if gone != "old" and fp.old_path is None:
                fp.old_path = old
            if gone != "new" and fp.new_path is None:
                fp.new_path = new
            return i + 2
        else:
            return i
        i += 1
    return i


def _plain_name(value: str, where: str) -> str:
    return unquote(value, where)[0] if value.startswith('"') else value


def _git_side(value: str, prefix: str, where: str) -> str | None:
    value = unquote(value, where)[0] if value.startswith('"') else value.split("\t", 1)[0]
    if value == "/dev/null":
        return None
    return _without(prefix, value)


def _read_index(line: str, fp: FilePatch, where: str) -> None:
    match = re.match(r"^index ([0-9a-f]+)\.\.([0-9a-f]+)(?: (\d{6}))?$", line)
    if not match:
        raise UserError(f"malformed index line {line[:60]!r}", where)
    fp.old_blob, fp.new_blob = match.group(1), match.group(2)
    if match.group(3) and fp.old_mode is None and fp.new_mode is None:
        fp.old_mode = fp.new_mode = match.group(3)
    if set(fp.old_blob) == {"0"}:
        fp.old_blob = None
    if set(fp.new_blob) == {"0"}:
        fp.new_blob = None


def _skip_binary(lines: list[str], i: int) -> int:
    while i < len(lines) and not lines[i].startswith("diff --git "):
        i += 1
    return i


def _read_hunk(lines: list[str], i: int, name: str, offset: int) -> tuple[Hunk, int]:
    header = lines[i]
    match = _HUNK.match(header)
    if not match:
        raise UserError(f"malformed hunk header {header[:60]!r}", f"{name}:{offset + i + 1}")
    old_start, new_start = int(match.group(1)), int(match.group(3))
    old_count = int(match.group(2)) if match.group(2) is not None else 1
    new_count = int(match.group(4)) if match.group(4) is not None else 1
    hunk = Hunk(old_start, old_count, new_start, new_count, [], section=match.group(5))
    old_left, new_left = old_count, new_count
    i += 1
    while old_left > 0 or new_left > 0:
        where = f"{name}:{offset + i + 1}"
        if i >= len(lines):
            raise UserError(
                f"hunk {header!r} ends early: {old_left} old and {new_left} new lines missing",
                f"{name}:{offset + i}",
            )
        line = lines[i]
        op = line[:1]
        if line == "":
            line, op = " ", " "  # a mailer stripped the blank context line's space
        if op == " ":
            old_left, new_left = old_left - 1, new_left - 1
        elif op == "-":
            old_left -= 1
        elif op == "+":
            new_left -= 1
        elif op == "\\":
            hunk.lines.append(line)
            i += 1
            continue
        else:
            raise UserError(f"unexpected line inside hunk {header!r}: {line[:60]!r}", where)
        if old_left < 0 or new_left < 0:
            raise UserError(f"hunk {header!r} has more lines than its header counts", where)
        hunk.lines.append(line)
        i += 1
    if i < len(lines) and lines[i].startswith("\\"):
        hunk.lines.append(lines[i])
        i += 1
    return hunk, i
