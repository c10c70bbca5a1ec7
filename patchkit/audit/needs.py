"""What each patch of an audited series needs first, to apply and to work.

The needs of a patch decide the apply gate's "alone" check and the trees of the tests gate's two
sides (base + its needs, and that + the patch). They are split.json's ``depends_on`` where the split
declared any, else the smallest set the patch applies with (``gates.apply.needed_patches``); either
way grown by what the patch needs to *work* (``analysis.needs.working_needs``): a series written by
hand, by an older patchkit or edited since can declare too little, and a patch that applies alone
but imports what an earlier patch adds would have its tests judged on a tree that cannot import.
One answer per series and base, remembered for the run.
"""

from __future__ import annotations

import threading

from patchkit.analysis.depends import closure, minimal_needs
from patchkit.analysis.needs import working_needs
from patchkit.audit.gates import PatchUnderAudit, apply_patch
from patchkit.base.tree import BaseTree
from patchkit.diff.hunks import HunkMismatch
from patchkit.testrun.overlaytree import Overlay

Answer = tuple[list[str], str, dict[str, str]]  # (needs by name, where from, why by name)
_MEMO: dict[tuple, list[Answer]] = {}
_LOCK = threading.Lock()


def applies(base: BaseTree, patches: list[PatchUnderAudit]) -> str | None:
    """None when ``patches`` apply in order on the base, else the first error."""
    overlay: Overlay = {}
    for patch in patches:
        try:
            apply_patch(patch, base.read, overlay)
        except (HunkMismatch, ValueError) as exc:
            return f"{patch.name}: {exc}"
    return None


def needed_patches(base: BaseTree, patch: PatchUnderAudit, earlier: list[PatchUnderAudit]) -> list[str]:
    """The smallest set of earlier patches it needs to apply on the base: exact (``minimal_needs``
    tries every smaller subset of the earlier patches on its files first)."""
    touched = {fp.old_path for fp in patch.files if fp.old_path} | {o.target for o in patch.overlays}
    candidates = closure(touched, earlier, lambda p: p.touched)
    state_after = States(base, {p.name: p for p in [*candidates, patch]})  # subsets share their prefixes
    needed = minimal_needs(
        candidates, lambda trial: state_after((*[p.name for p in trial], patch.name)) is not None
    )
    return [p.name for p in needed]


class States:
    """The files changed by applying patches (by key, in the given order) to the base, or None when
    one does not apply; every prefix is remembered, so the orders tried share their common starts."""

    def __init__(self, base: BaseTree, patches: dict) -> None:
        self.base, self.patches = base, patches
        self.memo: dict[tuple, Overlay | None] = {(): {}}

    def __call__(self, order: tuple) -> Overlay | None:
        if order not in self.memo:
            before = self(order[:-1])
            state = None if before is None else dict(before)
            if state is not None:
                try:
                    apply_patch(self.patches[order[-1]], self.base.read, state)
                except (HunkMismatch, ValueError):
                    state = None
            self.memo[order] = state
        return self.memo[order]


def series_needs(base: BaseTree, patches: list[PatchUnderAudit]) -> list[Answer]:
    """For every patch, in series order: its needs (names, series order), where they come from
    ("split.json", "computed", with "+ working" when the work check added any) and why each added
    one is needed."""
    key = (str(base.root), tuple((p.name, p.text, tuple(p.declared_needs or ())) for p in patches))
    with _LOCK:  # patch k's answer reads only patches[..k]: a longer series' answers serve a prefix
        for known, answers in _MEMO.items():
            if known[0] == key[0] and known[1][: len(key[1])] == key[1]:
                return answers[: len(patches)]
        if len(_MEMO) > 16:
            _MEMO.clear()
        _MEMO[key] = _compute(base, patches)
        return _MEMO[key]


def _compute(base: BaseTree, patches: list[PatchUnderAudit]) -> list[Answer]:
    index = {p.name: i for i, p in enumerate(patches)}
    first: list[tuple[list[int], str]] = []
    for i, patch in enumerate(patches):
        if patch.declared_needs:
            first.append(([index[n] for n in patch.declared_needs if n in index], "split.json"))
        elif applies(base, [patch]) is None:
            first.append(([], "computed"))
        else:
            first.append(
                ([index[n] for n in needed_patches(base, patch, patches[:i]) if n in index], "computed")
            )
    after = States(base, dict(enumerate(patches)))
    found = working_needs(base, len(patches), after, [needs for needs, _ in first],
                          lambda i: patches[i].touched, lambda i: patches[i].name)  # fmt: skip
    out: list[Answer] = []
    for patch, (needs, source), (grown, why) in zip(patches, first, found):
        added = set(grown) - set(needs)
        names = [patches[i].name for i in sorted(set(needs) | set(grown))]
        # a declared need that is not an earlier patch (a later one: the split could not order it)
        names += [n for n in patch.declared_needs or [] if n not in index or index[n] >= index[patch.name]]
        out.append((names, source + (" + working" if added else ""), {patches[i].name: why[i] for i in why}))
    return out


__all__ = ["applies", "needed_patches", "series_needs"]
