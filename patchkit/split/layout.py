"""Refuse, before any work, a replay whose end state needs a path to be a file and a directory."""

from __future__ import annotations

from pathlib import PurePosixPath

from patchkit.base.tree import BaseTree
from patchkit.diff.model import Replay
from patchkit.errors import UserError


def check_layout(replay: Replay, tree: BaseTree, prefix: str) -> None:
    """A file the replay leaves (or the base keeps) must not be a parent directory of another."""
    created: dict[str, str] = {}
    removed: set[str] = set()
    for patch in replay.patches:
        for fp in patch.files:
            if fp.old_path and (fp.is_deleted or fp.is_rename):
                removed.add(fp.old_path)
                created.pop(fp.old_path, None)
            if fp.new_path:
                created[fp.new_path] = fp.source
                removed.discard(fp.new_path)
    for path, where in created.items():
        for parent in PurePosixPath(path).parents:
            name = str(parent)
            if name == ".":
                break
            if name in created or (name not in removed and tree.exists(prefix + name)):
                raise UserError(f"{path!r} needs {name!r} to be a directory, but it is a file", where)
