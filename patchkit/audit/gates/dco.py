"""dco gate: every source commit carries a Signed-off-by matching its author (never writes one)."""

from __future__ import annotations

import time

from patchkit.audit.gates import Gate, PatchUnderAudit, gate_result
from patchkit.audit.model import GateResult
from patchkit.diff.mail import parse_address
from patchkit.diff.model import Commit
from patchkit.values import Message


def identity(value: str) -> tuple[str, str] | None:
    """``Name <email>`` -> (normalised name, lower-cased email); None when it has no address."""
    name, address = parse_address(" ".join(value.split()))
    if "@" not in address:
        return None
    return " ".join(name.split()), address.strip().lower()


def check_commit(commit: Commit | None) -> tuple[bool, Message]:
    """(ok, why) for one source commit."""
    if commit is None or not commit.has_metadata:
        return False, Message("dco.commit.no-metadata")
    author = identity(f"{commit.author} <{commit.email or ''}>")
    signers = {i for v in commit.trailer_values("Signed-off-by") if (i := identity(v))}
    if author is None:
        return False, Message("dco.commit.no-email", {"author": commit.author})
    who = f"{commit.author} <{commit.email}>"
    if not signers:
        return False, Message("dco.commit.no-signoff", {"author": who})
    if author not in signers:
        found = commit.trailer_values("Signed-off-by")
        return False, Message("dco.commit.not-author", {"author": who, "found": found})
    for value in commit.trailer_values("Co-developed-by"):
        co = identity(value)
        if co is None or co not in signers:
            return False, Message("dco.commit.co-developer", {"who": value})
    return True, Message("dco.commit.ok")


def dco_gate(patch: PatchUnderAudit) -> GateResult:
    started = time.perf_counter()
    rows = []
    for commit in patch.commits or [None]:
        ok, why = check_commit(commit)
        rows.append(
            {
                "sha": commit.sha if commit else None,
                "subject": commit.subject if commit else "(plain diff)",
                "author": f"{commit.author} <{commit.email}>" if commit and commit.author else None,
                "ok": ok,
                "reason": "",  # report/ renders reason_message
                "reason_message": why.to_dict(),
            }
        )
    bad = [r for r in rows if not r["ok"]]
    if not bad:
        message = Message("gate.dco.passed", {"count": len(rows)})
    elif all(r["author"] is None for r in bad) and len(bad) == len(rows):
        message = Message("gate.dco.plain-diff")
    else:
        shas = [(r["sha"] or "?")[:12] for r in bad]
        message = Message("gate.dco.missing", {"bad": len(bad), "total": len(rows), "commits": shas})
    status = "passed" if not bad else "failed"
    return gate_result("dco", status, message, {"commits": rows}, time.perf_counter() - started)


GATE = Gate("dco", lambda ctx: dco_gate(ctx.patch))
