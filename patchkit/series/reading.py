"""Reading a series dir's files as hostile input: regular files only (a FIFO, a device such as a
link to /dev/zero, a directory refused without blocking), sizes capped before a byte is read, JSON
nesting bounded — each one UserError line (exit 2)."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

from patchkit.errors import UserError

MAX_SERIES_FILE = 1 << 20  # bytes: a series file of 20,000 long names
MAX_PATCH_FILE = 256 << 20  # bytes: ten times the largest real vendor patch seen
MAX_SPLIT_JSON = 256 << 20


def read_regular(path: Path, limit: int, what: str) -> bytes:
    """The bytes of a regular file (a link to one is fine) of at most ``limit`` bytes; a FIFO, a
    device (a link to /dev/zero), a directory or a larger file is one UserError line, read without
    blocking and never past the limit."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise UserError(f"cannot read the {what}: {exc.strerror}", str(path)) from None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"the {what} is not a regular file ({_kind(info.st_mode)})", str(path))
        if info.st_size > limit:  # said before a byte is read
            raise UserError(f"the {what} is larger than {limit >> 20} MiB; refused", str(path))
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise UserError(f"cannot read the {what}: {exc.strerror}", str(path)) from None
    if len(data) > limit:
        raise UserError(f"the {what} is larger than {limit >> 20} MiB; refused", str(path))
    return data


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
                       (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket")):  # fmt: skip
        if test(mode):
            return name
    return "not a file"


def load_json_capped(path: Path, limit: int, what: str) -> object:
    """JSON of a regular file within ``limit`` bytes; nesting past the interpreter's recursion limit
    (json's C parser stops there: 100,000 brackets are refused in microseconds) is one line."""
    data = read_regular(path, limit, what)
    try:
        return json.loads(data)
    except RecursionError:
        raise UserError(f"the {what} nests deeper than {sys.getrecursionlimit()} levels; refused",
                        str(path)) from None  # fmt: skip
    except ValueError as exc:
        raise UserError(f"the {what} is not JSON: {str(exc)[:80]}", str(path)) from None
