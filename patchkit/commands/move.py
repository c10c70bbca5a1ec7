"""``patchkit move P --after Q``: reorder, refused when a prefix would break."""

from __future__ import annotations

from pathlib import Path

from patchkit.commands.edit import show


def run(patch: str, after: str, path: Path, json_out: Path | None) -> int:
    from patchkit.edit.ops import move

    return show(move(path, patch, after), json_out)
