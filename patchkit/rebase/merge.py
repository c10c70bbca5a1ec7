"""Carry a series from its old base to a new one, patch by patch, with a 3-way merge per file.

Cumulative states: old k = old base + patches 1..k, new k = new base + rebased patches 1..k.
For each file of patch k, ``git merge-file --diff3`` merges (new k-1, old k-1, old k); the
rebased patch k is diff(new k-1, new k). Every hunk of the old patch gets an outcome: clean
(its context is in the new base, maybe moved), merged, already-upstream, or conflict.
"""

from __future__ import annotations

import copy
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from patchkit import git
from patchkit.base.tree import BaseTree
from patchkit.diff.engine import apply_files
from patchkit.diff.hunks import (
    HunkMismatch,
    apply_hunks,
    hunk_sides,
    join_lines,
    splice_plan,
    split_lines,
)
from patchkit.diff.model import Commit, FilePatch, Hunk
from patchkit.diff.pairs import diff_pairs  # one git diff --no-index → repo-relative FilePatches
from patchkit.errors import UserError
from patchkit.rebase.outcome import ConflictSides, HunkOutcome
from patchkit.series.files import load_entries, load_split_json
from patchkit.series.model import Series, SplitPatch
from patchkit.values import Pin

UPSTREAM_WINDOW = 10  # lines: how far from the patch's place its result may sit and count as upstream
EVIDENCE_LINES = 12  # lines of the new base shown as evidence for "already upstream"
MARKER = re.compile(r"^(<{7}|>{7}|\|{7})( |$)|^={7}$")


@dataclass
class SourceSeries:
    """The series to rebase: patches as on disk, metadata from split.json when there is one."""

    patches: list[SplitPatch]
    commits: list[Commit | None]
    base: Pin | None  # split.json's base pin
    path_prefix: str = ""
    foreign: dict[str, str] = field(default_factory=dict)  # name -> text of patches patchkit did not write


def load_source(series_dir: Path) -> SourceSeries:
    entries = load_entries(series_dir)
    record = load_split_json(series_dir)
    known = {sp.filename: sp for sp in record.patches} if record else {}
    commits: list[Commit | None] = list(record.commits) if record else []
    foreign: dict[str, str] = {}
    patches = []
    for number, entry in enumerate(entries, 1):
        files = [fp for p in entry.patches for fp in p.files]
        sp = known.get(entry.name)
        if sp is None:  # a patch split.json does not know: its own commits, domain from the name
            start = len(commits)
            commits += [p.commit for p in entry.patches]
            domain = re.sub(r"^\d{4}-|\.(patch|diff)$", "", entry.name) or entry.name
            sp = SplitPatch(number, domain, {"en": domain}, entry.name, files,
                            list(range(start, len(commits))))  # fmt: skip
            foreign[entry.name] = entry.text
        sp.files = files
        patches.append(sp)
    return SourceSeries(patches, commits, record.base if record else None,
                        record.path_prefix if record else "", foreign)  # fmt: skip


class Overlay:
    """A base tree with the files the series has changed so far (None = absent)."""

    def __init__(self, base: BaseTree) -> None:
        self.base = base
        self.files: dict[str, bytes | None] = {}

    def read(self, path: str) -> bytes | None:
        return self.files[path] if path in self.files else self.base.read(path)

    def mode(self, path: str) -> str:
        return self.base.mode(path) or "100644"

    def apply(self, files: list[FilePatch], where: str) -> None:
        for fp in files:
            _supported(fp, where)
        try:  # the shared engine, as apply, the audit and the split's proof use it
            outcome = apply_files(files, lambda path: (self.read(path), None))
        except (HunkMismatch, ValueError) as exc:
            raise UserError(f"the series does not apply to its base: {exc}", where) from exc
        self.files.update({path: data for path, (data, _) in outcome.files.items()})


@dataclass
class PatchStep:
    """Patch k merged onto new k-1: per-file results (with markers where conflicted), outcomes."""

    index: int
    results: dict[str, bytes | None] = field(default_factory=dict)
    conflicts: list[str] = field(default_factory=list)  # files holding conflict markers
    hunks: list[HunkOutcome] = field(default_factory=list)


class Rebaser:
    def __init__(self, source: SourceSeries, old_base: BaseTree, new_base: BaseTree,
                 labels: tuple[str, str]) -> None:  # fmt: skip
        self.source = source
        self.old = Overlay(old_base)
        self.new = Overlay(new_base)
        self.new_label, self.old_label = labels

    def replay(self, upto: int, rebased: list[SplitPatch]) -> None:
        """Bring old to state ``upto`` and new to new base + ``rebased`` (resuming a rebase)."""
        for sp in self.source.patches[:upto]:
            self.old.apply(sp.files, sp.filename)
        for sp in rebased:
            self.new.apply(sp.files, f"rebased {sp.filename}")

    def step(self, k: int) -> PatchStep:
        """Merge patch k onto new k-1; advances the old state to k (the new one is not touched)."""
        sp = self.source.patches[k]
        step = PatchStep(k)
        labels = (f"{self.new_label} + rebased patches 1..{k}", self.old_label, sp.filename)
        for fp in sp.files:
            _supported(fp, sp.filename)
            before = self.old.read(fp.path)
            self.old.apply([fp], sp.filename)
            merged = rebase_file(fp, before, self.old.read(fp.path), self.new.read(fp.path), labels)
            step.results[fp.path], conflicted, outcomes = merged
            step.hunks += outcomes
            if conflicted:
                step.conflicts.append(fp.path)
        return step

    def commit(self, k: int, results: dict[str, bytes | None]) -> SplitPatch | None:
        """Make ``results`` new state k; the rebased patch k (None when it changes nothing)."""
        sp = self.source.patches[k]
        pairs = []
        for fp in sp.files:
            before, after = self.new.read(fp.path), results[fp.path]
            if before != after:
                mode = fp.new_mode if fp.is_new and fp.new_mode else self.new.mode(fp.path)
                pairs.append((fp.path, (before, mode), (after, mode)))
            self.new.files[fp.path] = after
        if not pairs:
            return None
        with tempfile.TemporaryDirectory(prefix="patchkit-rebase-") as tmp:
            files = diff_pairs(pairs, Path(tmp), context=3)
        rebased = copy.deepcopy(sp)
        rebased.files, rebased.depends_on, rebased.sha256 = files, [], ""
        return rebased


def _supported(fp: FilePatch, where: str) -> None:
    if fp.binary:
        raise UserError(f"binary patch of {fp.path!r} cannot be rebased", where)
    if fp.is_rename:
        raise UserError(f"rename {fp.old_path} -> {fp.new_path} cannot be rebased yet", where)


def rebase_file(fp: FilePatch, old: bytes | None, patched: bytes | None, new: bytes | None,
                labels: tuple[str, str, str]) -> tuple[bytes | None, bool, list[HunkOutcome]]:  # fmt: skip
    """One file of patch k: (result for new k, conflicted, outcome per hunk of the old patch)."""
    path = fp.path
    if new == patched:  # the new base already holds this file exactly as the patch leaves it
        return new, False, [_outcome(fp, i, "already-upstream") for i in range(len(fp.hunks))]
    if old is None or patched is None or new is None:
        return _whole_file(fp, old, patched, new, labels)
    lines = split_lines(new)
    outcomes = [classify_hunk(path, i, hunk, old, lines) for i, hunk in enumerate(fp.hunks)]
    if all(h.status == "clean" for h in outcomes):
        try:
            return join_lines(apply_hunks(lines, fp.hunks, path)), False, outcomes
        except HunkMismatch:  # each applies alone, not all in order: let the merge decide
            pass
    result, conflicts = git.merge_file(new, old, patched, labels)
    if conflicts and not any(h.status == "conflict" for h in outcomes):
        for h in outcomes:
            if h.status == "merged":
                h.status, h.note = "conflict", "conflicts only together with the file's other hunks"
    elif not conflicts:
        for h in outcomes:
            if h.status == "conflict":
                h.status, h.note = "merged", "resolved by the whole-file merge"
    return result, bool(conflicts), outcomes


def _whole_file(fp: FilePatch, old: bytes | None, patched: bytes | None, new: bytes | None,
                labels: tuple[str, str, str]) -> tuple[bytes | None, bool, list[HunkOutcome]]:  # fmt: skip
    """Creations, deletions and files the new base removed: no hunk-level merge is possible."""
    count = max(len(fp.hunks), 1)
    if new == old:  # the new base did not touch the file: the patch's result stands
        return patched, False, [_outcome(fp, i, "clean", offset=0) for i in range(count)]
    if patched is None:
        note = "the patch deletes the file, the new base changed it: keep or delete it by hand"
    elif new is None:
        note = "the new base removed the file the patch changes"
    else:
        note = "the patch creates the file, the new base has it with other content"
    result, _ = git.merge_file(new or b"", old or b"", patched or b"", labels)
    return result, True, [_outcome(fp, i, "conflict", note=note) for i in range(count)]


def _outcome(fp: FilePatch, index: int, status: str, **extra) -> HunkOutcome:
    header = fp.hunks[index].header() if index < len(fp.hunks) else "(whole file)"
    return HunkOutcome(file=fp.path, hunk=index + 1, header=header, status=status, **extra)


def classify_hunk(path: str, index: int, hunk: Hunk, old: bytes, new_lines: list[str]) -> HunkOutcome:
    """Clean (exact context, any offset), already-upstream (reverse applies), merged or conflict."""
    outcome = HunkOutcome(file=path, hunk=index + 1, header=hunk.header(), status="clean")
    anchor = hunk.old_start - 1 if hunk.old_count else hunk.old_start
    try:
        (at, _, _), = splice_plan(new_lines, [hunk], path)  # fmt: skip
        outcome.offset = at - anchor
        return outcome
    except HunkMismatch as mismatch:
        outcome.mismatch, outcome.mismatch_text = mismatch.to_dict(), str(mismatch)
    if (found := upstream_at(hunk, new_lines)) is not None:
        at, where = found
        result = hunk_sides(hunk)[1]
        outcome.status = "already-upstream"
        lines = f"{at + 1}-{at + len(result)}"
        outcome.note = f"the new base already has the hunk's result at lines {lines} ({where}); dropped"
        outcome.evidence = [
            f"{at + 1 + k}: {ln.rstrip(chr(10))}" for k, ln in enumerate(result[:EVIDENCE_LINES])
        ]
        return outcome
    old_lines = split_lines(old)
    alone = join_lines(apply_hunks(old_lines, [hunk], path))
    merged, conflicts = git.merge_file(join_lines(new_lines), old, alone, ("new base", "old base", "patch"))
    outcome.status = "conflict" if conflicts else "merged"
    outcome.conflicts = conflict_sides(merged) if conflicts else []
    return outcome


def upstream_at(hunk: Hunk, new_lines: list[str]) -> tuple[int, str] | None:
    """Where the new base holds the hunk's result *at the hunk's place* — inside the function its
    header names, else within ``UPSTREAM_WINDOW`` lines of where the patch put it — and how that
    place was found. The same lines elsewhere in the file (another function) are no evidence."""
    result = hunk_sides(hunk)[1]
    if not result:
        return None
    found = [i for i in range(len(new_lines) - len(result) + 1) if new_lines[i : i + len(result)] == result]
    expected = max(hunk.new_start - 1, 0)
    if bounds := _function_bounds(hunk.section, new_lines, expected):
        start, end = bounds
        inside = [i for i in found if start <= i < end]
        return (
            (min(inside, key=lambda i: abs(i - expected)), f"in {hunk.section.strip()}") if inside else None
        )
    near = [i for i in found if abs(i - expected) <= UPSTREAM_WINDOW]
    if not near:
        return None
    return min(
        near, key=lambda i: abs(i - expected)
    ), f"within {UPSTREAM_WINDOW} lines of line {expected + 1}"


def _function_bounds(section: str, lines: list[str], expected: int) -> tuple[int, int] | None:
    """(header line, end) of the block the hunk header names — the nearest such line to
    ``expected``; the block ends at the next line indented no deeper than its header."""
    head = section.strip()
    if not head:
        return None
    starts = [i for i, ln in enumerate(lines) if ln.strip().startswith(head)]
    if not starts:
        return None
    start = min(starts, key=lambda i: abs(i - expected))
    indent = len(lines[start]) - len(lines[start].lstrip())
    for end in range(start + 1, len(lines)):
        text = lines[end]
        if text.strip() and len(text) - len(text.lstrip()) <= indent:
            return start, end
    return start, len(lines)


def reverse_hunk(hunk: Hunk) -> Hunk:
    swap = {"+": "-", "-": "+"}
    lines = [swap.get(ln[:1], ln[:1]) + ln[1:] for ln in hunk.lines]
    return Hunk(hunk.new_start, hunk.new_count, hunk.old_start, hunk.old_count, lines)


def conflict_sides(merged: bytes) -> list[ConflictSides]:
    """The diff3 blocks of a merge result: new base ('ours'), old base, patch ('theirs')."""
    blocks: list[ConflictSides] = []
    part = None
    for line in split_lines(merged):
        bare = line.rstrip("\r\n")
        if bare.startswith("<<<<<<<"):
            blocks.append(ConflictSides([], [], []))
            part = blocks[-1].new_base
        elif part is not None and bare.startswith("|||||||"):
            part = blocks[-1].old_base
        elif part is not None and bare == "=======":
            part = blocks[-1].patch
        elif part is not None and bare.startswith(">>>>>>>"):
            part = None
        elif part is not None:
            part.append(line)
    return blocks


def marker_lines(data: bytes | None) -> list[int]:
    """1-based lines that still look like conflict markers."""
    if not data:
        return []
    return [n for n, ln in enumerate(split_lines(data), 1) if MARKER.match(ln.rstrip("\r\n"))]


def rebased_series(source: SourceSeries, pin: Pin, patches: list[SplitPatch]) -> Series:
    """The new series record: patchkit's own patches renumbered on the new base, a foreign
    series' patches under their own names; the old commits kept."""
    for number, sp in enumerate(patches, 1):
        sp.number = number
        if sp.filename not in source.foreign:
            sp.filename = f"{number:04d}-{sp.domain}.patch"
    return Series(base=pin, patches=patches, commits=source.commits, path_prefix=source.path_prefix)
