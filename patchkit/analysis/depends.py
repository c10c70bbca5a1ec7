"""Which earlier patches each patch of a series needs first, and which commits left no line."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TypeVar

from patchkit.analysis.needs import working_needs
from patchkit.base.tree import BaseTree
from patchkit.diff.engine import State, apply_files
from patchkit.diff.hunks import HunkMismatch
from patchkit.diff.model import Replay
from patchkit.series.model import SplitPatch
from patchkit.series.overlays import Overlay, base_matches

T = TypeVar("T")


def minimal_needs(candidates: list[T], applies: Callable[[list[T]], bool], limit: int = 4096) -> list[T]:
    """The smallest subset of ``candidates`` (kept in their order) with which ``applies`` holds.

    Exact: subsets are tried by size, smallest first, so no smaller subset applies; among equal
    sizes the first in series order wins. Past ``limit`` trials it drops candidates one by one from
    the full set instead (still a set that applies, no longer proven smallest)."""
    if applies([]):
        return []
    trials = 0
    for size in range(1, len(candidates) + 1):
        for subset in itertools.combinations(candidates, size):
            trials += 1
            if trials > limit:
                return _drop_one_by_one(candidates, applies)
            if applies(list(subset)):
                return list(subset)
    return list(candidates)


def closure(touched: set[str], earlier: list[T], files: Callable[[T], set[str]]) -> list[T]:
    """The earlier patches a patch on ``touched`` can need: those on its files, and (as they may
    need theirs first) those on their files, transitively; in series order."""
    wanted, found = set(touched), set()
    changed = True
    while changed:
        changed = False
        for i, other in enumerate(earlier):
            if i not in found and wanted & files(other):
                found.add(i)
                wanted |= files(other)
                changed = True
    return [p for i, p in enumerate(earlier) if i in found]


def _drop_one_by_one(candidates: list[T], applies: Callable[[list[T]], bool]) -> list[T]:
    needed = list(candidates)
    for candidate in list(needed):
        trial = [p for p in needed if p is not candidate]
        if applies(trial):
            needed = trial
    return needed


def compute_dependencies(base: BaseTree, patches: list[SplitPatch],
                         overlays: dict[str, Overlay] | None = None) -> None:  # fmt: skip
    """Set ``depends_on``: the smallest earlier set with which a patch (with its overlays, from
    ``overlays`` by name) applies to base, proven smallest by trying every smaller subset of the
    earlier patches on its files; plus the semantic needs the split recorded (``needs_why``); plus
    what it needs to work (``needs.working_needs``: base + its needs + it has no problem the series
    state has not, the needs of its needs included), each with why in ``needs_why``."""
    overlays = overlays or {}
    states = _States(base, patches, overlays)
    for k, patch in enumerate(patches):
        touched = {fp.old_path for fp in patch.files if fp.old_path}
        touched |= {overlays[name].target for name in patch.overlays}
        candidates = closure(touched, list(range(k)), lambda i: _touched(patches[i], overlays))
        needed = minimal_needs(candidates, lambda trial, k=k: states.after((*trial, k)) is not None)
        textual = [patches[i].domain for i in needed]
        semantic = [d for d in patch.depends_on if d in patch.needs_why and d not in textual]
        rank = {p.domain: i for i, p in enumerate(patches)}
        patch.depends_on = sorted(textual + semantic, key=lambda d: rank.get(d, len(rank)))
    rank = {p.domain: i for i, p in enumerate(patches)}
    found = working_needs(base, len(patches), states.after,
                          [[rank[d] for d in p.depends_on if d in rank] for p in patches],
                          lambda i: _touched(patches[i], overlays), lambda i: patches[i].domain)  # fmt: skip
    for patch, (indices, why) in zip(patches, found):
        for i, text in why.items():
            patch.needs_why.setdefault(patches[i].domain, text)
        wanted = set(patch.depends_on) | {patches[i].domain for i in indices}
        patch.depends_on = sorted(wanted, key=lambda d: rank.get(d, len(rank)))


def _touched(patch: SplitPatch, overlays: dict[str, Overlay]) -> set[str]:
    return {fp.path for fp in patch.files} | {overlays[name].target for name in patch.overlays}


class _States:
    """The files changed by applying patches (by index, in the given order) to base, or None when
    one of them does not apply; every prefix is remembered, so the subsets ``minimal_needs`` tries
    share their common starts instead of applying them again."""

    def __init__(self, base: BaseTree, patches: list[SplitPatch], overlays: dict[str, Overlay]) -> None:
        self.base, self.patches, self.overlays = base, patches, overlays
        self.memo: dict[tuple[int, ...], dict[str, bytes | None] | None] = {(): {}}

    def after(self, order: tuple[int, ...]) -> dict[str, bytes | None] | None:
        if order in self.memo:
            return self.memo[order]
        before = self.after(order[:-1])
        patch = self.patches[order[-1]]
        tree = None if before is None else _apply_one(self.base, before, patch, self.overlays)
        self.memo[order] = tree
        return tree


def _apply_one(base: BaseTree, before: dict[str, bytes | None], patch: SplitPatch,
               overlays: dict[str, Overlay]) -> dict[str, bytes | None] | None:  # fmt: skip
    tree = dict(before)

    def read(path: str) -> State:
        return (tree[path] if path in tree else base.read(path)), None

    try:  # the shared engine: what apply and the audit do
        outcome = apply_files(patch.files, read)
    except (HunkMismatch, ValueError):
        return None
    tree.update({path: data for path, (data, _) in outcome.files.items()})
    for name in patch.overlays:
        overlay = overlays[name]
        current = tree[overlay.target] if overlay.target in tree else base.read(overlay.target)
        if not base_matches(overlay, current):
            return None
        tree[overlay.target] = overlay.content
    return tree


def absorbed_commits(replay: Replay, patches: list[SplitPatch]) -> list[int]:
    """Commits that change files yet leave no line of their own in the net diff (later rewritten)."""
    carried = {c for p in patches for c in p.source_commits}
    return [i for i, p in enumerate(replay.patches) if p.files and i not in carried]
