"""``patchkit absorb``: each uncommitted hunk into the latest patch it does not commute with."""

from __future__ import annotations

from pathlib import Path

from patchkit.commands.edit import show


def run(path: Path, dry_run: bool, into: str | None, signoff: bool, json_out: Path | None) -> int:
    from patchkit.edit.ops import absorb

    return show(absorb(path, dry_run, into, signoff), json_out)
