"""Whole-file replacements a project owns: ``overlays/<name>.toml`` keyed by target path + base hash.

target = "vllm/x.py"          # repo-rooted, like series paths
base_sha256 = "<hex>"         # sha256 of the file it replaces, or "absent" for a new file
content = "x.py.new"          # file beside the toml holding the new bytes
reason = "why we own it"      # optional
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from patchkit.errors import UserError

OVERLAY_DIR = "overlays"
ABSENT = "absent"
_KEYS = {"target", "base_sha256", "content", "reason"}


@dataclass
class Overlay:
    name: str  # the toml file, as shown to the user
    target: str
    base_sha256: str  # hex or ABSENT
    content: bytes
    reason: str = ""

    @property
    def sha256(self) -> str:
        """Identity of the overlay for the applied-state record: its target, base and content."""
        key = f"{self.target}\0{self.base_sha256}\0".encode() + self.content
        return hashlib.sha256(key).hexdigest()


def load_overlay(path: Path) -> Overlay:
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"cannot read overlay: {exc}", str(path)) from None
    if unknown := set(data) - _KEYS:
        raise UserError(f"unknown key {sorted(unknown)[0]!r} (known: {', '.join(sorted(_KEYS))})", str(path))
    for key in ("target", "base_sha256", "content"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise UserError(f"'{key}' must be a non-empty string", str(path))
    target, base = data["target"], data["base_sha256"].lower()
    if target.startswith("/") or ".." in PurePosixPath(target).parts or "\\" in target:
        raise UserError(f"target {target!r} leaves the target root", str(path))
    if base != ABSENT and not re.fullmatch(r"[0-9a-f]{64}", base):
        raise UserError(f"base_sha256 must be 64 hex digits or '{ABSENT}', got {base!r}", str(path))
    content_path = path.parent / data["content"]
    if content_path.resolve().parent != path.parent.resolve():
        raise UserError(f"content {data['content']!r} must be a file beside the overlay", str(path))
    try:
        content = content_path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read overlay content {content_path}: {exc.strerror}", str(path)) from None
    return Overlay(path.name, target, base, content, str(data.get("reason", "")))


def load_overlays(*dirs: Path) -> list[Overlay]:
    """Overlays of every ``overlays/`` dir given (sorted by name); one target owned twice is an error."""
    overlays: list[Overlay] = []
    seen: dict[str, str] = {}
    for directory in dict.fromkeys(d.resolve() for d in dirs if (d / OVERLAY_DIR).is_dir()):
        for path in sorted((directory / OVERLAY_DIR).glob("*.toml")):
            overlay = load_overlay(path)
            if overlay.target in seen:
                raise UserError(f"{overlay.target} is also replaced by {seen[overlay.target]}", str(path))
            seen[overlay.target] = str(path)
            overlays.append(overlay)
    return overlays


def base_matches(overlay: Overlay, current: bytes | None) -> bool:
    if overlay.base_sha256 == ABSENT:
        return current is None
    return current is not None and hashlib.sha256(current).hexdigest() == overlay.base_sha256
