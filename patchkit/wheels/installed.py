"""An installed patchkit wheel, as ``patchkit status --target site-packages`` sees it: the
provenance in its ``.dist-info`` read, and checked against what is installed — every file the
provenance records (the ones patchkit changed) has its recorded sha256, their RECORD rows and the
provenance's own row are true, the installed version is the provenance's."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from patchkit import versions
from patchkit.apply import sitepackages
from patchkit.errors import UserError
from patchkit.values import Message
from patchkit.wheels import provenance


@dataclass
class InstalledWheel:
    record: dict | None
    lines: list[Message] = field(default_factory=list)
    problems: list[Message] = field(default_factory=list)


def provenance_file(dist: sitepackages.Distribution) -> Path | None:
    """The provenance in the distribution's ``.dist-info``; None when it was not installed from a
    patchkit wheel."""
    path = dist.dist_info / provenance.FILENAME
    return path if path.is_file() else None


def inspect(
    dist: sitepackages.Distribution,
    identity: list[dict] | None = None,
    series: str = "",
    applied_over: dict[str, str | None] | None = None,
) -> InstalledWheel | None:
    """None when the distribution carries no provenance (not installed from a patchkit wheel).
    ``identity``: a series to compare with (``patchkit status SERIES``); ``applied_over``: the files a
    later ``patchkit apply`` changed, with their sha256 before it (what the wheel left there)."""
    path = provenance_file(dist)
    if path is None:
        return None
    try:
        record = provenance.parse(path.read_bytes(), str(path))
    except (UserError, OSError) as exc:
        return InstalledWheel(None, problems=[Message("wheel.installed.unreadable", {"problem": str(exc)})])
    found = InstalledWheel(record)
    dist_record, series_record = record["distribution"], record["series"]
    found.lines.append(
        Message(
            "wheel.installed",
            {
                "name": dist_record["name"],
                "version": dist_record["version"],
                "series": series_record["dir"],
                "hash": series_record["hash"][:12],
                "source": record["source_wheel"]["filename"],
            },
        )
    )
    for patch in series_record["patches"]:
        status = {"key": f"wheel.status.{patch['status']}", "params": {}}
        if patch["skipped"]:
            found.lines.append(
                Message(
                    "wheel.installed.patch-skipped",
                    {"name": patch["name"], "status": status, "paths": patch["skipped"]},
                )
            )
        else:
            found.lines.append(Message("wheel.installed.patch", {"name": patch["name"], "status": status}))
    if not versions.same(dist.version, dist_record["version"]):
        found.problems.append(
            Message(
                "wheel.installed.version", {"installed": dist.version, "recorded": dist_record["version"]}
            )
        )
    for rel, entry in record["files"].items():
        target = dist.location / rel
        if applied_over is not None and rel in applied_over:
            actual = applied_over[rel]  # the apply's own state checks what it wrote since
        else:
            actual = hashlib.sha256(target.read_bytes()).hexdigest() if target.is_file() else None
        if actual != entry["sha256"]:
            found.problems.append(
                Message(
                    "wheel.installed.file",
                    {"path": rel, "recorded": entry["sha256"] or "absent", "actual": actual or "absent"},
                )
            )
    own = str(path.relative_to(dist.location)) if path.is_relative_to(dist.location) else None
    checked = set(record["files"]) | ({own} if own else set())
    for problem in sitepackages.record_problems(dist.dist_info, dist.location, only=checked):
        found.problems.append(Message("wheel.installed.record", {"problem": problem}))
    if identity is not None:
        same = identity == provenance.identity_of(record)
        found.lines.append(
            Message(
                "wheel.installed.series-same" if same else "wheel.installed.series-differs",
                {"series": series},
            )
        )
        if not same:
            found.problems.append(Message("wheel.installed.series-differs", {"series": series}))
    if not found.problems:
        found.lines.append(Message("wheel.installed.consistent", {"files": len(record["files"])}))
    return found
