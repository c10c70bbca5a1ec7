"""``patchkit drop P``: remove a patch, refused while a later one needs it."""

from __future__ import annotations

from pathlib import Path

from patchkit.commands.edit import show


def run(patch: str, path: Path, json_out: Path | None) -> int:
    from patchkit.edit.ops import drop

    return show(drop(path, patch), json_out)
