"""The guide's summary: reading priority, reading order by file role, and follow-up questions."""

from __future__ import annotations

import fnmatch

from patchkit.audit.guide.crossfile import is_test
from patchkit.audit.model import Finding
from patchkit.diff.model import FilePatch
from patchkit.values import message

CONTRACT_PATHS = ("vllm/config/*", "*/protocol.py", "vllm/envs.py", "*_args.py", "vllm/outputs.py")


def reading_priority(findings: list[Finding]) -> dict:
    high = list(dict.fromkeys(f.kind for f in findings if f.severity == "high"))
    if not high:
        return {"level": "skim", "reason": message("priority.skim.reason", count=len(findings))}
    kinds = [message(f"kind.{k}") for k in high]
    return {"level": "close-read", "reason": message("priority.close-read.reason", kinds=kinds)}


def _role(path: str) -> str:
    if is_test(path):
        return "test"
    return "contract" if any(fnmatch.fnmatch(path, p) for p in CONTRACT_PATHS) else "consumer"


def reading_order(files: list[FilePatch]) -> list[dict]:
    rank = {"contract": 0, "consumer": 1, "test": 2}
    roles = [(fp.path, _role(fp.path)) for fp in files]
    ordered = sorted(roles, key=lambda pr: rank[pr[1]])
    return [{"path": path, "role": role, "why": message(f"role.{role}.why")} for path, role in ordered]


def follow_ups(findings: list[Finding]) -> list[dict]:
    """One follow-up per finding; report/ drops the ones that read the same (several findings can ask
    for the same thing)."""
    out: list[dict] = []
    for f in findings:
        params = {"file": f.file or "-", "line": f.line, **getattr(f, "params", {})}
        params.setdefault("name", f.file)
        out.append(message(f"follow.{f.kind}", **params))
    return out
