"""The last revision's audit record, found without a flag, so every report says what changed since.

A revision is the series' patches as they change code (names and normalised diffs, ``compare``'s
view). Two places keep the last one:

- beside the report: before ``reports/audit.json`` is replaced by the record of another revision,
  it is kept as ``reports/audit.previous.json``; auditing the same revision again keeps that prior
  revision (a re-run still shows what the last edit changed);
- the cache (unless ``--no-cache``): per series directory, its latest record and the one before
  it, for runs whose reports are written elsewhere each time (``--json -``, a fresh CI workspace).

A record beside the report counts as this series' when it names the same series directory or shares
a domain with it (a CI checkout moves the directory, not the domains).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from patchkit import cache
from patchkit.atomic import write_atomic
from patchkit.audit.model import AuditResult
from patchkit.interdiff.compare import normalise
from patchkit.interdiff.since import compare_records

KIND = "audit-records"
PRIOR = "previous"


def prior_path(record: Path) -> Path:
    """``reports/audit.json`` -> ``reports/audit.previous.json``."""
    return record.with_name(f"{record.stem}.{PRIOR}{record.suffix or '.json'}")


def since_last_revision(result: AuditResult, record: Path | None, use_cache: bool) -> dict | None:
    """What changed since the last revision (the ``since`` of the record), or None when none is
    known; keeps the record ``record`` holds as the prior revision when this run replaces it with
    another revision's, and files this record in the cache."""
    revision = _revision([(p.patch, p.diff) for p in result.patches])
    chosen: tuple[dict, str] | None = None
    if record is not None:
        prior = prior_path(record)
        current = _load(record)
        if current is not None and _ours(current, result) and _revision_of(current) != revision:
            write_atomic(prior, record.read_bytes())  # the replaced record, kept as the prior revision
        old = _load(prior)
        if old is not None and _ours(old, result):
            chosen = (old, str(prior))
    if use_cache:
        chosen = _through_cache(result, revision, chosen)
    if chosen is None:
        return None
    try:
        return compare_records(chosen[0], result, chosen[1])
    except (KeyError, TypeError, ValueError):  # a record this reader cannot compare: no "since"
        return None


def beside(record: Path, result: AuditResult) -> dict | None:
    """``patchkit report RECORD``: what changed since the prior revision kept beside it, if any."""
    old = _load(prior_path(record))
    if old is None or not _ours(old, result):
        return None
    try:
        return compare_records(old, result, str(prior_path(record)))
    except (KeyError, TypeError, ValueError):
        return None


def _through_cache(result: AuditResult, revision: str, chosen: tuple[dict, str] | None):
    key = hashlib.sha256(str(Path(result.series_dir).resolve()).encode()).hexdigest()[:32]
    latest, prior = cache.get_json(KIND, f"{key}-latest"), cache.get_json(KIND, f"{key}-{PRIOR}")
    if _is_record(latest) and _revision_of(latest) != revision:
        cache.put_json(KIND, f"{key}-{PRIOR}", latest)
        prior = latest
    if chosen is None and _is_record(prior):
        chosen = (prior, str(cache.json_path(KIND, f"{key}-{PRIOR}")))
    cache.put_json(KIND, f"{key}-latest", {**result.to_dict(), "since": {}})
    return chosen


def _load(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if _is_record(data) else None


def _is_record(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("patches"), list)
        and all(isinstance(p, dict) and isinstance(p.get("patch"), str) for p in data["patches"])
    )


def _ours(old: dict, result: AuditResult) -> bool:
    """Is ``old`` a record of the series ``result`` audits (another revision of it)?"""
    if str(old.get("series_dir")) == str(result.series_dir):
        return True
    return bool({p.get("domain") for p in old["patches"]} & {p.domain for p in result.patches})


def _revision_of(data: dict) -> str:
    return _revision([(p["patch"], p.get("diff", "")) for p in data["patches"]])


def _revision(patches: list[tuple[str, str]]) -> str:
    digest = hashlib.sha256()
    for name, diff in patches:
        digest.update(name.encode("utf-8", "surrogateescape") + b"\0")
        digest.update("\n".join(normalise(str(diff))).encode("utf-8", "surrogateescape") + b"\0")
    return digest.hexdigest()
