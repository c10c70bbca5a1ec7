"""``patchkit new NAME``: the uncommitted changes as a new patch (after ``--after P``, else last)."""

from __future__ import annotations

from pathlib import Path

from patchkit.commands.edit import show


def run(name: str, after: str | None, path: Path, signoff: bool, json_out: Path | None) -> int:
    from patchkit.edit.ops import new

    return show(new(path, name, after, signoff), json_out)
