"""What a rebase did to every hunk, as JSON-ready records, and the terminal summary of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from patchkit.values import JsonMixin, Pin

HunkStatus = Literal["clean", "merged", "already-upstream", "conflict", "resolved"]
PatchStatus = Literal["rebased", "dropped", "conflict", "resolved", "pending"]
STATUSES: tuple[str, ...] = ("clean", "merged", "already-upstream", "conflict", "resolved")


@dataclass
class ConflictSides(JsonMixin):
    """One conflict region of a hunk: the same lines as the old base, new base and patch have them."""

    old_base: list[str]
    new_base: list[str]
    patch: list[str]


@dataclass
class HunkOutcome(JsonMixin):
    file: str
    hunk: int  # 1-based index of the hunk in the old patch's file
    header: str
    status: HunkStatus
    offset: int | None = None  # clean: lines the hunk moved by in the new base
    note: str = ""
    mismatch: dict[str, Any] | None = None  # patchtext.HunkMismatch.to_dict() against the new base
    mismatch_text: str = ""  # its one-line message: expected, found, closest match
    conflicts: list[ConflictSides] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)  # already-upstream: the new base's lines, numbered


@dataclass
class PatchOutcome(JsonMixin):
    patch: str  # file name in the old series
    domain: str
    status: PatchStatus
    new_patch: str | None = None  # file name in the rebased series (None when dropped or stopped)
    hunks: list[HunkOutcome] = field(default_factory=list)
    conflict_files: list[str] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for h in self.hunks if h.status == status)


@dataclass
class RebaseReport(JsonMixin):
    series_dir: str
    out: str
    old_base: Pin
    new_base: Pin
    status: Literal["done", "conflict"] = "done"
    patches: list[PatchOutcome] = field(default_factory=list)
    worktree: str | None = None  # where the conflicting patch waits to be resolved
    pending: list[str] = field(default_factory=list)  # patches after the stop, not reached yet
    counts: dict[str, int] = field(default_factory=dict)
    proof: dict[str, Any] = field(default_factory=dict)

    def tally(self) -> dict[str, int]:
        self.counts = {s: sum(p.count(s) for p in self.patches) for s in STATUSES}
        return self.counts


def describe_pin(pin: Pin) -> str:
    """A short human description of a base: 'vllm 1.3.0 (index)', 'path /x (tree 1a2b3c4d5e6f)'."""
    if pin.source == "index":
        what = f"{pin.name} {pin.version or '?'} (index)"
    elif pin.source == "git":
        what = f"{pin.name} {pin.rev or '?'} (git {pin.url or ''})".replace(" )", ")")
    else:
        what = f"path {pin.path}"
    return f"{what} (tree {pin.tree_hash[:12]})" if pin.tree_hash else what


def print_summary(report: RebaseReport, seconds: float) -> None:
    from rich.table import Table

    from patchkit.ui.console import rich_console

    console = rich_console()
    console.print(
        f"rebase {report.series_dir}: {describe_pin(report.old_base)} -> {describe_pin(report.new_base)}",
        markup=False,
    )
    table = Table(title=f"rebased series in {report.out}")
    for column in ("#", "patch", "status", *STATUSES, "new patch"):
        table.add_column(column)
    for number, po in enumerate(report.patches, 1):
        counts = [str(po.count(s) or "-") for s in STATUSES]
        table.add_row(str(number), po.patch, po.status, *counts, po.new_patch or "-")
    for number, name in enumerate(report.pending, len(report.patches) + 1):
        table.add_row(str(number), name, "pending", *["-"] * len(STATUSES), "-")
    console.print(table)
    for po in report.patches:
        for h in po.hunks:
            if h.status == "clean" and not h.offset:
                continue
            where = f"  {po.patch} {h.file} #{h.hunk} {h.header}: {h.status}"
            if h.status == "clean":
                where += f" (offset {h.offset:+d})"
            console.print(where + (f" - {h.note}" if h.note else ""), markup=False, crop=False)
            if h.mismatch_text and h.status in ("merged", "conflict"):
                console.print(f"      {h.mismatch_text}", markup=False, crop=False, overflow="ignore")
            for sides in h.conflicts if h.status == "conflict" else []:
                console.print(_sides_table(h, sides))
    counts = report.tally()
    console.print(
        "hunks: " + ", ".join(f"{counts[s]} {s}" for s in STATUSES) + f"; {seconds:.2f} s",
        markup=False,
    )
    if report.status == "conflict":
        # the patch it stopped at (the last one; the state's ``conflicts``): an earlier patch's
        # conflicts were resolved by the --continue that carried it
        files = report.patches[-1].conflict_files if report.patches else []
        console.print(
            f"CONFLICT in {', '.join(files)}: resolve the markers in {report.worktree}, then run "
            "'patchkit rebase --continue' (or '--abort')",
            markup=False,
        )
    elif report.proof:
        verdict = "holds" if report.proof.get("ok") else "FAILS"
        console.print(f"check {verdict}: new base + rebased series == rebase result", markup=False)


def _sides_table(h: HunkOutcome, sides: ConflictSides):
    from rich.table import Table

    table = Table(title=f"{h.file} {h.header}", show_lines=False)
    for column in ("old base", "new base", "patch"):
        table.add_column(column, overflow="fold")
    columns = [sides.old_base, sides.new_base, sides.patch]
    for row in range(max(len(c) for c in columns)):
        table.add_row(*[c[row].rstrip("\n") if row < len(c) else "" for c in columns])
    return table
