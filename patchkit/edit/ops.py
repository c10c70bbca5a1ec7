"""The edit verbs over a work tree: absorb, refresh, new, drop, move. Each holds the work tree's
lock for the whole command (``patchkit.txn.lock``), recovers a change a crash cut short, computes
the new chain, then ``worktree.land`` writes, proves, checks and swaps it in (or nothing changes)."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.analysis.depends import compute_dependencies
from patchkit.edit import gitops
from patchkit.edit.chain import Item, rebuild
from patchkit.edit.hunks import Hunk, assign, diff_u0, join
from patchkit.edit.render import Checks
from patchkit.edit.worktree import Work, land, load, lock, recover
from patchkit.errors import CheckFailed, UserError
from patchkit.series.files import load_entries
from patchkit.series.model import SplitPatch


@dataclass
class Outcome:
    op: str
    assigned: list[tuple[Hunk, str]] = field(default_factory=list)  # (hunk, patch name)
    left: list[Hunk] = field(default_factory=list)  # commute with every patch: stay in the tree
    dropped_commits: int = 0  # the user's own commits on top, now folded or left uncommitted
    checks: Checks | None = None
    changed: list[str] = field(default_factory=list)
    dry_run: bool = False
    recovered: str | None = None  # a change a crash cut short, finished or undone first

    def to_dict(self) -> dict:
        return {
            "op": self.op,
            "dry_run": self.dry_run,
            "recovered": self.recovered,
            "changed": self.changed,
            "assigned": [{"hunk": h.where(), "patch": n} for h, n in self.assigned],
            "left": [h.where() for h in self.left],
            "commits_on_top": self.dropped_commits,
            "checks": self.checks.to_dict() if self.checks else None,
        }


def locked(verb: Callable[..., Outcome]) -> Callable[..., Outcome]:
    """``verb(work, ...)`` as ``verb(path, ...)``: under the work tree's lock, after its recovery."""

    @functools.wraps(verb)
    def run(path: Path, *args, **kwargs) -> Outcome:
        with lock(path):
            note = recover(path)
            outcome = verb(load(path), *args, **kwargs)
            outcome.recovered = note
            return outcome

    return run


def now() -> int:
    """The time an edit records: ``SOURCE_DATE_EPOCH`` when set (reproducible), else the clock."""
    text = os.environ.get("SOURCE_DATE_EPOCH")
    if text is None:
        return int(time.time())
    try:
        return int(text)
    except ValueError:
        raise UserError(f"SOURCE_DATE_EPOCH={text!r} is not an integer number of seconds") from None


def pending_hunks(work: Work) -> tuple[list[Hunk], int]:
    """Every change of the work tree (and of commits on top) against the last patch, each with the
    patch it does not commute with; and how many commits the user added on top."""
    last = work.commits[-1]
    on_top = int(gitops.text(work.path, ["rev-list", "--count", f"{last}..HEAD"]) or 0)
    snap = gitops.snapshot(work.path)
    hunks = [h for fd in diff_u0(work.path, last, snap) for h in fd.hunks]
    assign(work.path, work.commits, work.base_commit, hunks)
    return hunks, on_top


def _items(work: Work) -> list[Item]:
    return [Item(n, c, work.parent(i)) for i, (n, c) in enumerate(zip(work.names, work.commits))]


def _edits(op: str, pairs: list[tuple[Hunk, str]]) -> list[dict]:
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now()))
    return [
        {
            "command": op,
            "patch": name,
            "file": h.path,
            "line": h.line_in_target,
            "removed": h.old_count,
            "added": h.new_count,
            "at": at,
        }
        for h, name in pairs
    ]


def _fold(
    work: Work, op: str, items: list[Item], pairs: list[tuple[Hunk, str]], signoff: bool, outcome: Outcome
) -> Outcome:
    me = gitops.user_identity(work.path) if signoff else None
    commits = rebuild(work.path, work.base_commit, work.commits[-1], items, me)
    expected = gitops.tree_with(
        work.path, gitops.tree_of(work.path, work.commits[-1]), join([h for h, _ in pairs])
    )
    if gitops.tree_of(work.path, commits[-1]) != expected:
        raise CheckFailed(
            "the rebuilt patches do not add up to the last patch plus the changes; nothing changed"
        )
    outcome.changed = sorted({n for _, n in pairs}, key=[i.name for i in items].index)
    outcome.checks = land(work, op, [i.name for i in items], commits, _edits(op, pairs))
    return outcome


@locked
def absorb(work: Work, dry_run: bool = False, into: str | None = None, signoff: bool = False) -> Outcome:
    hunks, on_top = pending_hunks(work)
    outcome = Outcome("absorb", dry_run=dry_run, dropped_commits=on_top)
    target_of_left = work.index_of(into) if into is not None else None
    for h in hunks:
        index = h.target if h.target is not None else target_of_left
        if index is None or h.binary and h.target is None:
            outcome.left.append(h)
        else:
            outcome.assigned.append((h, work.names[index]))
    if dry_run or not outcome.assigned:
        return outcome
    items = _items(work)
    for item in items:
        item.extra = join([h for h, n in outcome.assigned if n == item.name])
    return _fold(work, "absorb", items, outcome.assigned, signoff, outcome)


@locked
def refresh(work: Work, patch: str, signoff: bool = False) -> Outcome:
    index = work.index_of(patch)
    hunks, on_top = pending_hunks(work)
    later = [h for h in hunks if h.target is not None and h.target > index]
    if later:
        named = "; ".join(f"{h.where()} is also changed by {work.names[h.target]}" for h in later[:3])  # type: ignore[index]
        raise CheckFailed(
            f"refresh {work.names[index]} refused: a later patch touches the same lines: {named}"
        )
    outcome = Outcome("refresh", dropped_commits=on_top, assigned=[(h, work.names[index]) for h in hunks])
    if not hunks:
        return outcome
    items = _items(work)
    items[index].extra = join(hunks)
    return _fold(work, "refresh", items, outcome.assigned, signoff, outcome)


@locked
def new(work: Work, name: str, after: str | None = None, signoff: bool = False) -> Outcome:
    position = work.index_of(after) + 1 if after is not None else len(work.names)
    hunks, on_top = pending_hunks(work)
    if not hunks:
        raise UserError(f"new {name}: no uncommitted change to put in it (edit the work tree first)")
    later = [h for h in hunks if h.target is not None and h.target >= position]
    if later:
        named = "; ".join(f"{h.where()} is also changed by {work.names[h.target]}" for h in later[:3])  # type: ignore[index]
        raise CheckFailed(
            f"new {name} after {work.names[position - 1] if position else 'the base'} refused: {named}"
        )
    filename = f"{position + 1:04d}-{name}.patch"
    if filename in work.names or "/" in name:
        raise UserError(f"new {name}: {filename} is already a patch of the series (or not a file name)")
    author, mail = gitops.user_identity(work.path)
    stamp = f"{now()} +0000"
    info = {
        "GIT_AUTHOR_NAME": author,
        "GIT_AUTHOR_EMAIL": mail,
        "GIT_AUTHOR_DATE": stamp,
        "GIT_COMMITTER_NAME": author,
        "GIT_COMMITTER_EMAIL": mail,
        "GIT_COMMITTER_DATE": stamp,
        "message": f"{name}\n",
    }
    items = _items(work)
    items.insert(position, Item(filename, None, None, join(hunks), info))
    outcome = Outcome("new", dropped_commits=on_top, assigned=[(h, filename) for h in hunks])
    return _fold(work, "new", items, outcome.assigned, signoff, outcome)


def _clean(work: Work, verb: str) -> None:
    if gitops.snapshot(work.path) != gitops.tree_of(work.path, work.commits[-1]):
        raise UserError(f"{verb}: the work tree has uncommitted changes; absorb, refresh or stash them first")


def needs(work: Work) -> dict[str, dict[str, str]]:
    """Patch name → the earlier patches it needs first, each with why (analysis/depends: the smallest
    set with which it applies to the base, and what it needs to work, analysis/needs)."""
    entries = load_entries(work.series)
    patches = [
        SplitPatch(i + 1, e.name, {}, e.name, [fp for p in e.patches for fp in p.files], [])
        for i, e in enumerate(entries)
    ]
    compute_dependencies(work.base(), patches)
    return {
        p.filename: {
            d: p.needs_why.get(d, f"its hunks do not apply to the base without {d}") for d in p.depends_on
        }
        for p in patches
    }


@locked
def drop(work: Work, patch: str) -> Outcome:
    index = work.index_of(patch)
    name = work.names[index]
    _clean(work, f"drop {name}")
    needed_by = {n: first[name] for n, first in needs(work).items() if name in first}
    if needed_by:
        first, why = next(iter(needed_by.items()))
        raise CheckFailed(f"drop {name} refused: {', '.join(needed_by)} need(s) it first ({first}: {why})")
    items = _items(work)
    del items[index]
    if not items:
        raise UserError(f"drop {name}: it is the only patch; a series needs one")
    try:
        commits = rebuild(work.path, work.base_commit, work.commits[-1], items)
    except CheckFailed as exc:
        raise CheckFailed(f"drop {name} refused: {exc.line()}") from None
    outcome = Outcome("drop", changed=[name])
    outcome.checks = _land_refusing(
        work, "drop", f"drop {name}", [i.name for i in items], commits, files=True
    )
    return outcome


@locked
def move(work: Work, patch: str, after: str) -> Outcome:
    index = work.index_of(patch)
    name = work.names[index]
    items = _items(work)
    item = items.pop(index)
    position = (
        0 if after in ("base", "0") else [i.name for i in items].index(work.names[work.index_of(after)]) + 1
    )
    items.insert(position, item)
    where = items[position - 1].name if position else "the base"
    try:
        commits = rebuild(work.path, work.base_commit, work.commits[-1], items)
    except CheckFailed as exc:
        raise CheckFailed(f"move {name} after {where} refused: {exc.line()}") from None
    if gitops.tree_of(work.path, commits[-1]) != gitops.tree_of(work.path, work.commits[-1]):
        raise CheckFailed(f"move {name} after {where} refused: the reordered series ends in another tree")
    outcome = Outcome("move", changed=[name])
    outcome.checks = _land_refusing(
        work, "move", f"move {name} after {where}", [i.name for i in items], commits
    )
    return outcome


def _land_refusing(work: Work, op: str, what: str, names: list[str], commits: list[str], files: bool = False):
    try:
        return land(work, op, names, commits, [], files=files)
    except CheckFailed as exc:
        raise CheckFailed(f"{what} refused: {exc.line()}") from None
