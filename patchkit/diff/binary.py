"""``GIT binary patch`` hunks (``git diff --binary``): base85 lines of zlib data, a literal or a delta.

Applied only as git does: with a full ``index`` line whose preimage is exactly the file, and a
result whose blob id is the postimage the line names.
"""

from __future__ import annotations

import base64
import zlib

from patchkit import git

_LENGTHS = {c: i + 1 for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZ")} | {
    c: i + 27 for i, c in enumerate("abcdefghijklmnopqrstuvwxyz")
}


class BinaryRefused(ValueError):
    pass


def decode(lines: list[str]) -> tuple[str, bytes]:
    """('literal' | 'delta', inflated bytes) of a forward binary hunk's lines."""
    if not lines:
        raise BinaryRefused("binary patch without data")
    kind, _, size = lines[0].partition(" ")
    if kind not in ("literal", "delta") or not size.isdigit():
        raise BinaryRefused(f"malformed binary hunk header {lines[0][:40]!r}")
    raw = bytearray()
    for line in lines[1:]:
        length = _LENGTHS.get(line[:1])
        if length is None or (len(line) - 1) % 5:
            raise BinaryRefused(f"malformed binary patch line {line[:40]!r}")
        try:
            raw += base64.b85decode(line[1:])[:length]
        except ValueError as exc:
            raise BinaryRefused(f"malformed binary patch line: {exc}") from None
    try:
        data = zlib.decompress(bytes(raw))
    except zlib.error as exc:
        raise BinaryRefused(f"corrupt binary patch: {exc}") from None
    if len(data) != int(size):
        raise BinaryRefused(f"binary patch inflates to {len(data)} bytes, not {size}")
    return kind, data


def apply_binary(old: bytes | None, lines: list[str], old_blob: str | None, new_blob: str | None) -> bytes:
    """The postimage of a binary hunk on ``old``; refused without full index ids that match."""
    if any(blob is not None and len(blob) != 40 for blob in (old_blob, new_blob)) or old_blob == new_blob:
        raise BinaryRefused("cannot apply a binary patch without a full index line")
    if old_blob is not None and (old is None or git.blob_id(old) != old_blob):
        raise BinaryRefused(f"binary preimage is not the blob {old_blob[:12]} the patch names")
    kind, data = decode(lines)
    new = data if kind == "literal" else _apply_delta(old or b"", data)
    if git.blob_id(new) != (new_blob or git.blob_id(b"")):
        raise BinaryRefused(f"binary result is not the blob {(new_blob or '')[:12]} the patch names")
    return new


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, i


def _apply_delta(src: bytes, delta: bytes) -> bytes:
    try:
        size, i = _varint(delta, 0)
        if size != len(src):
            raise BinaryRefused("binary delta was made for another preimage")
        target, i = _varint(delta, i)
        out = bytearray()
        while i < len(delta):
            cmd = delta[i]
            i += 1
            if cmd & 0x80:  # copy from the source: offset and size bytes as the flags say
                offset = length = 0
                for bit in range(4):
                    if cmd & (1 << bit):
                        offset |= delta[i] << (8 * bit)
                        i += 1
                for bit in range(3):
                    if cmd & (0x10 << bit):
                        length |= delta[i] << (8 * bit)
                        i += 1
                out += src[offset : offset + (length or 0x10000)]
            elif cmd:  # insert the next cmd bytes
                out += delta[i : i + cmd]
                i += cmd
            else:
                raise BinaryRefused("binary delta holds a reserved opcode")
    except IndexError:
        raise BinaryRefused("binary delta is truncated") from None
    if len(out) != target:
        raise BinaryRefused("binary delta gives a result of the wrong size")
    return bytes(out)
