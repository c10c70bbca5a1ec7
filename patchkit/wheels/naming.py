"""The names a wheel carries, kept consistent: version (PEP 440, a local label from the series),
distribution name, ``.dist-info`` directory, wheel file name, METADATA's ``Name:``/``Version:``
lines, the version module vLLM bakes in at build time, and RECORD."""

from __future__ import annotations

import base64
import csv
import io
import re

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from patchkit.errors import CheckFailed, UserError

LOCAL_LABEL = "pk"
_NAME = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)
# what setuptools-scm / vcs-versioning write into <package>/_version.py (either order of the names)
_VERSION_LINE = re.compile(
    r"^(__version__ = version|version = __version__) = (['\"])(?P<v>[^'\"\n]*)\2$", re.M
)
_TUPLE_LINE = re.compile(
    r"^(__version_tuple__ = version_tuple|version_tuple = __version_tuple__) = \(.*\)$", re.M
)


def local_version(version: str, series_hash: str) -> str:
    """``0.33.0`` → ``0.33.0+pk.<8 hex>``; a version that has a local label keeps it (``+cu129.pk.…``)."""
    label = f"{LOCAL_LABEL}.{series_hash[:8]}"
    parsed = Version(version)
    return f"{parsed}.{label}" if parsed.local else f"{parsed}+{label}"


def checked_version(text: str) -> str:
    """``text`` as a normalised PEP 440 version; UserError when it is not one."""
    try:
        return str(Version(text))
    except InvalidVersion:
        raise UserError(f"--version {text!r} is not a PEP 440 version") from None


def checked_name(text: str) -> str:
    if not _NAME.match(text):
        raise UserError(f"--name {text!r} is not a valid distribution name (letters, digits, . _ -)")
    return text


def file_name_part(name: str) -> str:
    """The distribution name as wheel file names and ``.dist-info`` directories spell it."""
    return canonicalize_name(name).replace("-", "_")


def dist_info_dir(name: str, version: str) -> str:
    return f"{file_name_part(name)}-{version}.dist-info"


def wheel_filename(name: str, version: str, tags: str) -> str:
    """``tags`` is the source wheel's ``python-abi-platform`` part, kept as the index named it."""
    return f"{file_name_part(name)}-{version.replace('-', '_')}-{tags}.whl"


def filename_tags(filename: str) -> str:
    """``vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl`` → ``cp38-abi3-manylinux_2_28_x86_64``."""
    parts = filename[: -len(".whl")].split("-")
    return "-".join(parts[-3:])


def metadata_field(text: str, field: str) -> list[str]:
    """The values of a METADATA header field (only the header: the body is the description)."""
    head = text.split("\n\n", 1)[0]
    return [line.split(":", 1)[1].strip() for line in head.splitlines() if line.startswith(f"{field}:")]


def rewrite_metadata(text: str, name: str, version: str, where: str) -> str:
    """METADATA with its ``Name:`` and ``Version:`` lines replaced (each must occur exactly once)."""
    head, sep, body = text.partition("\n\n")
    lines = head.split("\n")
    for field, value in (("Name", name), ("Version", version)):
        found = [i for i, line in enumerate(lines) if line.startswith(f"{field}:")]
        if len(found) != 1:
            raise CheckFailed(f"METADATA has {len(found)} '{field}:' lines, expected one", where)
        ending = "\r" if lines[found[0]].endswith("\r") else ""
        lines[found[0]] = f"{field}: {value}{ending}"
    return "\n".join(lines) + sep + body


def version_tuple(version: str) -> tuple[int | str, ...]:
    """The ``__version_tuple__`` setuptools-scm writes for ``version`` (release, pre, post, dev, local)."""
    parsed = Version(version)
    fields: list[int | str] = list(parsed.release)
    if parsed.pre:
        fields.append(f"{parsed.pre[0]}{parsed.pre[1]}")
    if parsed.post is not None:
        fields.append(f"post{parsed.post}")
    if parsed.dev is not None:
        fields.append(f"dev{parsed.dev}")
    if parsed.local:
        fields.append(parsed.local)
    return tuple(fields)


def rewrite_version_module(text: str, old: str, new: str) -> str | None:
    """``_version.py`` saying ``new`` where it said ``old``; None when it is not in the
    setuptools-scm form or does not say ``old`` (then it is left alone, and the build says so)."""
    found = list(_VERSION_LINE.finditer(text))
    if len(found) != 1 or found[0]["v"] != old or len(_TUPLE_LINE.findall(text)) != 1:
        return None
    line = found[0]
    text = f"{text[: line.start('v')]}{new}{text[line.end('v') :]}"
    tuple_line = _TUPLE_LINE.search(text)
    assert tuple_line is not None
    return f"{text[: tuple_line.start()]}{tuple_line[1]} = {version_tuple(new)!r}{text[tuple_line.end() :]}"


def record_hash(digest: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def render_record(rows: list[tuple[str, str, str]]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue().encode("utf-8")


def parse_record(data: bytes, where: str) -> dict[str, tuple[str, str]]:
    """RECORD as path → (hash, size); UserError when it is not a RECORD."""
    try:
        rows = list(csv.reader(io.StringIO(data.decode("utf-8"))))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise UserError(f"RECORD cannot be read: {exc}", where) from None
    found: dict[str, tuple[str, str]] = {}
    for number, row in enumerate(rows, 1):
        if not row:
            continue
        if len(row) != 3 or row[0] in found:
            problem = "a path listed twice" if len(row) == 3 else f"{len(row)} fields, not 3"
            raise UserError(f"RECORD line {number}: {problem}", where)
        found[row[0]] = (row[1], row[2])
    return found
