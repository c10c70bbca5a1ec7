"""Whole-file replacements a project owns: ``overlays/<name>.toml`` keyed by target path + base hash.

target = "vllm/x.py"          # repo-rooted, like series paths
base_sha256 = "<hex>"         # sha256 of the file it replaces, or "absent" for a new file
content = "x.py.new"          # file beside the toml holding the new bytes
reason = "why we own it"      # optional
content_sha256 = "<hex>"      # optional (split writes it): the content file must hash to it
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from patchkit.atomic import write_atomic
from patchkit.diff.hunks import split_lines
from patchkit.diff.model import FilePatch
from patchkit.errors import UserError

OVERLAY_DIR = "overlays"
ABSENT = "absent"
_Side = tuple[bytes | None, str | None]  # (content or None when absent, git mode)
_KEYS = {"target", "base_sha256", "content", "reason", "content_sha256"}


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
    import tomllib  # only a series with overlays pays for the TOML parser

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
    expected = str(data.get("content_sha256", "")).lower()
    if expected and hashlib.sha256(content).hexdigest() != expected:
        raise UserError(f"content {data['content']!r} does not match content_sha256 {expected}", str(path))
    return Overlay(path.name, target, base, content, str(data.get("reason", "")))


def base_matches(overlay: Overlay, current: bytes | None) -> bool:
    if overlay.base_sha256 == ABSENT:
        return current is None
    return current is not None and hashlib.sha256(current).hexdigest() == overlay.base_sha256


def mismatch(overlay: Overlay, current: bytes | None) -> str:
    """Why ``overlay`` does not apply to ``current`` (its preimage check failed)."""
    found = hashlib.sha256(current).hexdigest() if current is not None else ABSENT
    return (f"overlay {overlay.name}: {overlay.target} has sha256 {found}, "
            f"the overlay replaces {overlay.base_sha256}")  # fmt: skip


def write_overlay(directory: Path, stem: str, overlay: Overlay, durable: bool = True) -> list[Path]:
    """``<stem>.toml`` and its content file ``<stem>.new`` in ``directory``; returns both paths."""
    directory.mkdir(parents=True, exist_ok=True)
    content = directory / f"{stem}.new"
    write_atomic(content, overlay.content, durable=durable)
    fields = {"target": overlay.target, "base_sha256": overlay.base_sha256, "content": content.name,
              "content_sha256": hashlib.sha256(overlay.content).hexdigest()}  # fmt: skip
    if overlay.reason:
        fields["reason"] = overlay.reason
    toml = directory / f"{stem}.toml"
    # a JSON string is a valid TOML basic string
    write_atomic(toml, "".join(f"{k} = {json.dumps(v, ensure_ascii=False)}\n" for k, v in fields.items()),
                 durable=durable)  # fmt: skip
    return [toml, content]


# --------------------------------------------------------------------------- split


def overlay_reason(before: _Side, after: _Side, fp: FilePatch, threshold: float) -> str | None:
    """Why a step's change of one file is better owned whole (None: keep it a diff).

    New files, and files whose changed share (added + removed lines over the larger side) reaches
    ``threshold``; never deletions, renames or mode changes, which an overlay cannot express."""
    (old, old_mode), (new, new_mode) = before, after
    if new is None or (fp.old_path and fp.new_path and fp.old_path != fp.new_path):
        return None
    if old is None:
        return "new file" if new_mode == "100644" else None
    if old_mode != new_mode:
        return None
    size = max(len(split_lines(old)), len(split_lines(new)), 1)
    share = (fp.added + fp.removed) / size
    if share < threshold:
        return None
    return f"rewrites {min(100, round(share * 100))}% of the file"


def take_overlays(k: int, domain: str, files: list[FilePatch], sides: dict[str, tuple[_Side, _Side]],
                   threshold: float) -> dict[str, Overlay]:  # fmt: skip
    """Remove from ``files`` (step ``k``'s diff) what becomes an overlay; return those overlays."""
    found: dict[str, Overlay] = {}
    for fp in list(files):
        before, after = sides[f"{k:04d}/{fp.path}"]
        reason = overlay_reason(before, after, fp, threshold)
        if reason is None or after[0] is None:
            continue
        base_sha = hashlib.sha256(before[0]).hexdigest() if before[0] is not None else ABSENT
        stem = f"{k + 1:04d}-{domain}-{fp.path.replace('/', '_')}"
        found[f"{OVERLAY_DIR}/{stem}.toml"] = Overlay(f"{stem}.toml", fp.path, base_sha, after[0], reason)
        files.remove(fp)
    return found
