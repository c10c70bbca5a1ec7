"""The provenance a patched wheel carries in its ``.dist-info``: what it was built from and by what.

``patchkit-provenance.json`` (listed in RECORD like every other member) holds the pin, the source
wheel's file name and sha256, the series (its directory as the project names it, its hash, each
patch's name, sha256 and whether it was applied or skipped), every file that differs from the
source wheel (sha256 before and after, and why: the series or the version module), the
distribution's name and version, patchkit's version, and the audit verdict when one was given.
It holds no time and no absolute path the build did not ask for, so two builds give the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from patchkit.errors import UserError
from patchkit.values import Pin

if TYPE_CHECKING:  # status reads a provenance without loading the audit model
    from patchkit.audit.model import AuditResult

FILENAME = "patchkit-provenance.json"
SCHEMA = 1
CAUSES = ("series", "version")


def series_hash(identity: list[dict]) -> str:
    """The series' identity (each patch's and overlay's name and sha256, in order) as one sha256."""
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def render(record: dict) -> bytes:
    return (json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def pin_record(pin: Pin) -> dict:
    return {k: v for k, v in pin.to_dict().items() if v is not None and k != "tree_hash"}


def patch_rows(identity: list[dict], skipped: dict[str, list[str]], partly: list[str]) -> list[dict]:
    """Each patch's name, sha256 and what became of it in the wheel."""
    rows = []
    for patch in identity:
        rels = skipped.get(patch["name"])
        status = "applied" if rels is None else "partly-applied" if patch["name"] in partly else "skipped"
        rows.append({**patch, "status": status, "skipped": rels or []})
    return rows


def audit_summary(result: AuditResult, entries: list, pin: Pin, sha256: str, where: str) -> dict:
    """The verdicts of ``result`` when it is the audit of this series on this pin; UserError naming
    the first difference otherwise (another base, a patch missing, a patch whose diff changed)."""
    from patchkit.diff.hunks import render_diff

    if pin.sha256 and result.base.sha256 and result.base.sha256.lower() != pin.sha256.lower():
        raise UserError(f"the audit is of base {result.base.sha256}, not the pinned {pin.sha256}", where)
    audited = {p.patch: p for p in result.patches}
    for entry in entries:
        if entry.overlay is not None:
            continue
        found = audited.get(entry.name)
        if found is None:
            raise UserError(
                f"the audit has no patch {entry.name} (an audit of another series, or a shard)", where
            )
        if not found.diff.startswith(render_diff([fp for p in entry.patches for fp in p.files])):
            raise UserError(
                f"the audit's {entry.name} is not this series' {entry.name} (its diff differs)", where
            )
    return {
        "sha256": sha256,
        "created": result.created,
        "verdict": result.verdict,
        "patches": [{"name": p.patch, "verdict": p.verdict} for p in result.patches],
        "gates": sorted({g.gate for p in result.patches for g in p.gates}),
    }


def parse(data: bytes, where: str) -> dict:
    """A provenance record, its shape checked; UserError naming the first field that is wrong."""
    try:
        record = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise UserError(f"the provenance is not JSON: {exc}", where) from None
    _need(
        record,
        "",
        {
            "schema": int,
            "patchkit": dict,
            "pin": dict,
            "source_wheel": dict,
            "distribution": dict,
            "series": dict,
            "files": dict,
        },
        where,
    )
    try:
        Pin.from_dict(record["pin"])
    except (ValueError, TypeError) as exc:
        raise UserError(f"provenance pin: {exc}", where) from None
    if record["schema"] != SCHEMA:
        raise UserError(
            f"provenance schema {record['schema']} is not {SCHEMA} (another patchkit wrote it)", where
        )
    epoch = record.get("source_date_epoch")
    if not isinstance(epoch, (int, type(None))) or isinstance(epoch, bool):
        raise UserError("provenance source_date_epoch: expected an integer or null", where)
    if "audit" in record:
        _need(record["audit"], "audit.", {"sha256": str, "verdict": str}, where)
    _need(record["source_wheel"], "source_wheel.", {"filename": str, "sha256": str}, where)
    _need(record["distribution"], "distribution.", {"name": str, "version": str}, where)
    _need(record["series"], "series.", {"dir": str, "hash": str, "patches": list}, where)
    for i, patch in enumerate(record["series"]["patches"]):
        _need(
            patch,
            f"series.patches[{i}].",
            {"name": str, "sha256": str, "status": str, "skipped": list},
            where,
        )
    for path, entry in record["files"].items():
        _need(entry, f"files[{path!r}].", {"cause": str}, where)
        for key in ("base", "sha256"):
            if not isinstance(entry.get(key), (str, type(None))):
                raise UserError(f"provenance files[{path!r}].{key}: expected a sha256 or null", where)
        if entry["cause"] not in CAUSES:
            raise UserError(
                f"provenance files[{path!r}].cause: {entry['cause']!r} is not one of {CAUSES}", where
            )
    return record


def pin_of(record: dict) -> Pin:
    return Pin.from_dict(record["pin"])


def identity_of(record: dict) -> list[dict]:
    return [{"name": p["name"], "sha256": p["sha256"]} for p in record["series"]["patches"]]


def _need(value: Any, at: str, fields: dict[str, type], where: str) -> None:
    if not isinstance(value, dict):
        raise UserError(f"provenance {at.rstrip('.') or 'record'}: expected an object", where)
    for key, kind in fields.items():
        if not isinstance(value.get(key), kind) or (kind is int and isinstance(value.get(key), bool)):
            raise UserError(f"provenance {at}{key}: expected {kind.__name__}", where)
