"""``patchkit refresh PATCH``: the uncommitted changes into PATCH, refused when they do not commute."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from patchkit.commands.edit import show
from patchkit.project import EDIT_DIR, Project


@dataclass
class Options:
    patch: str
    path: Path = EDIT_DIR
    signoff: bool = False
    json_out: Path | None = None


def run(project: Project, options: Options) -> int:
    from patchkit.edit.ops import refresh

    return show(refresh(options.path, options.patch, options.signoff), options.json_out)
