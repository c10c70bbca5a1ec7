"""Replay files (format-patch mboxes, plain ``git diff`` / ``diff -u`` files) → ``model.Replay``.

Every malformed input ends in a ``UserError`` naming the file and line.
"""

from __future__ import annotations

import re
from pathlib import Path

from patchkit.diff.filediff import parse_diff
from patchkit.diff.mail import (
    decode_body,
    decode_header,
    parse_address,
    parse_trailers,
    read_headers,
    strip_diffstat,
)
from patchkit.diff.model import Commit, FilePatch, Patch, Replay
from patchkit.errors import UserError

_FROM_GIT = re.compile(r"^From ([0-9a-f]{40}) Mon Sep 17 00:00:00 2001$")
_GIT_LOG = re.compile(r"^commit ([0-9a-f]{40})(?: \(.*\))?$")
_FROM_MBOX = re.compile(r"^From \S+ +\w{3} \w{3} +\d+ [\d:]+ \d{4}$")
# at most 18 digits: a longer count is malformed, not a reason to crash int()
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
    author, mail = parse_address(headers.get("author", ""))
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
        author, mail = parse_address(decode_header(headers.get("from", "")))
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
        trailers=parse_trailers(f"{subject}\n\n{body_text}"),  # the message git would store
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
