"""``patchkit checkout``: prepare the pinned base and print its path."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from patchkit.errors import EXIT_OK
from patchkit.project import Project


@dataclass
class Options:
    dest: Path | None = None


def run(project: Project, options: Options) -> int:
    from patchkit.base.pin import checkout

    print(checkout(project.require_pin(), options.dest))
    return EXIT_OK
