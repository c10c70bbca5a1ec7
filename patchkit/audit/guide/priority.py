"""The guide's summary: reading priority, reading order by file role, and follow-up questions."""

from __future__ import annotations

import fnmatch

from patchkit.audit.guide.crossfile import _is_test
from patchkit.audit.model import Finding
from patchkit.diff.model import FilePatch
from patchkit.report.i18n import LANGS, both

CONTRACT_PATHS = ("vllm/config/*", "*/protocol.py", "vllm/envs.py", "*_args.py", "vllm/outputs.py")


def _priority(findings: list[Finding]) -> dict:
    high = list(dict.fromkeys(f.kind for f in findings if f.severity == "high"))
    if not high:
        return {"level": "skim", "reason": both("priority.skim.reason", count=len(findings))}
    sep = both("list.sep")
    kinds = {lang: sep[lang].join(both(f"kind.{k}")[lang] for k in high) for lang in LANGS}
    return {"level": "close-read", "reason": both("priority.close-read.reason", kinds=kinds)}


def _role(path: str) -> str:
    if _is_test(path):
        return "test"
    return "contract" if any(fnmatch.fnmatch(path, p) for p in CONTRACT_PATHS) else "consumer"


def _order(files: list[FilePatch]) -> list[dict]:
    rank = {"contract": 0, "consumer": 1, "test": 2}
    roles = [(fp.path, _role(fp.path)) for fp in files]
    ordered = sorted(roles, key=lambda pr: rank[pr[1]])
    return [{"path": path, "role": role, "why": both(f"role.{role}.why")} for path, role in ordered]


def _follow_ups(findings: list[Finding]) -> list[dict]:
    """One follow-up per finding, deduplicated (several findings can ask for the same thing)."""
    seen: dict[str, dict] = {}
    for f in findings:
        params = {"file": f.file or "-", "line": f.line, **getattr(f, "params", {})}
        params.setdefault("name", f.file)
        item = both(f"follow.{f.kind}", **params)
        seen.setdefault(item["en"], item)
    return list(seen.values())
