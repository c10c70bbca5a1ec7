"""Terminal output for the commands (rich), kept apart from the logic."""

from __future__ import annotations

import sys
from pathlib import Path

from patchkit.model import Replay, Series


def _console(stderr: bool = False):
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else 160  # pipes and CI logs: do not squeeze tables to 80
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=width)


def error(message: str) -> None:
    print(f"patchkit: {message}", file=sys.stderr)


def info(message: str) -> None:
    _console().print(message, markup=False)


def split_summary(series: Series, replay: Replay, out: Path, seconds: float, explain: bool) -> None:
    from rich.table import Table

    console = _console()
    commits = [c for c in replay.commits if c is not None]
    hunks = sum(len(fp.hunks) for p in replay.patches for fp in p.files)
    console.print(
        f"replay: {len(replay.patches)} patch(es) ({len(commits)} with commit metadata), "
        f"{hunks} hunks; paths rooted at '{series.path_prefix or '.'}'",
        markup=False,
    )
    table = Table(title=f"series in {out}")
    for column in ("#", "patch", "files", "+/-", "sources", "needs"):
        table.add_column(column)
    for sp in series.patches:
        added = sum(fp.added for fp in sp.files)
        removed = sum(fp.removed for fp in sp.files)
        table.add_row(str(sp.number), sp.filename, str(len(sp.files)), f"+{added}/-{removed}",
                      ",".join(str(c + 1) for c in sp.source_commits),
                      ", ".join(sp.depends_on) or "-")  # fmt: skip
    console.print(table)
    for warning in series.warnings:
        console.print(f"warning: {warning}", markup=False)
    for index in series.absorbed:
        commit = series.commits[index]
        subject = commit.subject if commit else replay.patches[index].source
        console.print(
            f"note: commit {index + 1} ({subject}) leaves no line of its own in the net diff: "
            "later commits rewrote or removed what it changed",
            markup=False,
        )
    if explain:
        explain_table(series)
    proof = series.proof
    verdict = "holds" if proof.get("ok") else "FAILS"
    console.print(
        f"proof {verdict}: base + series == base + replay over {proof.get('files_checked')} "
        f"file(s) (tree sha256 {proof.get('series_tree_sha256', '')[:16]}); {seconds:.2f} s",
        markup=False,
    )


def explain_table(series: Series) -> None:
    """One line per changed block: where it is, where it went, and the rule that decided."""
    console = _console()
    console.print("hunk -> domain -> why (base line; commits are 1-based replay positions)", markup=False)
    for rec in series.assignments:
        mixed = ", mixed hunk" if rec.mixed else ""
        commits = ",".join(str(c + 1) for c in rec.commits) or "-"
        console.print(
            f"  {rec.file}:{rec.old_line} (hunk {rec.hunk + 1}{mixed}) +{rec.added}/-{rec.removed}"
            f" -> {rec.domain}  [{rec.rule}]  commits {commits}",
            markup=False,
            overflow="ignore",
            crop=False,
        )
