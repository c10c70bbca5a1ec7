"""Versions and distribution file names compared as PEP 440 / the packaging specs say, never as
strings: ``0.6.3-post1`` is ``0.6.3.post1``, ``1.0`` is ``1.0.0``, ``v0.8.5`` is ``0.8.5``; an
installed local build (``0.8.5+cpu``, ``0.8.5+g1a2b3c``) is the pinned public ``0.8.5`` with a note.
"""

from __future__ import annotations

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version


def parse(text: object) -> Version | None:
    """The PEP 440 version ``text`` names (a leading ``v`` allowed), None when it names none."""
    if not isinstance(text, str):
        return None
    try:
        return Version(text.strip())
    except InvalidVersion:
        return None


def same(a: object, b: object) -> bool:
    """Equal as versions (``1.0 == 1.0.0``); text that is no version only equals itself."""
    va, vb = parse(a), parse(b)
    if va is None or vb is None:
        return isinstance(a, str) and isinstance(b, str) and a.strip() == b.strip()
    return va == vb


def installed_matches(installed: str, pinned: str) -> tuple[bool, str | None]:
    """(matches, note) for an installed version against a pin: a local build of the pinned public
    version matches, with a note naming its local label; anything else is its own version."""
    vi, vp = parse(installed), parse(pinned)
    if vi is None or vp is None:
        return same(installed, pinned), None
    if vi == vp:
        return True, None
    if vi.local is not None and vp.local is None and Version(vi.public) == vp:
        return True, f"a local build (+{vi.local}) of the pinned {vp.public}"
    return False, None


SDIST_EXTENSIONS = (".tar.gz", ".zip")


def sdist_of(filename: str, name: str, version: str) -> bool:
    """``filename`` is the sdist of ``name`` ``version`` (``.tar.gz`` or ``.zip``; the name part
    found as pip finds it — the prefix that normalises to the project's name — and the rest compared
    as a version: ``vllm-0.6.3.post1.tar.gz`` is ``vllm`` ``0.6.3-post1``)."""
    want = parse(version)
    ext = next((e for e in SDIST_EXTENSIONS if filename.lower().endswith(e)), None)
    if want is None or ext is None:
        return False
    stem, canonical = filename[: -len(ext)], canonicalize_name(name)
    for i, char in enumerate(stem):
        if char == "-" and canonicalize_name(stem[:i]) == canonical:
            return parse(stem[i + 1 :]) == want
    return False


def wheel_of(filename: str, name: str, version: str) -> bool:
    """``filename`` is a wheel of ``name`` ``version`` (PEP 427 names, PEP 440 versions)."""
    want = parse(version)
    try:
        found_name, found_version, _, _ = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return False
    return found_name == canonicalize_name(name) and want is not None and found_version == want
