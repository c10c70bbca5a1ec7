"""``patchkit move P --after Q``: reorder, refused when a prefix would break."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from patchkit.commands.edit import show
from patchkit.project import EDIT_DIR, Project


@dataclass
class Options:
    patch: str
    after: str
    path: Path = EDIT_DIR
    json_out: Path | None = None


def run(project: Project, options: Options) -> int:
    from patchkit.edit.ops import move

    return show(move(options.path, options.patch, options.after), options.json_out)
