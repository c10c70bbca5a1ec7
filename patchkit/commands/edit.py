"""``patchkit edit``: the series as a git work tree (one commit per patch); re-run, it says what is there."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from patchkit import output
from patchkit.atomic import write_atomic
from patchkit.commands.outcome import json_stdout, json_target
from patchkit.errors import EXIT_OK, UserError
from patchkit.project import EDIT_DIR, Project


@dataclass
class Options:
    series: Path | None = None  # default: the project's series dir
    path: Path = EDIT_DIR
    json_out: Path | None = None


def run(project: Project, options: Options) -> int:
    from patchkit.edit import worktree

    path, json_out = options.path, options.json_out
    if (path / ".git" / worktree.META).is_file():
        with worktree.lock(path):  # and a change a crash cut short finished or undone, said
            note = worktree.recover(path)
            if note:
                output.info(note)
            work, made = worktree.load(path), False
            lines = worktree.describe(work)
    else:
        series = project.series(options.series)
        if not (series / "series").is_file():
            raise UserError("not a series directory (no 'series' file)", str(series))
        tree, _ = project.base(series)
        work, made = worktree.create(series, path, tree.root)
        lines = worktree.describe(work)
    output.info(("made " if made else "already there, nothing overwritten: ") + lines[0])
    for line in lines[1:]:
        output.info(line)
    write_json(
        json_out,
        {
            "command": "edit",
            "made": made,
            "path": str(work.path),
            "series": str(work.series),
            "base_commit": work.base_commit,
            "patches": [{"name": n, "commit": c} for n, c in zip(work.names, work.commits)],
        },
    )
    return EXIT_OK


def write_json(json_out: Path | None, record: dict) -> None:
    if json_out is None:
        return
    text = json.dumps(record, indent=1) + "\n"
    if json_target(json_out) is None:
        print(text, end="", file=json_stdout())
    else:
        write_atomic(json_out, text)


def show(outcome, json_out: Path | None) -> int:
    """The lines every edit verb prints: where each hunk went, what stayed, the checks."""
    if outcome.recovered:
        output.info(outcome.recovered)
    for hunk, name in outcome.assigned:
        output.info(f"{hunk.where()} -> {name}")
    for hunk in outcome.left:
        output.info(
            f"{hunk.where()} stays in the work tree: it commutes with every patch "
            "(absorb --into PATCH, or patchkit new NAME)"
        )
    if outcome.dropped_commits:
        output.info(
            f"{outcome.dropped_commits} commit(s) of yours on top were taken apart: their changes are "
            "in the patches above or uncommitted"
        )
    checks = outcome.checks
    if outcome.dry_run:
        output.info("dry run: nothing changed")
    elif checks is not None:
        rewrote = ", ".join(outcome.changed) or "nothing"
        output.info(f"rewrote {rewrote}; proof: {checks.proof_files} file(s) equal")
        output.detail(
            f"git witness: tree {checks.witness_tree[:12]} = work tree commit {checks.head_tree[:12]}; "
            f"prefixes: {checks.prefix_states} state(s), {len(checks.prefix_failures)} failure(s)"
        )
    elif not outcome.assigned:
        output.info("nothing to fold into the series")
    write_json(json_out, {"command": outcome.op, **outcome.to_dict()})
    return EXIT_OK
