"""A plugin module's reviewer guide: findings (file = the module, line = its site), the lead a
reviewer reads first ("the function you replace changed upstream: read this diff"), follow-ups and
a reading priority — all catalogue messages, worded by ``report/``."""

from __future__ import annotations

from typing import Any

from patchkit.audit.model import RuntimeTarget
from patchkit.runtime.gates import CHANGED, Context
from patchkit.values import message

SEVERITY = {
    "runtime-missing": "high",
    "runtime-use-unresolved": "high",
    "runtime-signature-differs": "high",
    "runtime-witness-disagrees": "high",
    "runtime-changed-upstream": "medium",
    "runtime-unknown": "low",
    "runtime-registry-unmatched": "info",
}
CLOSE_READ = {k for k, v in SEVERITY.items() if v in ("high", "medium")}


def guide(
    rel: str, targets: list[RuntimeTarget], uses: list[dict[str, Any]], registry: dict[str, Any], ctx: Context
) -> dict[str, Any]:
    findings: list[dict[str, Any]] = []

    def add(kind: str, line: int, key: str, evidence: list[str] | None = None, **params: Any) -> None:
        findings.append(
            {
                "kind": kind,
                "severity": SEVERITY[kind],
                "file": rel,
                "line": line,
                "message": message(key, **params),
                "evidence": evidence or [],
            }
        )

    for t in targets:
        line = t.lines[0] if t.lines else 0
        if t.status == "missing":
            add(
                "runtime-missing",
                line,
                "finding.runtime-missing",
                list(t.moved_to),
                target=t.target,
                pin=ctx.pin,
                moved=_moved(t.moved_to),
            )
        elif t.status in CHANGED and ctx.old:
            add(
                "runtime-changed-upstream",
                line,
                "finding.runtime-changed-upstream",
                t.upstream_diff.splitlines()[:12],
                target=t.target,
                what=message(f"runtime.status.{t.status}"),
                old=ctx.old,
                pin=ctx.pin,
                where=t.defined_in or t.old_defined_in,
            )
        elif t.status == "unknown":
            add("runtime-unknown", line, "finding.runtime-unknown", target=t.target, why=t.reason)
        if t.signature_problems:
            add(
                "runtime-signature-differs",
                line,
                "finding.runtime-signature-differs",
                target=t.target,
                replacement=t.replacement,
                ours=t.signature,
                theirs=t.replacement_signature,
                why=list(t.signature_problems),
            )
        if t.real.get("agrees") is False:
            add(
                "runtime-witness-disagrees",
                line,
                "finding.runtime-witness-disagrees",
                target=t.target,
                differences=list(t.real.get("differences", [])),
            )
    for use in uses:
        if use["status"] == "absent":
            add(
                "runtime-use-unresolved",
                use["line"],
                "finding.runtime-use-unresolved",
                name=use["name"],
                pin=ctx.pin,
            )
    for item in registry.get("items", []):
        for named in item.get("targets", []):
            if named.startswith("vllm.") and not any(_covers(t.target, named) for t in targets):
                add(
                    "runtime-registry-unmatched",
                    registry.get("line", 0),
                    "finding.runtime-registry-unmatched",
                    target=named,
                    registry=registry.get("registry", ""),
                )
    kinds = {f["kind"] for f in findings}
    return {
        "lead": _lead(targets, uses, ctx),
        "findings": findings,
        "follow_ups": [message(f"follow.{k}") for k in SEVERITY if k in kinds],
        "priority": _priority(kinds),
    }


def _moved(moved_to: list[str]) -> dict[str, Any]:
    return message("runtime.moved", where=moved_to[0]) if moved_to else message("runtime.moved.none")


def _covers(target: str, named: str) -> bool:
    return target == named or target.startswith(named + ".") or named.startswith(target + ".")


def _lead(targets: list[RuntimeTarget], uses: list[dict[str, Any]], ctx: Context) -> dict[str, Any]:
    """The one sentence for the worst thing in the module, in this order of harm."""
    names = lambda chosen: [t.target for t in chosen]  # noqa: E731
    if missing := [t for t in targets if t.status == "missing"]:
        moved = [m for t in missing for m in t.moved_to[:1]]
        return message("runtime.lead.missing", names=names(missing), pin=ctx.pin, moved=_moved(moved))
    if absent := sorted({u["name"] for u in uses if u["status"] == "absent"}):
        return message("runtime.lead.uses", names=absent, pin=ctx.pin)
    if misfit := [t for t in targets if t.signature_problems]:
        return message("runtime.lead.signature", names=names(misfit), why=misfit[0].signature_problems[0])
    if (changed := [t for t in targets if t.status in CHANGED]) and ctx.old:
        return message("runtime.lead.changed", names=names(changed), old=ctx.old, pin=ctx.pin)
    if unknown := [t for t in targets if t.status == "unknown"]:
        return message("runtime.lead.unknown", names=names(unknown))
    if ctx.old:
        return message("runtime.lead.unchanged", count=len(targets), old=ctx.old, pin=ctx.pin)
    return message("runtime.lead.present", count=len(targets), pin=ctx.pin)


def _priority(kinds: set[str]) -> dict[str, Any]:
    if kinds & CLOSE_READ:
        return {"level": "close-read", "reason": message("runtime.priority.close-read")}
    if "runtime-unknown" in kinds:
        return {"level": "skim", "reason": message("runtime.priority.skim")}
    return {"level": "skip", "reason": message("runtime.priority.skip")}
