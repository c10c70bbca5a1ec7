"""File names in diff headers, read the way ``git apply`` reads them (apply.c's find_name family).

C-quoted names, ``a/ b/`` and any other src/dst prefix (mnemonic ``c/ i/ w/ o/``, ``--no-prefix``,
custom ``--src-prefix``), trailing timestamps of ``diff -u`` (after a tab or spaces) and the epoch
timestamp that marks a creation or deletion in a traditional diff.
"""

from __future__ import annotations

import re

from patchkit.errors import UserError

_ESCAPES = {"n": 10, "t": 9, '"': 34, "\\": 92, "a": 7, "b": 8, "f": 12, "r": 13, "v": 11}
# date [time[.frac]] [zone], as diff_timestamp_len accepts it
_TIMESTAMP = re.compile(
    r"(?:\t|\s+)(?:\d\d)?\d\d-\d\d-\d\d(?: \d\d:\d\d:\d\d(?:\.\d+)?)?(?: [+-]\d\d:?\d\d)?$"
)
_EPOCH = re.compile(r"^(1969-12-31|1970-01-01) ([0-2]\d):([0-5]\d):00(?:\.0+)? ([-+])([0-2]\d):?([0-5]\d)$")


def unquote(text: str, where: str) -> tuple[str, str]:
    """Read a C-quoted name at the start of ``text``; return it and the rest."""
    out = bytearray()
    i = 1
    while i < len(text):
        ch = text[i]
        if ch == '"':
            return out.decode("utf-8", errors="surrogateescape"), text[i + 1 :]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
                continue
            if re.match(r"[0-3][0-7]{2}", text[i + 1 : i + 4]):  # one byte: \000 to \377
                out.append(int(text[i + 1 : i + 4], 8))
                i += 4
                continue
            raise UserError(f"bad escape in quoted name {text[:60]!r}", where)
        out.extend(ch.encode("utf-8", errors="surrogateescape"))
        i += 1
    raise UserError("unterminated quoted name", where)


def squash_slashes(name: str) -> str:
    return re.sub("/{2,}", "/", name)


def git_header_names(rest: str, where: str) -> tuple[str | None, str | None]:
    """The two names of ``diff --git OLD NEW`` with their prefixes; (None, None) when they cannot
    be told apart (a rename of an unquoted name with spaces: the rename lines then say)."""
    if rest.startswith('"'):
        old, tail = unquote(rest, where)
        tail = tail.lstrip(" ")
        new = unquote(tail, where)[0] if tail.startswith('"') else tail
        return old, new
    if rest.endswith('"') and ' "' in rest:
        cut = rest.index(' "')
        return rest[:cut], unquote(rest[cut + 1 :], where)[0]
    half = (len(rest) - 1) // 2
    if len(rest) % 2 == 1 and rest[half] == " ":
        old, new = rest[:half], rest[half + 1 :]
        if old == new or prefix_pair(old, new) is not None:
            return old, new
    for cut in (m.start() for m in re.finditer(" ", rest)):
        old, new = rest[:cut], rest[cut + 1 :]
        if prefix_pair(old, new) is not None:
            return old, new
    return None, None


def prefix_pair(old: str, new: str) -> tuple[str, str] | None:
    """The shortest (src, dst) prefixes, each ending in '/', after which ``old`` and ``new`` agree."""
    for k in (m.end() for m in re.finditer("/", old)):  # like -p1: through the first slash only
        rest = old[k:]
        if not rest or len(rest) >= len(new):
            continue
        head = new[: len(new) - len(rest)]
        if new.endswith(rest) and head.endswith("/") and head.strip("/"):
            return old[:k], head
    return None


def strip_components(name: str, p: int) -> str | None:
    """``name`` without its first ``p`` components (None when it has fewer)."""
    for _ in range(p):
        cut = name.find("/")
        if cut < 0:
            return None
        name = name[cut + 1 :]  # "a//etc/x" stays absolute: the path check refuses it
    return squash_slashes(name) or None


def traditional_name(value: str, where: str) -> tuple[str | None, bool]:
    """A ``---``/``+++`` value of a traditional diff: (name or None for /dev/null, epoch stamp)."""
    if value.startswith('"'):
        name, rest = unquote(value, where)
        return name, is_epoch(rest)
    stamp = _TIMESTAMP.search(value)
    name = value[: stamp.start()] if stamp else value.split("\t", 1)[0]
    if name == "/dev/null":
        return None, False
    return name, is_epoch(value[len(name) :])


def is_epoch(stamp: str) -> bool:
    """Whether a timestamp (after a tab, as git requires) is the Unix epoch in its own zone."""
    if not stamp.startswith("\t"):
        return False
    match = _EPOCH.match(stamp[1:].strip())
    if not match:
        return False
    day, hour, minute, sign, zh, zm = match.groups()
    zone = (int(zh) * 60 + int(zm)) * (1 if sign == "+" else -1)
    epoch = 24 * 60 if day == "1969-12-31" else 0
    return int(hour) * 60 + int(minute) - zone == epoch


def guess_strip(old: str | None, new: str | None) -> int | None:
    """``git apply``'s guess for a traditional diff: 0 when neither name has a directory."""
    names = [n for n in (old, new) if n is not None]
    if names and all("/" not in n for n in names):
        return 0
    return None
