"""A plugin module's checks, each a ``GateResult`` whose ``details["evidence"]`` names its witness:
the static reading of the pinned tree, or the real interpreter.

``targets`` every target is in the pin · ``signature`` (where a def replaces a def) each
replacement accepts its original's calls · ``upstream`` (with ``--since``) no original changed
between the pins · ``uses`` the module's own vLLM names resolve in the pin · ``witness`` (with
``--python``) a real import agrees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from patchkit.audit.model import Evidence, GateResult, GateStatus, RuntimeTarget
from patchkit.values import Message

CHANGED = ("body-changed", "signature-changed", "new-upstream")


@dataclass
class Context:
    """What every row shares: the pins' labels and each witness's description."""

    pin: str
    old: str | None = None  # --since
    static: dict[str, Any] = field(default_factory=dict)  # the static witness: tool, pins
    real: dict[str, Any] | None = None  # the interpreter, when --python ran


def _gate(
    name: str,
    status: GateStatus,
    key: str,
    evidence: dict[str, Any] | None,
    details: dict[str, Any] | None = None,
    **params: Any,
) -> GateResult:
    return GateResult(
        name, status, "", {"evidence": evidence or {}, **(details or {})}, message=Message(key, params),
        evidence=_witnesses(evidence, params),
    )  # fmt: skip


def _witnesses(evidence: dict[str, Any] | None, params: dict[str, Any]) -> list[Evidence]:
    """The row's witness as the audit's ``Evidence`` (audit/verdict.py counts only those)."""
    if not evidence or evidence.get("error") or not evidence.get("tool"):
        return []
    real = evidence.get("witness") == "interpreter"
    counts = {"targets": params["count"]} if isinstance(params.get("count"), int) else {}
    pin = evidence.get("pin") if isinstance(evidence.get("pin"), dict) else {}
    inputs = [str(evidence.get("python"))] if real else [str(pin.get("version") or pin.get("path") or "")]
    outcome = "the probe answered" if real else "read the pinned tree"
    version = str(evidence.get("python_version") or "") if real else ""
    return [Evidence(str(evidence["tool"]), version, [], inputs, outcome, counts)]


def targets_gate(targets: list[RuntimeTarget], ctx: Context, imported_when: list[str]) -> GateResult:
    missing = [t.target for t in targets if t.status == "missing"]
    unsettled = [t.target for t in targets if t.status == "unknown"]
    details = {"imported_when": imported_when} if imported_when else {}
    if missing:
        return _gate(
            "targets",
            "failed",
            "gate.runtime.targets.missing",
            ctx.static,
            details,
            count=len(missing),
            names=missing,
            pin=ctx.pin,
        )
    if unsettled:
        details["reason"] = "reading the tree could not tell; --python with the pinned vLLM can"
        return _gate(
            "targets",
            "could-not-run",
            "gate.runtime.targets.unknown",
            ctx.static,
            details,
            count=len(unsettled),
            names=unsettled,
            pin=ctx.pin,
        )
    return _gate(
        "targets",
        "passed",
        "gate.runtime.targets.passed",
        _witnessed(targets, ctx),
        details,
        count=len(targets),
        pin=ctx.pin,
    )


def comparable(targets: list[RuntimeTarget]) -> list[RuntimeTarget]:
    """The targets whose original and replacement both have a signature the reader found."""
    return [t for t in targets if t.replacement_signature and t.signature]


def signature_gate(targets: list[RuntimeTarget], ctx: Context) -> GateResult:
    compared = comparable(targets)
    wrong = [t.target for t in compared if t.signature_problems]
    if wrong:
        return _gate(
            "signature", "failed", "gate.runtime.signature.failed", ctx.static, count=len(wrong), names=wrong
        )
    return _gate("signature", "passed", "gate.runtime.signature.passed", ctx.static, count=len(compared))


def upstream_gate(targets: list[RuntimeTarget], ctx: Context) -> GateResult:
    gone = [t for t in targets if t.status == "missing" and t.old_defined_in]  # the older pin had it
    changed = [t.target for t in targets if t.status in CHANGED] + [t.target for t in gone]
    if changed:
        return _gate(
            "upstream",
            "failed",
            "gate.runtime.upstream.changed",
            ctx.static,
            count=len(changed),
            names=changed,
            old=ctx.old,
            pin=ctx.pin,
        )
    same = sum(t.status == "unchanged" for t in targets)
    return _gate(
        "upstream", "passed", "gate.runtime.upstream.passed", ctx.static, count=same, old=ctx.old, pin=ctx.pin
    )


def uses_gate(uses: list[dict[str, Any]], ctx: Context) -> GateResult:
    absent = sorted({u["name"] for u in uses if u["status"] == "absent"})
    if absent:
        return _gate(
            "uses",
            "failed",
            "gate.runtime.uses.failed",
            ctx.static,
            {"uses": uses},
            count=len(absent),
            names=absent,
            pin=ctx.pin,
        )
    return _gate(
        "uses",
        "passed",
        "gate.runtime.uses.passed",
        ctx.static,
        {"uses": uses},
        count=len({u["name"] for u in uses}),
        pin=ctx.pin,
    )


def witness_gate(targets: list[RuntimeTarget], ctx: Context, error: str | None) -> GateResult:
    if error:
        return _gate(
            "witness",
            "could-not-run",
            "gate.runtime.witness.no-interpreter",
            ctx.real,
            {"reason": error},
            reason=error,
        )
    ran = [t for t in targets if t.real.get("ran")]
    failed = [t for t in targets if not t.real.get("ran")]
    wrong = [t.target for t in ran if t.real.get("agrees") is False]
    if wrong:
        return _gate(
            "witness", "failed", "gate.runtime.witness.failed", ctx.real, count=len(wrong), names=wrong
        )
    if failed:
        first = failed[0].real.get("error", "")
        return _gate(
            "witness",
            "could-not-run",
            "gate.runtime.witness.no-import",
            ctx.real,
            {"reason": first},
            count=len(failed),
            names=[t.target for t in failed],
            reason=first,
        )
    version = str((ctx.real or {}).get("vllm"))
    agreed = sum(t.real.get("agrees") is True for t in ran)
    return _gate("witness", "passed", "gate.runtime.witness.passed", ctx.real, count=agreed,
                 settled=len(ran) - agreed, version=version)  # fmt: skip


def _witnessed(targets: list[RuntimeTarget], ctx: Context) -> dict[str, Any]:
    """The static witness, and the interpreter's too when it settled a target reading could not."""
    if any(t.witness == "interpreter" for t in targets) and ctx.real:
        return {**ctx.static, "also": ctx.real}
    return ctx.static
