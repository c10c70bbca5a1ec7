"""A plugin module's row of the record: its gates (what each one's witness was), verdict and guide.

Gates: ``targets`` (every target is in the pin), ``signature`` (each replacement accepts its
original's calls), ``upstream`` (with ``--since``: no original changed between the pins), ``uses``
(the module's own vLLM names resolve in the pin), ``witness`` (with ``--python``: a real import
agrees with the static answers). Each result's ``details["evidence"]`` names its witness.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from patchkit.audit.model import GateResult, GateStatus, PatchAudit, RuntimeTarget
from patchkit.values import Message, message

PROBLEM = ("missing",)
CHANGED = ("body-changed", "signature-changed", "new-upstream")
SEVERITY = {
    "runtime-missing": "high",
    "runtime-use-unresolved": "high",
    "runtime-signature-differs": "high",
    "runtime-witness-disagrees": "high",
    "runtime-changed-upstream": "medium",
    "runtime-unknown": "low",
    "runtime-registry-unmatched": "info",
}


@dataclass
class Context:
    """What every row shares: the pins' labels, each witness's description."""

    pin: str
    old: str | None = None  # --since
    static: dict[str, Any] = field(default_factory=dict)  # the static witness: tool, tree hashes
    real: dict[str, Any] | None = None  # the interpreter, when --python ran


def _gate(
    name: str, status: GateStatus, msg: Message, evidence: dict[str, Any], **details: Any
) -> GateResult:
    return GateResult(name, status, "", {"evidence": evidence, **details}, message=msg)


def targets_gate(targets: list[RuntimeTarget], ctx: Context) -> GateResult:
    missing = [t.target for t in targets if t.status in PROBLEM]
    unsettled = [
        t.target
        for t in targets
        if t.status == "unknown" and not (t.real.get("ran") and t.real.get("exists"))
    ]
    present = [t for t in targets if t.status not in PROBLEM]
    evidence = ctx.static
    if missing:
        return _gate(
            "targets",
            "failed",
            Message(
                "gate.runtime.targets.missing", {"count": len(missing), "names": missing, "pin": ctx.pin}
            ),
            evidence,
        )
    if unsettled:
        return _gate(
            "targets",
            "could-not-run",
            Message(
                "gate.runtime.targets.unknown", {"count": len(unsettled), "names": unsettled, "pin": ctx.pin}
            ),
            evidence,
            reason="static resolution could not tell; --python with the pinned vLLM can",
        )
    return _gate(
        "targets",
        "passed",
        Message("gate.runtime.targets.passed", {"count": len(present), "pin": ctx.pin}),
        evidence,
    )


def signature_gate(targets: list[RuntimeTarget], ctx: Context) -> GateResult:
    compared = [t for t in targets if t.replacement_signature and t.signature]
    wrong = [t.target for t in compared if t.signature_problems]
    if wrong:
        return _gate(
            "signature",
            "failed",
            Message("gate.runtime.signature.failed", {"count": len(wrong), "names": wrong}),
            ctx.static,
        )
    if not compared:
        return _gate(
            "signature",
            "skipped",
            Message("gate.runtime.signature.none"),
            ctx.static,
            reason="no replacement here is a def or lambda beside a def in the pin",
        )
    return _gate(
        "signature", "passed", Message("gate.runtime.signature.passed", {"count": len(compared)}), ctx.static
    )


def upstream_gate(targets: list[RuntimeTarget], ctx: Context) -> GateResult:
    changed = [t.target for t in targets if t.status in CHANGED or t.status == "missing"]
    if changed:
        return _gate(
            "upstream",
            "failed",
            Message(
                "gate.runtime.upstream.changed",
                {"count": len(changed), "names": changed, "old": ctx.old, "pin": ctx.pin},
            ),
            ctx.static,
        )
    same = [t for t in targets if t.status == "unchanged"]
    return _gate(
        "upstream",
        "passed",
        Message("gate.runtime.upstream.passed", {"count": len(same), "old": ctx.old, "pin": ctx.pin}),
        ctx.static,
    )


def uses_gate(uses: list[dict[str, Any]], ctx: Context) -> GateResult:
    absent = sorted({u["name"] for u in uses if u["status"] == "absent"})
    if absent:
        return _gate(
            "uses",
            "failed",
            Message("gate.runtime.uses.failed", {"count": len(absent), "names": absent, "pin": ctx.pin}),
            ctx.static,
            uses=uses,
        )
    return _gate(
        "uses",
        "passed",
        Message("gate.runtime.uses.passed", {"count": len({u["name"] for u in uses}), "pin": ctx.pin}),
        ctx.static,
        uses=uses,
    )


def witness_gate(targets: list[RuntimeTarget], ctx: Context, error: str | None) -> GateResult:
    real = ctx.real or {}
    if error:
        return _gate(
            "witness",
            "could-not-run",
            Message("gate.runtime.witness.no-interpreter", {"reason": error}),
            real,
            reason=error,
        )
    ran = [t for t in targets if t.real.get("ran")]
    failed = [t for t in targets if t.real and not t.real.get("ran")]
    wrong = [t.target for t in ran if not t.real.get("agrees")]
    if wrong:
        return _gate(
            "witness",
            "failed",
            Message("gate.runtime.witness.failed", {"count": len(wrong), "names": wrong}),
            real,
        )
    if failed:
        first = failed[0].real.get("error", "")
        return _gate(
            "witness",
            "could-not-run",
            Message(
                "gate.runtime.witness.no-import",
                {"count": len(failed), "names": [t.target for t in failed], "reason": first},
            ),
            real,
            reason=first,
        )
    return _gate(
        "witness",
        "passed",
        Message("gate.runtime.witness.passed", {"count": len(ran), "version": str(real.get("vllm"))}),
        real,
    )


# --------------------------------------------------------------------------- guide


def guide(
    rel: str, targets: list[RuntimeTarget], uses: list[dict[str, Any]], registry: dict[str, Any], ctx: Context
) -> dict[str, Any]:
    """Findings (file = the plugin module, line = its site), a lead, follow-ups and a priority."""
    findings: list[dict[str, Any]] = []

    def add(kind: str, line: int, msg: dict[str, Any], evidence: list[str] | None = None) -> None:
        findings.append(
            {
                "kind": kind,
                "severity": SEVERITY[kind],
                "file": rel,
                "line": line,
                "message": msg,
                "evidence": evidence or [],
            }
        )

    for t in targets:
        line = t.lines[0] if t.lines else 0
        if t.status == "missing":
            moved = (
                message("runtime.moved", where=t.moved_to[0]) if t.moved_to else message("runtime.moved.none")
            )
            add(
                "runtime-missing",
                line,
                message("finding.runtime-missing", target=t.target, pin=ctx.pin, moved=moved),
                [t.reason, *t.moved_to],
            )
        elif t.status in CHANGED and ctx.old:
            where = t.defined_in or t.old_defined_in
            add(
                "runtime-changed-upstream",
                line,
                message(
                    "finding.runtime-changed-upstream",
                    target=t.target,
                    what=message(f"runtime.status.{t.status}"),
                    old=ctx.old,
                    pin=ctx.pin,
                    where=where,
                ),
                t.upstream_diff.splitlines()[:12],
            )
        elif t.status == "unknown" and not t.real.get("exists"):
            add("runtime-unknown", line, message("finding.runtime-unknown", target=t.target, why=t.reason))
        if t.signature_problems:
            add(
                "runtime-signature-differs",
                line,
                message(
                    "finding.runtime-signature-differs",
                    target=t.target,
                    replacement=t.replacement,
                    ours=t.signature,
                    theirs=t.replacement_signature,
                    why=list(t.signature_problems),
                ),
            )
        if t.real.get("ran") and not t.real.get("agrees"):
            add(
                "runtime-witness-disagrees",
                line,
                message(
                    "finding.runtime-witness-disagrees",
                    target=t.target,
                    differences=list(t.real.get("differences", [])),
                ),
            )
    for use in uses:
        if use["status"] == "absent":
            add(
                "runtime-use-unresolved",
                use["line"],
                message("finding.runtime-use-unresolved", name=use["name"], pin=ctx.pin),
            )
    for item in registry.get("items", []):
        for named in item.get("targets", []):
            if named.startswith("vllm.") and not any(_names(t.target, named) for t in targets):
                add(
                    "runtime-registry-unmatched",
                    registry.get("line", 0),
                    message(
                        "finding.runtime-registry-unmatched",
                        target=named,
                        registry=registry.get("registry", ""),
                    ),
                )
    kinds = {f["kind"] for f in findings}
    return {
        "lead": _lead(targets, uses, ctx),
        "findings": findings,
        "follow_ups": [message(f"follow.{k}") for k in SEVERITY if k in kinds],
        "priority": _priority(kinds),
    }


def _names(target: str, named: str) -> bool:
    return target == named or target.startswith(named + ".") or named.startswith(target + ".")


def _lead(targets: list[RuntimeTarget], uses: list[dict[str, Any]], ctx: Context) -> dict[str, Any]:
    missing = [t for t in targets if t.status == "missing"]
    if missing:
        moved = [t.moved_to[0] for t in missing if t.moved_to]
        extra = message("runtime.moved", where=moved[0]) if moved else message("runtime.moved.none")
        return message("runtime.lead.missing", names=[t.target for t in missing], pin=ctx.pin, moved=extra)
    absent_uses = sorted({u["name"] for u in uses if u["status"] == "absent"})
    if absent_uses:
        return message("runtime.lead.uses", names=absent_uses, pin=ctx.pin)
    misfit = [t for t in targets if t.signature_problems]
    if misfit:
        return message(
            "runtime.lead.signature", names=[t.target for t in misfit], why=misfit[0].signature_problems[0]
        )
    changed = [t for t in targets if t.status in CHANGED]
    if changed and ctx.old:
        return message("runtime.lead.changed", names=[t.target for t in changed], old=ctx.old, pin=ctx.pin)
    unknown = [t for t in targets if t.status == "unknown" and not t.real.get("exists")]
    if unknown:
        return message("runtime.lead.unknown", names=[t.target for t in unknown])
    if ctx.old:
        return message("runtime.lead.unchanged", count=len(targets), old=ctx.old, pin=ctx.pin)
    return message("runtime.lead.present", count=len(targets), pin=ctx.pin)


def _priority(kinds: set[str]) -> dict[str, Any]:
    if kinds & {
        "runtime-missing",
        "runtime-use-unresolved",
        "runtime-signature-differs",
        "runtime-witness-disagrees",
        "runtime-changed-upstream",
    }:
        return {"level": "close-read", "reason": message("runtime.priority.close-read")}
    if "runtime-unknown" in kinds:
        return {"level": "skim", "reason": message("runtime.priority.skim")}
    return {"level": "skip", "reason": message("runtime.priority.skip")}


def patch_audit(
    rel: str,
    module: str,
    gates: list[GateResult],
    verdict: str,
    reasons: list[Message],
    targets: list[RuntimeTarget],
    guide_data: dict[str, Any],
    registry: dict[str, Any],
    diff: str,
) -> PatchAudit:
    domain = rel.split("/")[0] if "/" in rel else "runtime"
    return PatchAudit(
        patch=rel,
        domain=domain,
        title={"en": module, "zh": module},
        gates=gates,
        verdict=verdict,
        reasons=[],
        files=[{"path": rel, "added": 0, "removed": 0}],
        diff=diff,
        guide=guide_data,
        reason_messages=reasons,
        targets=targets,
        registry=registry,
    )
