"""Reviewer guide: the findings a careful vLLM maintainer would raise about one patch.

Deterministic and offline: Python ``ast`` over the pre- and post-image of each changed file, plus
path rules. ``Finding.line`` is a post-image line, except for ``PRE_IMAGE_KINDS`` (the thing is
gone) where it is the pre-image line; 0 means "the file as a whole".

Layout: ``view`` (each image parsed and walked once), ``findings`` (per-file detectors),
``crossfile`` (env vars, tests, commit messages), ``priority`` (priority, order, follow-ups).
"""

from __future__ import annotations

from patchkit.diff.model import Commit, FilePatch
from patchkit.guide.behaviour import behaviour_findings
from patchkit.guide.calls import cache_findings, call_arg_findings
from patchkit.guide.crossfile import env_findings, message_findings, test_findings
from patchkit.guide.findings import (
    CONSTRAINT_KWARGS,
    HIGH_KINDS,
    HOT_PATHS,
    LOG_METHODS,
    MAGIC_MIN,
    MAX_PER_KIND,
    PRE_IMAGE_KINDS,
    REWRITE_LINES,
    REWRITE_SHARE,
    capped,
    file_findings,
)
from patchkit.guide.imports import import_findings
from patchkit.guide.lead import finish, series_lead
from patchkit.guide.model import Finding
from patchkit.guide.native import native_findings
from patchkit.guide.priority import CONTRACT_PATHS, LEVELS, follow_ups, reading_order, reading_priority
from patchkit.guide.runtime import env_write_findings
from patchkit.guide.view import Images, Source, file_view

__all__ = [
    "CONSTRAINT_KWARGS",
    "CONTRACT_PATHS",
    "HIGH_KINDS",
    "HOT_PATHS",
    "LEVELS",
    "LOG_METHODS",
    "MAGIC_MIN",
    "MAX_PER_KIND",
    "PRE_IMAGE_KINDS",
    "REWRITE_LINES",
    "REWRITE_SHARE",
    "Source",
    "finish",
    "review_guide",
    "series_lead",
]


def review_guide(
    files: list[FilePatch],
    pre: Source,
    post: Source,
    commits: list[Commit | None],
    domain: str,
    source_files: list[set[str]] | None = None,
) -> dict:
    """The guide for one patch: findings, reading priority and order, follow-ups.

    ``source_files[i]`` is every file ``commits[i]`` touched across the whole series (a split
    patch holds only part of a commit); without it a commit's message is checked against this
    patch's files only.
    """
    images = Images()  # each distinct pre/post source is parsed and walked once for all detectors
    views = [file_view(fp, pre, post, images) for fp in files]
    findings: list[Finding] = []
    python_lines = [t for v in views if v.path.endswith(".py") for t in v.added.values()]
    for view in views:
        findings += capped(
            file_findings(view)
            + behaviour_findings(view)
            + cache_findings(view)
            + env_write_findings(view)
            + native_findings(view, python_lines)
        )
    findings += env_findings(views)
    findings += call_arg_findings(views)
    findings += import_findings(views, post)
    findings += test_findings(files, views)
    findings += message_findings(files, commits, source_files)
    sizes = [{"path": fp.path, "added": fp.added, "removed": fp.removed} for fp in files]
    return {
        "domain": domain,
        "findings": [f.to_dict() for f in findings],
        "priority": reading_priority(findings, sizes),
        "order": reading_order(files),
        "follow_ups": follow_ups(findings),
    }
