"""``patchkit diff OLD NEW``: what changed between two revisions of a series, patch by patch."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from patchkit import output
from patchkit.commands.edit import write_json
from patchkit.errors import EXIT_OK
from patchkit.project import Project


@dataclass
class Options:
    old: str
    new: str
    repo: Path | None = None
    interdiff: bool = False
    json_out: Path | None = None


def run(project: Project, options: Options) -> int:
    from patchkit.interdiff.compare import compare, load_side

    old, new, repo, interdiff, json_out = (
        options.old,
        options.new,
        options.repo,
        options.interdiff,
        options.json_out,
    )

    rows = compare(load_side(old, repo), load_side(new, repo))
    for row in rows:
        names = row.new if row.old in (None, row.new) else f"{row.old} -> {row.new}" if row.new else row.old
        extra = f" (+{sum(1 for x in row.interdiff if x.startswith('+') and not x.startswith('+++'))}"
        extra += f"/-{sum(1 for x in row.interdiff if x.startswith('-') and not x.startswith('---'))} lines)"
        output.info(f"{row.status:9} {names}{extra if row.interdiff else ''}")
        if interdiff:
            for line in row.interdiff:
                output.info(f"    {line}")
    counts = {
        s: sum(r.status == s for r in rows) for s in ("unchanged", "changed", "renamed", "added", "dropped")
    }
    output.info(", ".join(f"{v} {k}" for k, v in counts.items()))
    write_json(
        json_out,
        {"command": "diff", "old": old, "new": new, "counts": counts, "patches": [r.to_dict() for r in rows]},
    )
    return EXIT_OK
