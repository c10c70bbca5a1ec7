"""What changed since the last audited revision: the previous audit record (``--since OLD.json``, or
the one ``interdiff/previous`` finds) against this one, per patch (unchanged, changed, added,
renamed; dropped ones listed) and which gates changed status."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from patchkit.audit.model import AuditResult
from patchkit.errors import UserError
from patchkit.interdiff.compare import Side, compare, normalise


def changes_since(old_path: Path, result: AuditResult) -> dict:
    try:
        old = json.loads(old_path.read_text("utf-8"))
        return compare_records(old, result, str(old_path))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"--since {old_path}: not an audit record ({exc})") from None


def compare_records(old: dict[str, Any], result: AuditResult, where: str) -> dict:
    """``old`` (a record as JSON data; ``where`` names it) against ``result``. A record without
    patches raises KeyError or TypeError."""
    old_patches = old["patches"]
    olds = [Side(p["patch"], p["domain"], p["patch"], normalise(p.get("diff", ""))) for p in old_patches]
    news = [Side(p.patch, p.domain, p.patch, normalise(p.diff)) for p in result.patches]
    gates_of = {p["patch"]: {g["gate"]: g["status"] for g in p.get("gates", [])} for p in old_patches}
    patches: dict[str, dict] = {}
    dropped = []
    for row in compare(olds, news):
        if row.new is None:
            dropped.append(row.old)
            continue
        current = next(p for p in result.patches if p.patch == row.new)
        before = gates_of.get(row.old or "", {})
        changed = [
            [g.gate, before.get(g.gate), g.status] for g in current.gates if before.get(g.gate) != g.status
        ]
        lines = sum(1 for x in row.interdiff if x[:1] in "+-" and not x.startswith(("+++", "---")))
        patches[row.new] = {"status": row.status, "old": row.old, "gates": changed, "interdiff_lines": lines}
    counts = {
        s: sum(1 for p in patches.values() if p["status"] == s)
        for s in ("unchanged", "changed", "renamed", "added")
    }
    counts["dropped"] = len(dropped)
    return {
        "record": where,
        "created": old.get("created", ""),
        "verdict": old.get("verdict", ""),
        "counts": counts,
        "patches": patches,
        "dropped": dropped,
    }
