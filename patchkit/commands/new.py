"""``patchkit new NAME``: the uncommitted changes as a new patch (after ``--after P``, else last)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from patchkit.commands.edit import show
from patchkit.project import EDIT_DIR, Project


@dataclass
class Options:
    name: str
    after: str | None = None
    path: Path = EDIT_DIR
    signoff: bool = False
    json_out: Path | None = None


def run(project: Project, options: Options) -> int:
    from patchkit.edit.ops import new

    return show(new(options.path, options.name, options.after, options.signoff), options.json_out)
