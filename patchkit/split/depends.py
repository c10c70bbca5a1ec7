"""Which earlier patches each patch of a series needs first, and which commits left no line."""

from __future__ import annotations

from patchkit.base.tree import BaseTree
from patchkit.diff.engine import State, apply_files
from patchkit.diff.hunks import HunkMismatch
from patchkit.diff.model import Replay
from patchkit.series.model import SplitPatch
from patchkit.series.overlays import Overlay, base_matches


def compute_dependencies(base: BaseTree, patches: list[SplitPatch],
                         overlays: dict[str, Overlay] | None = None) -> None:  # fmt: skip
    """Set ``depends_on``: the smallest earlier set without which a patch (with its overlays, from
    ``overlays`` by name) does not apply to base."""
    overlays = overlays or {}
    for k, patch in enumerate(patches):
        touched = {fp.old_path for fp in patch.files if fp.old_path}
        touched |= {overlays[name].target for name in patch.overlays}
        needed = [p for p in patches[:k] if touched & _touched(p, overlays)]
        if not needed or _applies(base, [patch], overlays):
            continue  # with no earlier patch on its files, it was made against the base itself
        for candidate in list(needed):
            trial = [p for p in needed if p is not candidate]
            if _applies(base, [*trial, patch], overlays):
                needed = trial
        patch.depends_on = [p.domain for p in needed]


def _touched(patch: SplitPatch, overlays: dict[str, Overlay]) -> set[str]:
    return {fp.path for fp in patch.files} | {overlays[name].target for name in patch.overlays}


def _applies(base: BaseTree, patches: list[SplitPatch], overlays: dict[str, Overlay] | None = None) -> bool:
    tree: dict[str, bytes | None] = {}

    def read(path: str) -> State:
        return (tree[path] if path in tree else base.read(path)), None

    for patch in patches:
        try:  # the shared engine: what apply and the audit do
            outcome = apply_files(patch.files, read)
        except (HunkMismatch, ValueError):
            return False
        tree.update({path: data for path, (data, _) in outcome.files.items()})
        for name in patch.overlays:
            overlay = (overlays or {})[name]
            current = tree[overlay.target] if overlay.target in tree else base.read(overlay.target)
            if not base_matches(overlay, current):
                return False
            tree[overlay.target] = overlay.content
    return True


def absorbed_commits(replay: Replay, patches: list[SplitPatch]) -> list[int]:
    """Commits that change files yet leave no line of their own in the net diff (later rewritten)."""
    carried = {c for p in patches for c in p.source_commits}
    return [i for i, p in enumerate(replay.patches) if p.files and i not in carried]
