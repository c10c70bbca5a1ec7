"""A wheel's zip: read its members (names checked, compressed streams as they are), write a new one
that comes out byte for byte the same on every run.

The writer fixes everything ``zipfile`` would take from the machine or the clock: one timestamp for
every member, modes 0644 / 0755 only, Unix as the creating system, no extra fields, deflate level 6
(window 15, memory level 8) for the members it compresses. A member taken unchanged from the source
wheel is copied as its compressed stream (no recompression: the same bytes, and a 336 MB wheel is
not deflated again) while its content is inflated once to hash it and check its CRC and size. No
ZIP64: a wheel over 4 GiB or 65,535 members is refused.
"""

from __future__ import annotations

import hashlib
import stat
import struct
import time
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import BinaryIO

from patchkit.errors import UserError

CHUNK = 1 << 20
DEFLATE = (6, zlib.DEFLATED, -15, 8)  # level, method, raw deflate window, memory level
_LOCAL = struct.Struct("<IHHHHHIIIHH")
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
_END = struct.Struct("<IHHHHIIH")
_UTF8 = 0x800
_LIMIT = 0xFFFFFFFF
MADE_BY = (3 << 8) | 20  # Unix, zip spec 2.0
NEEDED = 20
DOS_EPOCH = 315532800  # 1980-01-01T00:00:00Z, the earliest time a zip can hold
DOS_LAST = 4354819198  # 2107-12-31T23:59:58Z, the latest
SMALL_LIMIT = 64 << 20  # a .dist-info text read whole (vLLM's RECORD: 0.6 MB); more is a zip bomb


@dataclass(frozen=True)
class Hashed:
    """What RECORD needs of a member: the sha256 digest of its content and its size."""

    digest: bytes
    size: int


def open_wheel(path: str, where: str | None = None) -> zipfile.ZipFile:
    """The wheel as a ZipFile; UserError when it is not a zip or a member name could leave the
    directory it unpacks into, repeats, or is encrypted."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise UserError(f"not a readable wheel: {exc}", where or str(path)) from None
    seen: set[str] = set()
    for info in archive.infolist():
        name = info.filename
        parts = PurePosixPath(name).parts
        if not name or name.startswith("/") or "\\" in name or "\0" in name or ".." in parts:
            raise UserError(f"member {name!r} would unpack outside the wheel's root", where or str(path))
        if name in seen:
            raise UserError(f"member {name!r} appears twice", where or str(path))
        if info.flag_bits & 0x1:
            raise UserError(f"member {name!r} is encrypted", where or str(path))
        seen.add(name)
    return archive


def read_small(archive: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> bytes:
    """A metadata member read whole; UserError when it declares more than ``SMALL_LIMIT`` (a few
    kilobytes deflated to gigabytes would fill the memory; ``zipfile`` reads no more than declared)."""
    if info.file_size > SMALL_LIMIT:
        raise UserError(
            f"member {info.filename!r} declares {info.file_size:,} bytes, more than the "
            f"{SMALL_LIMIT >> 20} MiB a wheel's metadata file may hold",
            where,
        )
    return archive.read(info)


def files_of(archive: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    """The file members (directory entries are not files: RECORD never lists them)."""
    return [info for info in archive.infolist() if not info.is_dir()]


def member_mode(info: zipfile.ZipInfo) -> int:
    """0755 for a member with an executable bit, else 0644 (as ``git apply`` gives a mode)."""
    return 0o755 if (info.external_attr >> 16) & 0o111 else 0o644


def dos_date_time(date_time: tuple[int, ...]) -> tuple[int, int]:
    year, month, day, hour, minute, second = date_time[:6]
    return (year - 1980) << 9 | month << 5 | day, hour << 11 | minute << 5 | second // 2


def epoch_date_time(epoch: int) -> tuple[int, ...]:
    """SOURCE_DATE_EPOCH as a zip timestamp (UTC, as reproducible builds read it), clamped to 1980."""
    return tuple(time.gmtime(max(epoch, DOS_EPOCH))[:6])


def stray_bytes(source: BinaryIO, archive: zipfile.ZipFile) -> tuple[int, int] | None:
    """(offset, count) of the first bytes of the file that belong to no member (a prefix, a gap
    between members, an extra field, a comment, trailing bytes: what ``ZipWriter`` never writes and
    a reader skips, so a wheel that verifies can carry nothing else); None when there are none."""
    end = source.seek(0, 2)
    source.seek(max(end - _END.size - 0xFFFF - CHUNK, 0))
    tail = source.read()
    at = end - len(tail) + tail.rfind(b"PK\x05\x06")
    if at < end - len(tail) or at + _END.size > end:
        return (0, end)  # no end record (zipfile found one: it cannot get here)
    if at + _END.size != end:
        return (at + _END.size, end - at - _END.size)  # a comment or bytes after the end record
    size, stored_start = _END.unpack(tail[-_END.size :])[5:7]
    offset = 0
    for info in sorted(archive.infolist(), key=lambda i: i.header_offset):
        if info.header_offset != offset:
            return (offset, abs(info.header_offset - offset))
        source.seek(offset)
        header = source.read(_LOCAL.size)
        if len(header) != _LOCAL.size:
            return (offset, len(header))
        name_len, extra_len = _LOCAL.unpack(header)[-2:]
        if extra_len or info.extra or info.comment or info.flag_bits & 0x8:
            return (offset + _LOCAL.size + name_len, extra_len or len(info.extra) or len(info.comment))
        offset += _LOCAL.size + name_len + info.compress_size
    if offset != stored_start or stored_start + size != end - _END.size:
        return (offset, abs(stored_start - offset) or abs(end - _END.size - stored_start - size))
    return None


def raw_chunks(source: BinaryIO, info: zipfile.ZipInfo) -> Iterator[bytes]:
    """The member's compressed bytes as stored, read after its local header."""
    source.seek(info.header_offset)
    header = source.read(_LOCAL.size)
    if len(header) != _LOCAL.size or _LOCAL.unpack(header)[0] != 0x04034B50:
        raise UserError(f"member {info.filename!r}: no local file header at offset {info.header_offset}")
    name_len, extra_len = _LOCAL.unpack(header)[-2:]
    source.seek(info.header_offset + _LOCAL.size + name_len + extra_len)
    left = info.compress_size
    while left:
        chunk = source.read(min(CHUNK, left))
        if not chunk:
            raise UserError(f"member {info.filename!r}: the archive ends inside it")
        left -= len(chunk)
        yield chunk


class ZipWriter:
    """Writes members in the order given, then the central directory on ``close``."""

    def __init__(self, out: BinaryIO, date_time: tuple[int, ...]) -> None:
        self._out = out
        self._date, self._time = dos_date_time(date_time)
        self._central: list[bytes] = []
        self._offset = 0

    def add_bytes(self, name: str, data: bytes, mode: int) -> Hashed:
        packer = zlib.compressobj(*DEFLATE)
        compressed = packer.compress(data) + packer.flush()
        self._header(name, mode, zipfile.ZIP_DEFLATED, zlib.crc32(data), len(compressed), len(data))
        self._write(compressed)
        return Hashed(hashlib.sha256(data).digest(), len(data))

    def add_raw(self, name: str, mode: int, source: BinaryIO, info: zipfile.ZipInfo) -> Hashed:
        """Copy ``info``'s compressed stream from ``source``; its content must match its CRC and size."""
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise UserError(
                f"member {info.filename!r}: compression method {info.compress_type} is not stored or deflate"
            )
        self._header(name, mode, info.compress_type, info.CRC, info.compress_size, info.file_size)
        digest, crc, size = hashlib.sha256(), 0, 0
        unpack = zlib.decompressobj(-15) if info.compress_type == zipfile.ZIP_DEFLATED else None
        for chunk in raw_chunks(source, info):
            self._write(chunk)
            content = unpack.decompress(chunk) if unpack else chunk
            digest.update(content)
            crc, size = zlib.crc32(content, crc), size + len(content)
        if unpack is not None:
            tail = unpack.flush()
            digest.update(tail)
            crc, size = zlib.crc32(tail, crc), size + len(tail)
        if (crc, size) != (info.CRC, info.file_size):
            raise UserError(f"member {info.filename!r} of the source wheel is corrupt (CRC or size)")
        return Hashed(digest.digest(), size)

    def close(self) -> None:
        start = self._offset
        for entry in self._central:
            self._write(entry)
        size = self._offset - start
        count = len(self._central)
        if count > 0xFFFF or start > _LIMIT or size > _LIMIT:
            raise UserError("the wheel would need ZIP64 (over 65,535 members or 4 GiB): not supported")
        self._write(_END.pack(0x06054B50, 0, 0, count, count, size, start, 0))

    def _header(self, name: str, mode: int, method: int, crc: int, csize: int, size: int) -> None:
        encoded = name.encode("utf-8")
        flags = 0 if name.isascii() else _UTF8
        if self._offset > _LIMIT or csize > _LIMIT or size > _LIMIT:
            raise UserError(
                f"{name}: the wheel would need ZIP64 (a member or offset over 4 GiB): not supported"
            )
        fields = (NEEDED, flags, method, self._time, self._date, crc, csize, size, len(encoded))
        attributes = (stat.S_IFREG | mode) << 16
        self._central.append(
            _CENTRAL.pack(0x02014B50, MADE_BY, *fields, 0, 0, 0, 0, attributes, self._offset) + encoded
        )
        self._write(_LOCAL.pack(0x04034B50, *fields, 0) + encoded)

    def _write(self, data: bytes) -> None:
        self._out.write(data)
        self._offset += len(data)
