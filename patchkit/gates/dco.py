"""dco gate: every source commit carries a Signed-off-by matching its author (never writes one)."""

from __future__ import annotations

import email.utils
import time

from patchkit.gates import PatchUnderAudit
from patchkit.model import Commit, GateResult


def identity(value: str) -> tuple[str, str] | None:
    """``Name <email>`` -> (normalised name, lower-cased email); None when it has no address."""
    name, address = email.utils.parseaddr(" ".join(value.split()))
    if "@" not in address:
        return None
    return " ".join(name.split()), address.strip().lower()


def check_commit(commit: Commit | None) -> tuple[bool, str]:
    """(ok, reason) for one source commit."""
    if commit is None or not commit.has_metadata:
        return False, "no commit metadata (a plain diff cannot carry a sign-off)"
    author = identity(f"{commit.author} <{commit.email or ''}>")
    signers = {i for v in commit.trailer_values("Signed-off-by") if (i := identity(v))}
    if author is None:
        return False, f"author {commit.author!r} has no e-mail address"
    if not signers:
        return False, f"no Signed-off-by (author {commit.author} <{commit.email}>)"
    if author not in signers:
        found = "; ".join(commit.trailer_values("Signed-off-by"))
        return False, f"no Signed-off-by from the author {commit.author} <{commit.email}> (found: {found})"
    for value in commit.trailer_values("Co-developed-by"):
        co = identity(value)
        if co is None or co not in signers:
            return False, f"Co-developed-by {value} has no Signed-off-by of its own"
    return True, "signed off by the author"


def dco_gate(patch: PatchUnderAudit) -> GateResult:
    started = time.perf_counter()
    rows = []
    for commit in patch.commits or [None]:
        ok, reason = check_commit(commit)
        rows.append(
            {
                "sha": commit.sha if commit else None,
                "subject": commit.subject if commit else "(plain diff)",
                "author": f"{commit.author} <{commit.email}>" if commit and commit.author else None,
                "ok": ok,
                "reason": reason,
            }
        )
    bad = [r for r in rows if not r["ok"]]
    if not bad:
        status, summary = "passed", f"{len(rows)} commit(s) signed off by their authors"
    elif all(r["author"] is None for r in bad) and len(bad) == len(rows):
        status, summary = "failed", "no commit metadata: a plain diff carries no Signed-off-by"
    else:
        names = ", ".join((r["sha"] or "?")[:12] for r in bad)
        status, summary = "failed", f"{len(bad)} of {len(rows)} commit(s) lack the author's sign-off: {names}"
    return GateResult("dco", status, summary, {"commits": rows}, time.perf_counter() - started)
