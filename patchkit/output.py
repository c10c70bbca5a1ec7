"""Terminal output for the commands, kept apart from the logic.

Plain ``print`` for the short-lived commands (split, apply, status: importing rich would cost them
more than their work); rich only where a report is rendered (``console``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from patchkit.ui.console import rich_console, verbosity

if TYPE_CHECKING:
    from patchkit.diff.model import Replay
    from patchkit.series.model import Series


def console(stderr: bool = False):
    return rich_console(stderr)


def error(message: str) -> None:
    print(f"patchkit: {message}", file=sys.stderr)


def info(message: str) -> None:
    """A line of what the command did (``-q`` drops it)."""
    if verbosity() >= 0:
        print(message)


def detail(message: str) -> None:
    """A line only ``-v`` asks for."""
    if verbosity() > 0:
        print(message)


def table(headers: list[str], rows: list[list[str]], title: str | None = None) -> str:
    """A plain aligned text table: readable in a terminal, a pipe and a CI log alike."""
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows)]

    def line(cells: list[str]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip()

    out = [title] if title else []
    out += [line(headers), line(["-" * width for width in widths])]
    out += [line(row) for row in rows]
    return "\n".join(out)


SOURCES_WIDTH = 40  # characters of the "sources" cell; past it, the first ranges and a count


def source_ranges(numbers: list[int], width: int = SOURCES_WIDTH) -> str:
    """1,3,4,5,9 -> "1,3-5,9"; a cell longer than ``width`` keeps its first ranges and says how many
    commits there are in all ("1-3,5,7-9,… (82 commits)"), so the table keeps its layout."""
    runs: list[list[int]] = []
    for n in sorted(set(numbers)):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    parts = [str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs]
    text = ",".join(parts)
    if len(text) <= width:
        return text
    tail = f",… ({len(set(numbers))} commits)"
    kept = []
    for part in parts:
        if len(",".join([*kept, part])) + len(tail) > width:
            break
        kept.append(part)
    return ",".join(kept) + tail


def split_summary(series: Series, replay: Replay, out: Path, seconds: float, explain: bool) -> None:
    commits = [c for c in replay.commits if c is not None]
    hunks = sum(len(fp.hunks) for p in replay.patches for fp in p.files)
    info(
        f"replay: {len(replay.patches)} patch(es) ({len(commits)} with commit metadata), "
        f"{hunks} hunks; paths rooted at '{series.path_prefix or '.'}'"
    )
    rows = []
    for sp in series.patches:
        added = sum(fp.added for fp in sp.files)
        removed = sum(fp.removed for fp in sp.files)
        rows.append([str(sp.number), sp.filename, str(len(sp.files)), f"+{added}/-{removed}",
                     source_ranges([c + 1 for c in sp.source_commits]),
                     ", ".join(sp.depends_on) or "-"])  # fmt: skip
    info(table(["#", "patch", "files", "+/-", "sources", "needs"], rows, title=f"series in {out}"))
    for warning in series.warnings:
        info(f"warning: {warning}")
    for index in series.absorbed:
        commit = series.commits[index]
        subject = commit.subject if commit else replay.patches[index].source
        info(
            f"note: commit {index + 1} ({subject}) leaves no line of its own in the net diff: "
            "later commits rewrote or removed what it changed"
        )
    if explain:
        explain_table(series)
        for step in series.resolutions:  # what the cross-file pass did, and why
            where = f"lines go to {step.get('domain')} (from {step.get('from')})"
            info(f"  {step['step']}: {step.get('why', '')} -> {where}")
    prefixes = series.proof.get("prefixes")
    if prefixes:
        detail(
            f"prefixes: {prefixes['states']} state(s), {prefixes['files_checked']} file check(s) "
            f"({len(prefixes.get('dependents') or [])} untouched module(s) that use what a state removes), "
            f"{prefixes['imports_checked']} import(s) resolved; {len(prefixes['failures'])} failure(s), "
            f"{len(prefixes['replay_findings'])} finding(s) of the replay"
        )
    proof = series.proof
    verdict = "holds" if proof.get("ok") else "FAILS"
    files = proof.get("files_checked")
    info(f"proof {verdict}: base + series == base + replay over {files} file(s); {seconds:.2f} s")
    detail(f"series tree sha256 {proof.get('series_tree_sha256', '')[:12]}")


def explain_table(series: Series) -> None:
    """One line per changed block: where it is, where it went, and the rule that decided."""
    info("hunk -> domain -> why (base line; commits are 1-based replay positions)")
    for rec in series.assignments:
        mixed = ", mixed hunk" if rec.mixed else ""
        commits = ",".join(str(c + 1) for c in rec.commits) or "-"
        info(
            f"  {rec.file}:{rec.old_line} (hunk {rec.hunk + 1}{mixed}) +{rec.added}/-{rec.removed}"
            f" -> {rec.domain}  [{rec.rule}]  commits {commits}"
        )
