"""Verdicts: the one place that decides what a gate's result counts for and what a patch is.

Every verdict patchkit shows comes from here: a fresh audit, a cached gate result, the shards
``patchkit report`` merges and any record it loads.

- ``checked``: a ``passed`` without a complete witness (``Evidence.complete``: a tool and its own
  outcome) counts as could-not-run, with the reason — never "passed" that nothing checked.
- blocked: the apply gate failed. needs-work: another gate failed, or a requested gate was skipped
  because one failed (``GateResult.cause``). incomplete: a requested gate could not run, or was
  skipped for any other reason (a could-not-run of a gate the project marks optional is accepted,
  and the reason says so). ready: every requested gate passed, each with its witness.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from patchkit.audit.model import AuditResult, GateResult, PatchAudit, Verdict
from patchkit.errors import EXIT_FAILED, EXIT_INCOMPLETE, EXIT_OK
from patchkit.values import Message

RANK = {"ready": 0, "incomplete": 1, "needs-work": 2, "blocked": 3}
NO_EVIDENCE = "gate.no-evidence"  # the message of a passed result demoted for want of a witness


def has_evidence(gate: GateResult) -> bool:
    return any(e.complete for e in gate.evidence)


def checked(gate: GateResult) -> GateResult:
    """``gate`` as verdicts count it: a ``passed`` without a complete witness is could-not-run."""
    if gate.status != "passed" or has_evidence(gate):
        return gate
    said = gate.message.to_dict() if gate.message is not None else gate.summary
    message = Message(NO_EVIDENCE, {"summary": said})
    details = {**gate.details, "demoted": "passed without evidence"}
    return replace(gate, status="could-not-run", message=message, details=details)  # summary: the fallback


def verdict_reasons(gates: list[GateResult], optional: Collection[str] = ()) -> tuple[Verdict, list[Message]]:
    """The patch's verdict and its reasons (module docstring). A reason quotes its gate's message
    (its summary if none), failures first, then skips, then what could not run."""
    gates = [checked(g) for g in gates]
    reasons: list[Message] = []
    verdict: Verdict = "ready"

    def at_least(level: Verdict) -> None:
        nonlocal verdict
        verdict = max(verdict, level, key=RANK.get)

    def quoted(gate: GateResult) -> dict:
        return {"gate": gate.gate, "summary": gate.message.to_dict() if gate.message else gate.summary}

    for gate in gates:
        if gate.status == "failed":
            at_least("blocked" if gate.gate == "apply" else "needs-work")
            reasons.append(Message("reason.failed", quoted(gate)))
    for gate in gates:
        if gate.status == "skipped" and gate.cause:
            at_least("needs-work")
            reasons.append(Message("reason.skipped-after-failure", {**quoted(gate), "cause": gate.cause}))
        elif gate.status == "skipped":
            at_least("incomplete")
            reasons.append(Message("reason.skipped", quoted(gate)))
    for gate in gates:
        if gate.status == "could-not-run" and gate.gate in optional:
            reasons.append(Message("reason.could-not-run-accepted", quoted(gate)))
        elif gate.status == "could-not-run":
            at_least("incomplete")
            reasons.append(Message("reason.could-not-run", quoted(gate)))
    if not gates:  # nothing checked it: never ready
        return "incomplete", [Message("reason.none-ran")]
    if verdict == "ready" and not reasons:
        reasons.append(Message("reason.all-passed", {"gates": [g.gate for g in gates]}))
    return verdict, reasons


def decide_patch(audit: PatchAudit, optional: Collection[str] = ()) -> bool:
    """Check ``audit``'s gates and decide its verdict again; True when anything changed (its
    English ``reasons`` are then emptied: ``report/words.fill_patch`` renders them again)."""
    gates = [checked(g) for g in audit.gates]
    verdict, reasons = verdict_reasons(gates, optional)
    same_gates = all(a is b for a, b in zip(gates, audit.gates))
    same_reasons = [m.to_dict() for m in reasons] == [m.to_dict() for m in audit.reason_messages]
    if same_gates and verdict == audit.verdict and (same_reasons or not audit.reason_messages):
        return False  # a record from before reason messages keeps its English reasons
    audit.gates, audit.verdict, audit.reason_messages, audit.reasons = gates, verdict, reasons, []
    return True


def decide_record(result: AuditResult) -> bool:
    """A loaded or merged record through the same decision as a fresh audit; True when anything
    changed. The optional gates are the record's own (``environment.optional_gates``)."""
    listed = result.environment.get("optional_gates")
    optional = [g for g in listed if isinstance(g, str)] if isinstance(listed, list) else []
    changed = [decide_patch(pa, optional) for pa in result.patches]
    verdict = worst([pa.verdict for pa in result.patches])
    changed.append(verdict != result.verdict)
    result.verdict = verdict
    return any(changed)


def worst(verdicts: list[Verdict]) -> Verdict:
    return max(verdicts, key=RANK.get, default="ready")


def exit_code(result: AuditResult) -> int:
    """0 when every patch is ready, 1 when a gate failed, 3 when only could-not-run stands in the way."""
    verdicts = {pa.verdict for pa in result.patches}
    if verdicts & {"needs-work", "blocked"}:
        return EXIT_FAILED
    return EXIT_INCOMPLETE if "incomplete" in verdicts else EXIT_OK
