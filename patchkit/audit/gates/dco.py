"""dco gate: every source commit carries a Signed-off-by matching its author (never writes one).

The trailers are git's own reading of each commit message (``git interpret-trailers --parse
--no-divider``, the witness); patchkit's port of git's rules (``diff/trailers``) reads it too and
any disagreement is recorded (``details.parser_disagrees``). No git: could-not-run."""

from __future__ import annotations

import time

from patchkit import git
from patchkit.audit.gates import Gate, PatchUnderAudit, gate_result, witness
from patchkit.audit.model import GateResult
from patchkit.diff.mail import parse_address
from patchkit.diff.model import Commit, Trailer
from patchkit.diff.trailers import git_trailers
from patchkit.errors import CheckFailed, UserError
from patchkit.values import Message


def identity(value: str) -> tuple[str, str] | None:
    """``Name <email>`` -> (normalised name, lower-cased email); None when it has no address."""
    name, address = parse_address(" ".join(value.split()))
    if "@" not in address:
        return None
    return " ".join(name.split()), address.strip().lower()


def check_commit(commit: Commit | None, trailers: list[Trailer] | None = None) -> tuple[bool, Message]:
    """(ok, why) for one source commit, by ``trailers`` (git's reading; else ``commit.trailers``).
    Keys match case-insensitively, as git compares trailer tokens."""
    if commit is None or not commit.has_metadata:
        return False, Message("dco.commit.no-metadata")
    found = commit.trailers if trailers is None else trailers

    def values(key: str) -> list[str]:
        return [t.value for t in found if t.key.lower() == key.lower()]

    author = identity(f"{commit.author} <{commit.email or ''}>")
    signers = {i for v in values("Signed-off-by") if (i := identity(v))}
    if author is None:
        return False, Message("dco.commit.no-email", {"author": commit.author})
    who = f"{commit.author} <{commit.email}>"
    if not signers:
        return False, Message("dco.commit.no-signoff", {"author": who})
    if author not in signers:
        return False, Message("dco.commit.not-author", {"author": who, "found": values("Signed-off-by")})
    for value in values("Co-developed-by"):
        co = identity(value)
        if co is None or co not in signers:
            return False, Message("dco.commit.co-developer", {"who": value})
    return True, Message("dco.commit.ok")


def dco_gate(patch: PatchUnderAudit) -> GateResult:
    started = time.perf_counter()
    rows = []
    read_by_git, disagree = 0, []
    for commit in patch.commits or [None]:
        trailers = None
        if commit is not None and commit.has_metadata:
            try:
                trailers = [Trailer(k, v) for k, v in git.interpret_trailers(commit.message)]
            except (UserError, CheckFailed, RuntimeError) as exc:
                message = Message("gate.dco.no-git", {"error": str(exc)})
                return gate_result("dco", "could-not-run", message, {}, time.perf_counter() - started)
            read_by_git += 1
            ours = [(t.key, t.value) for t in git_trailers(commit.message)]
            if ours != [(t.key, t.value) for t in trailers]:
                disagree.append((commit.sha or "?")[:12])
        ok, why = check_commit(commit, trailers)
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
    details: dict = {"commits": rows, "trailers_from": "git interpret-trailers"}
    if disagree:
        details["parser_disagrees"] = disagree
    evidence = []
    if read_by_git:
        evidence.append(witness("git interpret-trailers", f"exit 0 for {read_by_git} commit message(s)",
                                version=git.version(), command=["git", *git.INTERPRET_TRAILERS],
                                inputs=[(r["sha"] or "?")[:12] for r in rows],
                                counts={"commits": len(rows), "signed": len(rows) - len(bad),
                                        "agreed": read_by_git - len(disagree)}))  # fmt: skip
    return gate_result("dco", status, message, details, time.perf_counter() - started, evidence)


GATE = Gate("dco", lambda ctx: dco_gate(ctx.patch), needs_applied=False)  # a message needs no tree
