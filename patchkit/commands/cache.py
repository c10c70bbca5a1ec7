"""``patchkit cache``: what the cache holds (kinds, entries, sizes, which patchkit they belong to),
and pruning it — by default what no longer serves this patchkit: results of other versions or other
code, and builds that never finished."""

from __future__ import annotations

import json
import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from patchkit import cache, output
from patchkit.atomic import write_atomic
from patchkit.errors import EXIT_OK, UserError
from patchkit.project import Project

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@dataclass
class Options:
    prune: bool = False
    older_than: str | None = None
    everything: bool = False
    dry_run: bool = False
    json_out: Path | None = None


def run(project: Project, options: Options) -> int:
    prune, everything, dry_run, json_out = (
        options.prune,
        options.everything,
        options.dry_run,
        options.json_out,
    )
    age = parse_age(options.older_than) if options.older_than is not None else None
    found = cache.entries()
    root, mine = project.cache_root, cache.code_identity()
    report: dict = {
        "command": "cache",
        "root": str(root),
        "code": mine,
        "entries": [_record(e) for e in found],
    }
    if prune or age is not None or everything or dry_run:
        chosen = [
            e for e in found if everything or e.stale or (age is not None and time.time() - e.mtime > age)
        ]
        doing = "would remove" if dry_run else "removed"
        for entry in chosen:
            if not dry_run:
                cache.remove(entry)
            output.detail(f"  {doing} {entry.kind}/{entry.name} ({human_size(entry.size)}; "
                          f"{_why(entry, everything, age)})")  # fmt: skip
        groups: dict[tuple[str, str], list[cache.Entry]] = defaultdict(list)
        for entry in chosen:
            groups[entry.kind, _why(entry, everything, age)].append(entry)
        for (kind, why), items in groups.items():
            size = human_size(sum(e.size for e in items))
            output.info(
                f"{doing} {kind}: {len(items)} entr{'y' if len(items) == 1 else 'ies'} ({size}; {why})"
            )
        freed = sum(e.size for e in chosen)
        kept = [e for e in found if e not in chosen]
        verb = "would free" if dry_run else "freed"
        output.info(f"{verb} {human_size(freed)} in {len(chosen)} entr{'y' if len(chosen) == 1 else 'ies'}; "
                    f"{len(kept)} kept ({human_size(sum(e.size for e in kept))}) in {root}")  # fmt: skip
        report.update(action="dry-run" if dry_run else "pruned", removed=[_record(e) for e in chosen])
    else:
        show(found, root, mine)
        report["action"] = "show"
    if json_out is not None:
        write_atomic(json_out, json.dumps(report, indent=1) + "\n")
    return EXIT_OK


def show(found: list[cache.Entry], root: Path, mine: str) -> None:
    output.info(f"cache {root} (this patchkit: {mine})")
    by_kind: dict[str, list[cache.Entry]] = defaultdict(list)
    for entry in found:
        by_kind[entry.kind].append(entry)
    rows = [[kind, str(len(items)), human_size(sum(e.size for e in items)), _belongs(items, mine)]
            for kind, items in by_kind.items()]  # fmt: skip
    if rows:
        output.info(output.table(["kind", "entries", "size", "belongs to"], rows))
    stale = [e for e in found if e.stale]
    total = human_size(sum(e.size for e in found))
    useless = human_size(sum(e.size for e in stale))
    output.info(f"{len(found)} entries, {total}; {len(stale)} of no use to this patchkit ({useless}): "
                "`patchkit cache --prune` removes them")  # fmt: skip
    for entry in found:
        output.detail(
            f"  {entry.kind}/{entry.name}  {human_size(entry.size)}  {entry.code or 'content-keyed'}"
        )


def _belongs(items: list[cache.Entry], mine: str) -> str:
    codes = Counter(e.code for e in items if e.code is not None)
    parts = [f"this patchkit: {codes.pop(mine)}"] if mine in codes else []
    parts += [f"{code}: {count}" for code, count in sorted(codes.items())]
    if keyed := sum(1 for e in items if e.code is None and not e.leftover):
        parts.append(f"content-keyed (any patchkit): {keyed}")
    if leftovers := sum(1 for e in items if e.leftover):
        parts.append(f"unfinished builds: {leftovers}")
    return "; ".join(parts)


def _why(entry: cache.Entry, everything: bool, age: float | None) -> str:
    if entry.leftover:
        return "a build that never finished"
    if entry.stale:
        return f"belongs to patchkit {entry.code}"
    if age is not None and not everything:
        return f"last written more than {_age_text(age)} ago"
    return "--all"


def _age_text(seconds: float) -> str:
    unit = next(u for u in ("w", "d", "h", "m", "s") if seconds >= _UNITS[u] or u == "s")
    return f"{seconds / _UNITS[unit]:g}{unit}"


def _record(entry: cache.Entry) -> dict:
    return {"kind": entry.kind, "name": entry.name, "size": entry.size, "mtime": round(entry.mtime, 3),
            "code": entry.code, "stale": entry.stale}  # fmt: skip


def parse_age(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``2w`` or a bare number of days, as seconds."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text)
    if match is None:
        raise UserError(f"--older-than {text!r}: expected a number and a unit, e.g. 30d, 12h, 2w")
    return float(match.group(1)) * _UNITS[match.group(2) or "d"]


def human_size(size: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size} B"
