"""``patchkit drop P``: remove a patch, refused while a later one needs it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from patchkit.commands.edit import show
from patchkit.project import EDIT_DIR, Project


@dataclass
class Options:
    patch: str
    path: Path = EDIT_DIR
    json_out: Path | None = None


def run(project: Project, options: Options) -> int:
    from patchkit.edit.ops import drop

    return show(drop(options.path, options.patch), options.json_out)
