"""The pinned wheel for this platform, through the package index, checked by sha256 and cached.

The pin names the sdist's sha256, not a wheel's: the wheel's sha256 is the one the index lists
(PEP 691 ``hashes`` / PEP 503 ``#sha256=``), checked while it downloads, recorded in the
provenance, and checked again (the whole file re-hashed) each time the cached copy is used.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from patchkit import cache
from patchkit.base import package_index
from patchkit.base.archive import sha256_file
from patchkit.errors import UserError
from patchkit.values import Pin

CACHE_KIND = "wheel"  # <cache>/wheel/<sha256>/<filename>, shared with the suite's real-wheel tests


@dataclass(frozen=True)
class SourceWheel:
    path: Path
    filename: str
    sha256: str


def cached(sha256: str) -> SourceWheel | None:
    """The cached wheel of that sha256 when it is there and still hashes to it (else a miss)."""
    entry = cache.store_dir(CACHE_KIND, sha256.lower())
    found = sorted(entry.glob("*.whl")) if entry.is_dir() else []
    if len(found) == 1 and sha256_file(found[0]) == sha256.lower():
        return SourceWheel(found[0], found[0].name, sha256.lower())
    if entry.is_dir():
        cache.remove_entry(CACHE_KIND, sha256.lower())  # a bad entry is a miss, never used
    return None


def fetch(pin: Pin, sha256: str | None = None) -> SourceWheel:
    """The ``pin.name==pin.version`` wheel that suits this interpreter (or, with ``sha256``, the
    wheel of that hash, as a provenance names it), from the cache or the index."""
    if pin.source != "index" or not pin.version:
        raise UserError(
            f"a wheel comes from the package index: the pin's source is {pin.source!r}, "
            "not 'index' with a version"
        )
    if sha256 and (hit := cached(sha256)):
        return hit
    if sha256:
        named = [
            f
            for f in package_index.project_files(pin.name, pin.version)
            if (f[2] or "").lower() == sha256.lower()
        ]
        if not named:
            raise UserError(f"no {pin.name} {pin.version} file with sha256 {sha256} on the index")
        filename, url, listed = named[0][0], named[0][1], sha256.lower()
    else:
        filename, url, listed = package_index.platform_wheel(pin.name, pin.version)
    if hit := cached(listed):
        return hit

    def download(tmp: Path) -> None:
        package_index.download(url, tmp / filename, listed)

    entry = cache.build_entry(CACHE_KIND, listed, download)
    return SourceWheel(entry / filename, filename, listed)
