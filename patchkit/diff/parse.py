"""Replay files (format-patch mboxes, plain ``git diff`` / ``diff -u`` files) → ``model.Replay``.

Every malformed input ends in a ``UserError`` naming the file and line.
"""

from __future__ import annotations

import email.utils
import re
from pathlib import Path

from patchkit.diff.mail import decode_body, decode_header, parse_trailers, read_headers, strip_diffstat
from patchkit.diff.model import Commit, FilePatch, Hunk, Patch, Replay
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

_FROM_GIT = re.compile(r"^From ([0-9a-f]{40}) Mon Sep 17 00:00:00 2001$")
_GIT_LOG = re.compile(r"^commit ([0-9a-f]{40})(?: \(.*\))?$")
_FROM_MBOX = re.compile(r"^From \S+ +\w{3} \w{3} +\d+ [\d:]+ \d{4}$")
# at most 18 digits: a longer count is malformed, not a reason to crash int()
_HUNK = re.compile(r"^@@ -(\d{1,18})(?:,(\d{1,18}))? \+(\d{1,18})(?:,(\d{1,18}))? @@ ?(.*)$")
_MNEMONIC = ("a/", "b/", "c/", "i/", "w/", "o/")  # git's default and mnemonic prefixes
_MAIL_HEADS = ("From: ", "Subject: ", "Date: ")
_SUBJECT_TAG = re.compile(r"^\s*(\[[^\]]*\b(?:PATCH|RFC)\b[^\]]*\]\s*)+")  # like `git am -b`: keep [Misc]


def read_text(path: Path) -> str:
    """File bytes as text; undecodable bytes survive round-trips via surrogateescape."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read replay: {exc.strerror}", str(path)) from exc
    return data.decode("utf-8", errors="surrogateescape")


def parse_files(paths: list[Path]) -> Replay:
    patches: list[Patch] = []
    for path in paths:
        patches.extend(parse_text(read_text(path), str(path)))
    return Replay(patches=patches, sources=[str(p) for p in paths])


def parse_text(text: str, name: str) -> list[Patch]:
    """Split one replay file into its patches (one per mail, or one for a plain diff)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if lines and all(line.endswith("\r") for line in lines):  # CRLF from the transport, as git am drops it
        lines = [line[:-1] for line in lines]
    log_starts = [i for i, line in enumerate(lines) if _GIT_LOG.match(line)]
    if log_starts and log_starts[0] == _first_content_line(lines):
        return [_parse_log_entry(lines[a:b], name, a)
                for a, b in zip(log_starts, [*log_starts[1:], len(lines)])]  # fmt: skip
    starts = _message_starts(lines)
    if not starts:
        files = parse_diff(lines, name, 0)
        if not files:
            raise UserError("no diff found (neither a format-patch mail nor a diff)", f"{name}:1")
        return [Patch(commit=None, files=files, source=name)]
    patches = []
    if _diff_start(lines[: starts[0]]) is not None:  # a plain diff ``cat``-ed before the mails
        patches.append(Patch(commit=None, files=parse_diff(lines[: starts[0]], name, 0), source=name))
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(lines)
        patches.append(_parse_message(lines[start:end], name, start))
    return patches


def _first_content_line(lines: list[str]) -> int:
    return next((i for i, line in enumerate(lines) if line.strip()), 0)


def _parse_log_entry(lines: list[str], name: str, offset: int) -> Patch:
    """One ``git log -p`` / ``git show`` entry: 'commit', 'Author:', 'Date:', indented message."""
    sha = _GIT_LOG.match(lines[0]).group(1)
    headers: dict[str, str] = {}
    i = 1
    while i < len(lines) and lines[i].strip():
        key, sep, value = lines[i].partition(":")
        if not sep:
            raise UserError(f"malformed git log header {lines[i][:60]!r}", f"{name}:{offset + i + 1}")
        headers[key.strip().lower()] = value.strip()
        i += 1
    message: list[str] = []
    i += 1
    while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
        if lines[i].startswith("diff --git "):
            break
        message.append(lines[i][4:])
        i += 1
    text = "\n".join(message).strip("\n")
    subject, _, body = text.partition("\n")
    author, mail = email.utils.parseaddr(headers.get("author", ""))
    commit = Commit(
        sha=sha,
        author=author or None,
        email=mail or None,
        date=headers.get("date") or headers.get("authordate"),
        subject=subject.strip(),
        body=text,
        trailers=parse_trailers(text),
        source=f"{name}:{offset + 1}",
    )
    return Patch(commit=commit, files=parse_diff(lines[i:], name, offset + i), source=name)


def _message_starts(lines: list[str]) -> list[int]:
    starts = []
    for i, line in enumerate(lines):
        if not line.startswith("From "):
            continue
        # git's own "From <sha> Mon Sep 17 ..." line starts a mail anywhere (``cat`` of patch
        # files); any other mbox "From " line only after a blank line
        if _FROM_GIT.match(line) or (_FROM_MBOX.match(line) and (i == 0 or lines[i - 1] == "")):
            starts.append(i)
    # A mail without the mbox "From " line (git format-patch piped through a mailer, an IDE);
    # an IDE export ``cat``-ed after another patch: "Subject:" then "---" at once
    first = _first_content_line(lines)
    if (not starts or starts[0] > first) and lines and lines[first].startswith(_MAIL_HEADS):
        starts.insert(0, first)
    ide = [i for i in range(first + 1, len(lines) - 1)
           if lines[i].startswith("Subject: ") and lines[i + 1] == "---"]  # fmt: skip
    return sorted(set(starts) | set(ide))


def _parse_message(lines: list[str], name: str, offset: int) -> Patch:
    where = f"{name}:{offset + 1}"
    sha = None
    first = _FROM_GIT.match(lines[0]) if lines else None
    if first:
        sha = first.group(1)
    i = 1 if lines and (first or _FROM_MBOX.match(lines[0])) else 0
    headers, body_start = read_headers(lines, i, name, offset)
    if "from" not in headers and "subject" not in headers:
        raise UserError("mail has neither From: nor Subject: header", where)
    body_lines = decode_body(lines[body_start:], headers, name, offset + body_start)
    diff_at = _diff_start(body_lines)
    message = body_lines[:diff_at] if diff_at is not None else body_lines
    message = strip_diffstat(message)
    subject = _SUBJECT_TAG.sub("", decode_header(headers.get("subject", ""))).strip()
    try:
        author, mail = email.utils.parseaddr(decode_header(headers.get("from", "")))
    except RecursionError:  # deeply nested (comments) make the stdlib parser recurse without end
        raise UserError("unreadable From: header (nested too deeply)", where) from None
    body_text = "\n".join(message).strip("\n")
    commit = Commit(
        sha=sha,
        author=author or None,
        email=mail or None,
        date=headers.get("date"),
        subject=subject,
        body=body_text,
        trailers=parse_trailers(body_text),
        source=where,
    )
    files: list[FilePatch] = []
    if diff_at is not None:
        files = parse_diff(body_lines[diff_at:], name, offset + body_start + diff_at)
    return Patch(commit=commit, files=files, source=name)


def _diff_start(lines: list[str]) -> int | None:
    for i, line in enumerate(lines):
        if line.startswith("diff --git ") or line.startswith("Index: "):
            return i
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            return i
    return None


# --------------------------------------------------------------------------- diffs


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
