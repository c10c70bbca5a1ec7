"""``patchkit absorb``: each uncommitted hunk into the latest patch it does not commute with."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from patchkit.commands.edit import show
from patchkit.project import EDIT_DIR, Project


@dataclass
class Options:
    path: Path = EDIT_DIR
    dry_run: bool = False
    into: str | None = None
    signoff: bool = False
    json_out: Path | None = None


def run(project: Project, options: Options) -> int:
    from patchkit.edit.ops import absorb

    return show(absorb(options.path, options.dry_run, options.into, options.signoff), options.json_out)
