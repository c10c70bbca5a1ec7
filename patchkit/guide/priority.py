"""The guide's summary: reading priority in three levels with a reading time, reading order by file
role, and follow-up questions."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping

from patchkit.diff.model import FilePatch
from patchkit.guide.crossfile import is_test
from patchkit.guide.model import Finding
from patchkit.values import message

CONTRACT_PATHS = (
    "vllm/config/*",
    "*/protocol.py",
    "vllm/envs.py",
    "*_args.py",
    "vllm/outputs.py",
    "csrc/ops.h",
    "csrc/torch_bindings.cpp",
    "vllm/_custom_ops.py",
    "requirements/*",
    "pyproject.toml",
)
LEVELS = ("close-read", "skim", "skip")
# lines a reviewer reads in a minute, by kind of file: kernels are slow, tests and pins fast
LINES_PER_MINUTE = {"kernel": 12, "code": 25, "test": 50, "other": 80}
SKIP_LINES = 40  # a patch this small with nothing above "medium: no test" can be skipped
CLOSE_MINUTES = 60  # this much to read is a close read whatever the findings say
QUIET_KINDS = frozenset({"no-test-touched", "message-names-untouched-file", "magic-number", "cli-flag-added"})


def file_kind(path: str) -> str:
    if path.endswith((".cu", ".cuh", ".h", ".hpp", ".cpp", ".cc", ".c")):
        return "kernel"
    if is_test(path):
        return "test"
    return "code" if path.endswith((".py", ".pyi")) else "other"


def reading_minutes(files: Iterable[Mapping], high: int = 0) -> int:
    """Minutes to read ``files`` ({path, added, removed}) carefully, plus one per high finding."""
    minutes = sum((f["added"] + f["removed"]) / LINES_PER_MINUTE[file_kind(f["path"])] for f in files) + high
    whole = max(1, round(minutes))
    return whole if whole <= 10 else 5 * round(whole / 5)


def _get(f: Finding | Mapping, name: str):
    return f[name] if isinstance(f, Mapping) else getattr(f, name)


def reading_priority(findings: list, files: list[Mapping] | None = None) -> dict:
    """close-read: a high finding; skip: small and nothing above the quiet kinds; else skim."""
    files = files or []
    high = list(dict.fromkeys(_get(f, "kind") for f in findings if _get(f, "severity") == "high"))
    minutes = reading_minutes(files, len(high))
    lines = sum(f["added"] + f["removed"] for f in files)
    loud = [f for f in findings if _get(f, "kind") not in QUIET_KINDS and _get(f, "severity") != "info"]
    if high or minutes >= CLOSE_MINUTES:
        kinds = [message(f"kind.{k}") for k in high] or [message("priority.large", minutes=minutes)]
        reason = message("priority.close-read.reason", kinds=kinds)
        level = "close-read"
    elif (
        not loud
        and not any(_role(f["path"]) == "contract" for f in files)
        and (lines <= SKIP_LINES or all(file_kind(f["path"]) in ("test", "other") for f in files))
    ):
        level, reason = "skip", message("priority.skip.reason", count=len(findings), lines=lines)
    else:
        level, reason = "skim", message("priority.skim.reason", count=len(findings))
    return {"level": level, "reason": reason, "minutes": minutes}


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
