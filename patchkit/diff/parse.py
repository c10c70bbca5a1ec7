"""Replay files (format-patch mboxes, plain ``git diff`` / ``diff -u`` files) → ``model.Replay``.

Every malformed input ends in a ``UserError`` naming the file and line.
"""

from __future__ import annotations

import base64
import email.header
import email.utils
import quopri
import re
from pathlib import Path

from patchkit.diff.model import Commit, FilePatch, Hunk, Patch, Replay, Trailer
from patchkit.errors import UserError

NAME_MAX = 255  # bytes per path component (every common file system)

_FROM_GIT = re.compile(r"^From ([0-9a-f]{40}) Mon Sep 17 00:00:00 2001$")
_GIT_LOG = re.compile(r"^commit ([0-9a-f]{40})(?: \(.*\))?$")
_FROM_MBOX = re.compile(r"^From \S+ +\w{3} \w{3} +\d+ [\d:]+ \d{4}$")
# at most 18 digits: a longer count is malformed, not a reason to crash int()
_HUNK = re.compile(r"^@@ -(\d{1,18})(?:,(\d{1,18}))? \+(\d{1,18})(?:,(\d{1,18}))? @@ ?(.*)$")
_SUBJECT_TAG = re.compile(r"^\s*(\[[^\]]*\b(?:PATCH|RFC)\b[^\]]*\]\s*)+")  # like `git am -b`: keep [Misc]
_TRAILER = re.compile(r"^([A-Za-z][A-Za-z0-9-]*[A-Za-z0-9]):[ \t]*(\S.*)$")
_DIFF_GIT = re.compile(r"^diff --git (.+)$")
_EXT_HEADERS = (
    "old mode ", "new mode ", "deleted file mode ", "new file mode ", "similarity index ",
    "dissimilarity index ", "rename from ", "rename to ", "copy from ", "copy to ", "index ",
)  # fmt: skip


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
        if (_FROM_GIT.match(line) or _FROM_MBOX.match(line)) and (i == 0 or lines[i - 1] == ""):
            starts.append(i)
    # A mail without the mbox "From " line (git format-patch piped through a mailer).
    if not starts and lines and lines[0].startswith(("From: ", "Subject: ", "Date: ")):
        return [0]
    return starts


def _parse_message(lines: list[str], name: str, offset: int) -> Patch:
    where = f"{name}:{offset + 1}"
    sha = None
    first = _FROM_GIT.match(lines[0]) if lines else None
    if first:
        sha = first.group(1)
    i = 1 if lines and (first or _FROM_MBOX.match(lines[0])) else 0
    headers: dict[str, str] = {}
    last_key = None
    while i < len(lines) and lines[i] != "":
        line = lines[i]
        if line[:1] in (" ", "\t") and last_key:
            headers[last_key] += " " + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            last_key = key.strip().lower()
            headers[last_key] = value.strip()
        else:
            raise UserError(f"malformed mail header line {line[:60]!r}", f"{name}:{offset + i + 1}")
        i += 1
    if "from" not in headers and "subject" not in headers:
        raise UserError("mail has neither From: nor Subject: header", where)
    body_start = i + 1
    body_lines = _decode_body(lines[body_start:], headers, name, offset + body_start)
    diff_at = _diff_start(body_lines)
    message = body_lines[:diff_at] if diff_at is not None else body_lines
    message = _strip_diffstat(message)
    subject = _SUBJECT_TAG.sub("", _decode_header(headers.get("subject", ""))).strip()
    try:
        author, mail = email.utils.parseaddr(_decode_header(headers.get("from", "")))
    except RecursionError:  # deeply nested (comments) make the stdlib parser recurse without end
        raise UserError("unreadable From: header (nested too deeply)", where) from None
    body_text = "\n".join(message).strip("\n")
    trailers = parse_trailers(body_text)
    commit = Commit(
        sha=sha,
        author=author or None,
        email=mail or None,
        date=headers.get("date"),
        subject=subject,
        body=body_text,
        trailers=trailers,
        source=where,
    )
    files: list[FilePatch] = []
    if diff_at is not None:
        files = parse_diff(body_lines[diff_at:], name, offset + body_start + diff_at)
    return Patch(commit=commit, files=files, source=name)


def _decode_header(value: str) -> str:
    """RFC 2047 words decoded; raw bytes that are not UTF-8 (kept as surrogates when the file was
    read) become U+FFFD, so a name can always be printed and written."""
    value = value.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")
    parts = []
    for chunk, charset in email.header.decode_header(value):
        if isinstance(chunk, bytes):
            try:
                parts.append(chunk.decode(charset or "utf-8", errors="replace"))
            except (LookupError, ValueError):  # an unknown charset, or a codec that is not text
                parts.append(chunk.decode("utf-8", errors="replace"))
        else:
            parts.append(chunk)
    return "".join(parts)


def _decode_body(lines: list[str], headers: dict[str, str], name: str, offset: int) -> list[str]:
    encoding = headers.get("content-transfer-encoding", "8bit").lower()
    if encoding in ("7bit", "8bit", "binary"):
        return lines
    raw = "\n".join(lines).encode("utf-8", errors="surrogateescape")
    try:
        data = quopri.decodestring(raw) if encoding == "quoted-printable" else base64.b64decode(raw)
    except ValueError as exc:
        raise UserError(f"cannot decode {encoding} body: {exc}", f"{name}:{offset + 1}") from exc
    if encoding not in ("quoted-printable", "base64"):
        raise UserError(f"unknown Content-Transfer-Encoding {encoding!r}", f"{name}:{offset}")
    return data.decode("utf-8", errors="surrogateescape").split("\n")


def _diff_start(lines: list[str]) -> int | None:
    for i, line in enumerate(lines):
        if line.startswith("diff --git ") or line.startswith("Index: "):
            return i
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            return i
    return None


def _strip_diffstat(lines: list[str]) -> list[str]:
    """Drop everything from the ``---`` separator that format-patch puts before the diffstat."""
    for i in range(len(lines) - 1, -1, -1):
        if lines[i] == "---":
            return lines[:i]
    return lines


def parse_trailers(body: str) -> list[Trailer]:
    """Trailers of the last paragraph (folded continuation lines joined), as git interpret-trailers."""
    paragraphs = [p for p in re.split(r"\n\s*\n", body.strip()) if p.strip()]
    if not paragraphs:
        return []
    trailers: list[Trailer] = []
    for line in paragraphs[-1].split("\n"):
        if line[:1] in (" ", "\t") and trailers:
            trailers[-1].value += " " + line.strip()
            continue
        match = _TRAILER.match(line)
        if not match:
            return []  # a paragraph with a non-trailer line is prose, not a trailer block
        trailers.append(Trailer(key=match.group(1), value=match.group(2).strip()))
    return trailers


# --------------------------------------------------------------------------- diffs


def parse_diff(lines: list[str], name: str, offset: int = 0) -> list[FilePatch]:
    """Parse the diff part of a patch; ``offset`` is the 0-based line index of lines[0] in the file."""
    files: list[FilePatch] = []
    current: FilePatch | None = None
    i = 0
    n = len(lines)
    while i < n:
        line = lines[i]
        where = f"{name}:{offset + i + 1}"
        git = _DIFF_GIT.match(line)
        if git:
            current = _start_git_file(git.group(1), where)
            files.append(current)
            i = _read_git_headers(lines, i + 1, current, name, offset)
            continue
        if line.startswith("--- ") and i + 1 < n and lines[i + 1].startswith("+++ "):
            current = FilePatch(old_path=None, new_path=None, source=where)
            files.append(current)
            current.old_path = _header_path(line[4:], where)
            current.new_path = _header_path(lines[i + 1][4:], where)
            if current.old_path is None and current.new_path is None:
                raise UserError("both sides of the diff are /dev/null", where)
            i += 2
            continue
        if line.startswith("@@"):
            if current is None or not (current.old_path or current.new_path):
                raise UserError("hunk before any file header", where)
            hunk, i = _read_hunk(lines, i, name, offset)
            current.hunks.append(hunk)
            continue
        if line[:1] in ("+", "-", " ") and current is not None and current.hunks and line != "-- ":
            raise UserError(f"line after a hunk that its header did not count: {line[:60]!r}", where)
        i += 1  # prose, diffstat, "-- " signature: not part of any file
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
    return fp.is_new or fp.is_deleted or fp.is_rename or fp.old_mode != fp.new_mode


def _start_git_file(rest: str, where: str) -> FilePatch:
    old, new = _split_git_paths(rest, where)
    return FilePatch(old_path=old, new_path=new, source=where)


def _split_git_paths(rest: str, where: str) -> tuple[str, str]:
    if rest.startswith('"'):
        old, tail = _unquote(rest, where)
        new = _unquote(tail.lstrip(), where)[0] if tail.lstrip().startswith('"') else tail.lstrip()
        return _strip_prefix(old), _strip_prefix(new)
    # "a/x b/x": both sides equal unless renamed (then rename headers correct them).
    half = (len(rest) - 1) // 2
    if rest[half] == " " and rest[:half][2:] == rest[half + 1 :][2:]:
        return _strip_prefix(rest[:half]), _strip_prefix(rest[half + 1 :])
    parts = rest.split(" b/", 1)
    if len(parts) != 2:
        raise UserError(f"cannot read paths of 'diff --git {rest[:80]}'", where)
    return _strip_prefix(parts[0]), parts[1]


def _strip_prefix(path: str) -> str:
    return path[2:] if path[:2] in ("a/", "b/") else path


def _unquote(text: str, where: str) -> tuple[str, str]:
    """Read a C-quoted git path at the start of ``text``; return it and the rest."""
    out = bytearray()
    i = 1
    escapes = {"n": 10, "t": 9, '"': 34, "\\": 92, "a": 7, "b": 8, "f": 12, "r": 13, "v": 11}
    while i < len(text):
        ch = text[i]
        if ch == '"':
            return out.decode("utf-8", errors="surrogateescape"), text[i + 1 :]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in escapes:
                out.append(escapes[nxt])
                i += 2
                continue
            if re.match(r"[0-3][0-7]{2}", text[i + 1 : i + 4]):  # one byte: \000 to \377
                out.append(int(text[i + 1 : i + 4], 8))
                i += 4
                continue
        out.extend(ch.encode("utf-8", errors="surrogateescape"))
        i += 1
    raise UserError("unterminated quoted path", where)


def _header_path(value: str, where: str) -> str | None:
    value = value.split("\t", 1)[0].rstrip()
    if value == "/dev/null":
        return None
    if value.startswith('"'):
        value = _unquote(value, where)[0]
    if value[:2] in ("a/", "b/"):
        return value[2:]
    # diff -u output: strip one leading component like ``patch -p1`` when there is one.
    return value.split("/", 1)[1] if "/" in value else value


def _read_git_headers(lines: list[str], i: int, fp: FilePatch, name: str, offset: int) -> int:
    n = len(lines)
    while i < n:
        line = lines[i]
        where = f"{name}:{offset + i + 1}"
        if line.startswith("old mode "):
            fp.old_mode = line[9:].strip()
        elif line.startswith("new mode "):
            fp.new_mode = line[9:].strip()
        elif line.startswith("deleted file mode "):
            fp.old_mode, fp.new_path = line[18:].strip(), None
        elif line.startswith("new file mode "):
            fp.new_mode, fp.old_path = line[14:].strip(), None
        elif line.startswith(("similarity index ", "dissimilarity index ")):
            digits = re.sub(r"\D", "", line)
            if len(digits) > 9:
                raise UserError(f"malformed similarity line {line[:60]!r}", where)
            fp.similarity = int(digits or 0)
        elif line.startswith(("rename from ", "copy from ")):
            fp.old_path = line.split(" from ", 1)[1]
        elif line.startswith(("rename to ", "copy to ")):
            fp.new_path = line.split(" to ", 1)[1]
        elif line.startswith("index "):
            _read_index(line, fp, where)
        elif line.startswith("Binary files ") or line == "GIT binary patch":
            fp.binary = True
            i = _skip_binary(lines, i + 1) if line == "GIT binary patch" else i + 1
            continue
        elif line.startswith("--- "):
            if i + 1 >= n or not lines[i + 1].startswith("+++ "):
                raise UserError("'---' header without '+++' after it", where)
            old = _header_path(line[4:], where)
            new = _header_path(lines[i + 1][4:], where)
            fp.old_path = old if old is not None or fp.old_path is None else None
            fp.new_path = new if new is not None or fp.new_path is None else None
            return i + 2
        else:
            return i
        i += 1
    return i


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
