"""The mail around a patch: headers (RFC 2047), body encodings, MIME parts, the ``---`` cut, trailers."""

from __future__ import annotations

import re

from patchkit.diff.model import Trailer
from patchkit.diff.trailers import git_trailers
from patchkit.errors import UserError

_HEADER = re.compile(r"^[!-9;-~]+:")  # RFC 5322 field name, then a colon


def read_headers(lines: list[str], i: int, name: str, offset: int) -> tuple[dict[str, str], int]:
    """Mail headers from ``lines[i]`` on: (lower-cased name → value, index of the first body line).

    A blank line ends them; so does, after at least one header, a line that is no header (an
    IDE's export: ``Subject:`` then ``---`` at once), which then starts the body."""
    headers: dict[str, str] = {}
    last_key = None
    while i < len(lines) and lines[i] != "":
        line = lines[i]
        if line[:1] in (" ", "\t") and last_key:
            headers[last_key] += " " + line.strip()
        elif _HEADER.match(line):
            key, _, value = line.partition(":")
            last_key = key.strip().lower()
            headers[last_key] = value.strip()
        elif headers:
            return headers, i
        else:
            raise UserError(f"malformed mail header line {line[:60]!r}", f"{name}:{offset + i + 1}")
        i += 1
    return headers, i + 1


def decode_header(value: str) -> str:
    """RFC 2047 words decoded; raw bytes that are not UTF-8 (kept as surrogates when the file was
    read) become U+FFFD, so a name can always be printed and written."""
    value = value.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")
    if "=?" not in value:  # no encoded word: nothing to decode (and email.header stays unloaded)
        return value
    import email.header  # on first use: its import is ~5 ms of every command's start-up

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


# ``Name <user@host>`` with nothing email.utils would treat specially (quotes, comments, groups,
# routes): split here, identical to parseaddr (tests/test_parse.py checks it against the stdlib)
_PLAIN_ADDRESS = re.compile(r"([^\"<>()\[\]\\,;:@]*?)\s*<([^<>\s\"()\[\]\\,;:@]+@[^<>\s\"()\[\]\\,;:@]+)>")


def parse_address(value: str) -> tuple[str, str]:
    """(name, address) as ``email.utils.parseaddr`` gives them; the stdlib parser (and its ~10 ms
    import) only for the forms the plain pattern does not cover."""
    if plain := _PLAIN_ADDRESS.fullmatch(value.strip()):
        return " ".join(plain.group(1).split()), plain.group(2)
    import email.utils

    return email.utils.parseaddr(value)


def decode_body(lines: list[str], headers: dict[str, str], name: str, offset: int) -> list[str]:
    """The body as text lines: transfer encoding undone; a multipart mail (``format-patch
    --attach`` / ``--inline``) becomes its text parts one after the other."""
    if headers.get("content-type", "").lower().startswith("multipart/"):
        return _multipart_text(lines, headers, name, offset)
    encoding = headers.get("content-transfer-encoding", "8bit").lower()
    if encoding in ("7bit", "8bit", "binary"):
        return lines
    raw = "\n".join(lines).encode("utf-8", errors="surrogateescape")
    return _decoded(raw, encoding, f"{name}:{offset + 1}").split("\n")


def _decoded(raw: bytes, encoding: str, where: str) -> str:
    if encoding not in ("quoted-printable", "base64"):
        raise UserError(f"unknown Content-Transfer-Encoding {encoding!r}", where)
    try:
        import base64
        import quopri  # only an encoded body needs them

        data = quopri.decodestring(raw) if encoding == "quoted-printable" else base64.b64decode(raw)
    except ValueError as exc:
        raise UserError(f"cannot decode {encoding} body: {exc}", where) from exc
    return data.decode("utf-8", errors="surrogateescape")


def _multipart_text(lines: list[str], headers: dict[str, str], name: str, offset: int) -> list[str]:
    import email
    import email.policy  # on first use: ~5 ms of start-up that only MIME mails need

    head = f"Content-Type: {headers['content-type']}\nMIME-Version: 1.0\n\n"
    raw = (head + "\n".join(lines)).encode("utf-8", errors="surrogateescape")
    message = email.message_from_bytes(raw, policy=email.policy.compat32)
    texts = []
    for part in message.walk():
        if part.is_multipart():
            continue
        if part.get_content_maintype() != "text":
            kind = part.get_content_type()
            raise UserError(f"MIME part of type {kind} is not text", f"{name}:{offset + 1}")
        payload = part.get_payload(decode=True) or b""
        texts.append(payload.decode("utf-8", errors="surrogateescape"))
    if not texts:
        raise UserError("multipart mail without a text part", f"{name}:{offset + 1}")
    return "\n".join(t if t.endswith("\n") else t + "\n" for t in texts).split("\n")


def strip_diffstat(lines: list[str]) -> list[str]:
    """Drop everything from the ``---`` separator that format-patch puts before the diffstat."""
    for i in range(len(lines) - 1, -1, -1):
        if lines[i] == "---":
            return lines[:i]
    return lines


def parse_trailers(message: str) -> list[Trailer]:
    """The trailers of a commit message (title paragraph first) as git reads them (``diff/trailers``)."""
    return git_trailers(message)
