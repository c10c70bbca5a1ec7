"""``patchkit refresh PATCH``: the uncommitted changes into PATCH, refused when they do not commute."""

from __future__ import annotations

from pathlib import Path

from patchkit.commands.edit import show


def run(patch: str, path: Path, signoff: bool, json_out: Path | None) -> int:
    from patchkit.edit.ops import refresh

    return show(refresh(path, patch, signoff), json_out)
