"""Mutations of real inputs: byte flips, line edits, truncation, splicing, unicode, huge numbers,
line-ending changes, tokens each parser cares about, and wrong-typed JSON values."""

from __future__ import annotations

import json
import random
import re

TOKENS = [
    b"@@ -1,3 +1,4 @@", b"@@ -0,0 +1 @@", b"@@ -99999999999999999999 +1 @@", b"@@ -1 +1 @@ x",
    b"diff --git a/x b/x", b'diff --git "a/\\303\\251" "b/x', b"--- /dev/null", b"+++ /dev/null",
    b"--- a/../../etc/passwd", b"+++ b//etc/passwd", b"\\ No newline at end of file", b"index 0..0",
    b"index abc..def 100644", b"GIT binary patch", b"similarity index 999%", b"rename from ",
    b"new file mode ", b"deleted file mode 100644", b"old mode 1", b"From: ", b"Subject: ",
    b"Content-Transfer-Encoding: base64", b"Content-Transfer-Encoding: quoted-printable",
    b"Content-Transfer-Encoding: x-uue", b"=?utf-8?b?w6k=?=", b"=?x-unknown?q?a?=", b"=?utf-8?q?=FF?=",
    b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001", b"-- ", b"---",
    b"Signed-off-by: A <a@b>", b"[[domain]]", b"[[domain.match]]", b"[target]", b"[series]",
    b"[audit]", b"fallback = true", b'paths = ["**"]', b"patterns = ['(']", b"patterns = ['a{99999999999}']",
    b'name = "x"', b"title = {}", b"jobs = -1", b"jobs = 99999999999999999999", b"test_timeout = nan",
    b"test_timeout = inf", b'python = "~nouser/bin/python"', b'dir = "~nosuchuser"', b'dir = "\\u0000"',
    b"source = \"git\"", b'url = "../x"', b"../", b"/etc/passwd", b"a\\b", b"\x00", b"\xff\xfe",
    b'{"a": [', b"null", b"[]", b"{}", b"1e999", b"-0", b"true", b'"\\ud800"', b"a" * 300,
]  # fmt: skip
_UNICODE = ["\u00e9", "\u4e2d\u6587", "\U0001f600", "\u202e", "\ufeff", "\u0000", "\u2028", "\u0301"]
_NUMBER = re.compile(rb"\d+")
_HUGE = [b"9" * 5000, b"18446744073709551616", b"0", b"-1", b"99999999999", b"1e309"]


def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _flip(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    if not data:
        return bytes([rng.randrange(256)])
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
    return bytes(buf)


def _random_byte(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    at = rng.randint(0, len(data))
    return data[:at] + bytes([rng.randrange(256)]) + data[at:]


def _delete_lines(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    lines = _lines(data)
    at = rng.randrange(len(lines))
    del lines[at : at + rng.randint(1, 3)]
    return b"\n".join(lines)


def _duplicate_line(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    lines = _lines(data)
    at = rng.randrange(len(lines))
    lines[at:at] = [lines[at]] * rng.randint(1, 3)
    return b"\n".join(lines)


def _swap_lines(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    lines = _lines(data)
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


def _truncate(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    return data[: rng.randint(0, len(data))]


def _splice(rng: random.Random, data: bytes, pool: list[bytes]) -> bytes:
    other = rng.choice(pool)
    return data[: rng.randint(0, len(data))] + other[rng.randint(0, len(other)) :]


def _splice_lines(rng: random.Random, data: bytes, pool: list[bytes]) -> bytes:
    lines, other = _lines(data), _lines(rng.choice(pool))
    at = rng.randint(0, len(lines))
    start = rng.randrange(len(other))
    lines[at:at] = other[start : start + rng.randint(1, 6)]
    return b"\n".join(lines)


def _unicode(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    text = rng.choice(_UNICODE) if rng.random() < 0.6 else chr(rng.randrange(0x20, 0x10FFFF))
    at = rng.randint(0, len(data))
    return data[:at] + text.encode("utf-8", errors="surrogatepass") + data[at:]


def _huge_number(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    spans = [m.span() for m in _NUMBER.finditer(data)]
    if not spans:
        return data + rng.choice(_HUGE)
    start, end = rng.choice(spans)
    return data[:start] + rng.choice(_HUGE) + data[end:]


def _line_endings(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    choice = rng.randrange(3)
    if choice == 0:
        return data.replace(b"\n", b"\r\n")
    if choice == 1:
        lines = _lines(data)
        at = rng.randrange(len(lines))
        lines[at] += b"\r"
        return b"\n".join(lines)
    return data.replace(b"\n", b"\r")


def _token(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    token = rng.choice(TOKENS)
    if rng.random() < 0.5:  # a line of its own
        lines = _lines(data)
        lines.insert(rng.randint(0, len(lines)), token)
        return b"\n".join(lines)
    at = rng.randint(0, len(data))
    return data[:at] + token + data[at:]


def _deep_nesting(rng: random.Random, data: bytes, _: list[bytes]) -> bytes:
    depth = rng.choice([50, 2000, 20000])
    open_, close = rng.choice([(b"[", b"]"), (b"{", b"}"), (b"(", b")")])
    at = rng.randint(0, len(data))
    return data[:at] + open_ * depth + close * depth * rng.randint(0, 1) + data[at:]


BYTE_MUTATORS = [
    _flip, _random_byte, _delete_lines, _duplicate_line, _swap_lines, _truncate, _splice,
    _splice_lines, _unicode, _huge_number, _line_endings, _token, _deep_nesting,
]  # fmt: skip

_WRONG_VALUES = [None, True, 0, -1, 2**70, 1.5, float("nan"), "", "x", "<script>", [], [1], {}, {"x": 1},
                 ["a", "b"], [{}], [None], {"en": 1}]  # fmt: skip


def _mutate_json_value(rng: random.Random, value: object, depth: int = 0) -> object:
    """Replace one random node of a JSON document with a value of (probably) the wrong type."""
    if depth > 12 or rng.random() < 0.15 or not isinstance(value, (dict, list)) or not value:
        return rng.choice(_WRONG_VALUES)
    if isinstance(value, list):
        out = list(value)
        at = rng.randrange(len(out))
        if rng.random() < 0.1:
            del out[at]
        else:
            out[at] = _mutate_json_value(rng, out[at], depth + 1)
        return out
    out = dict(value)
    key = rng.choice(list(out))
    roll = rng.random()
    if roll < 0.1:
        del out[key]
    elif roll < 0.15:
        out[key + "_x"] = rng.choice(_WRONG_VALUES)
    else:
        out[key] = _mutate_json_value(rng, out[key], depth + 1)
    return out


def mutate(rng: random.Random, seed: bytes, pool: list[bytes]) -> bytes:
    """1–5 stacked mutations of ``seed``; JSON seeds get structure-aware mutations half the time."""
    if seed.lstrip()[:1] in (b"{", b"[") and rng.random() < 0.5:
        try:
            doc = json.loads(seed)
        except (ValueError, RecursionError):
            doc = None
        if doc is not None:
            for _ in range(rng.randint(1, 3)):
                doc = _mutate_json_value(rng, doc)
            return json.dumps(doc, ensure_ascii=rng.random() < 0.5).encode("utf-8", errors="surrogatepass")
    data = seed
    for _ in range(rng.randint(1, 5)):
        data = rng.choice(BYTE_MUTATORS)(rng, data, pool)
        if len(data) > 200_000:
            data = data[:200_000]
    return data
