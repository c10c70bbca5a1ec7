"""Findings on files that are not Python: CUDA/C++ kernels and op schemas, dependency pins, CI steps.

Line-based over the changed lines of ``FileView`` (no compiler): what a kernel reviewer must open.
"""

from __future__ import annotations

import re

from patchkit.guide.findings import make_finding
from patchkit.guide.model import Finding
from patchkit.guide.view import FileView
from patchkit.values import message

KERNEL_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".cpp", ".cc", ".c")
KERNEL_LINES = 80  # changed lines in one kernel file that make it a finding without a __global__
_GLOBAL = re.compile(r"__global__\s+(?:[\w:<>,\s*&]+?\s+)?(\w+)\s*\(")
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\(([^)]*)\)")
_INSTANCE = re.compile(r"^\s*template\s+(?!<)[\w:<>,\s*&]*?\b(\w+)\s*<")
_OP_DEF = re.compile(r"""\b\w+\.def\(\s*"(\w+)\(""")
_OP_DEF_OPEN = re.compile(r"\b\w+\.def\(\s*$")
_OP_NAME = re.compile(r'^\s*"(\w+)\(')
_SPEC = r"(?:===|[=<>!~]=?)\s*[^;#\s,\"]+"
_REQ = re.compile(rf"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*({_SPEC}(?:\s*,\s*{_SPEC})*)?")
_TOML_DEP = re.compile(
    rf"""^\s*"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*({_SPEC}(?:\s*,\s*{_SPEC})*)?"""
)
_TIMEOUT = re.compile(r"\btimeout[\w-]*\s*:\s*(\S+)", re.I)
_STEP = re.compile(r"^\s*-\s*(label|name)\s*:\s*(.+)$")


def is_kernel(path: str) -> bool:
    return path.endswith(KERNEL_SUFFIXES) and (
        path.startswith("csrc/") or "/csrc/" in path or path.endswith((".cu", ".cuh"))
    )


def is_pins(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return (path.startswith("requirements/") and name.endswith((".txt", ".in"))) or path == "pyproject.toml"


def is_ci(path: str) -> bool:
    return path.startswith((".buildkite/", ".github/workflows/")) and path.endswith((".yml", ".yaml"))


def native_findings(view: FileView, python_lines: list[str]) -> list[Finding]:
    """``python_lines``: the added lines of every Python file of the patch (for op wrappers)."""
    if is_kernel(view.path):
        return _kernel_findings(view, python_lines)
    if is_pins(view.path):
        return _pin_findings(view)
    if is_ci(view.path):
        return _ci_findings(view)
    return []


def _names(pattern: re.Pattern, lines: dict[int, str]) -> dict[str, int]:
    found: dict[str, int] = {}
    for line, text in sorted(lines.items()):
        for match in pattern.finditer(text):
            found.setdefault(match.group(1), line)
    return found


def _op_names(lines: dict[int, str]) -> dict[str, int]:
    """Op schemas defined on these lines: ``ops.def("name(...)`` or ``ops.def(`` then ``"name(...``."""
    found = _names(_OP_DEF, lines)
    for line, text in sorted(lines.items()):
        if _OP_DEF_OPEN.search(text) and (nxt := lines.get(line + 1)) and (m := _OP_NAME.match(nxt)):
            found.setdefault(m.group(1), line)
    for line, text in sorted(lines.items()):  # a changed schema line inside an unchanged ops.def(
        if (m := _OP_NAME.match(text)) and "->" not in text and m.group(1) not in found:
            found.setdefault(m.group(1), line)
    return found


def _kernel_findings(view: FileView, python_lines: list[str]) -> list[Finding]:
    out: list[Finding] = []
    bare = [{n: _LAUNCH_BOUNDS.sub("", t) for n, t in lines.items()} for lines in (view.removed, view.added)]
    kernels = {**_names(_GLOBAL, bare[0]), **_names(_GLOBAL, bare[1])}
    bounds = _names(_LAUNCH_BOUNDS, view.added) | _names(_LAUNCH_BOUNDS, view.removed)
    instances = {**_names(_INSTANCE, view.removed), **_names(_INSTANCE, view.added)}
    changed = len(view.added) + len(view.removed)
    if kernels or bounds or instances or changed >= KERNEL_LINES:
        what = list(kernels)[:6] + [f"template {n}<…>" for n in list(instances)[:3]]
        evidence = [f"__launch_bounds__({b})" for b in list(bounds)[:3]] + [
            view.added.get(line, view.removed.get(line, "")).strip()[:120]
            for line in list(kernels.values())[:4]
        ]
        line = min(kernels.values(), default=0) or min(view.added, default=0)
        out.append(
            make_finding(
                "kernel-changed",
                "high" if kernels or bounds else "medium",
                view.path,
                line,
                evidence,
                count=changed,
                kernels=", ".join(what) or message("kernel.host-only"),
            )
        )
    wrapped = "\n".join(python_lines)
    for name, line in _op_names(view.added).items():
        if not re.search(rf"\b{re.escape(name)}\b", wrapped):
            out.append(
                make_finding(
                    "op-schema-unwrapped",
                    "high",
                    view.path,
                    line,
                    [view.added[line].strip()[:120]],
                    name=name,
                )
            )
    return out


def _requirements(lines: dict[int, str], toml: bool) -> dict[str, tuple[str, int]]:
    found: dict[str, tuple[str, int]] = {}
    for line, text in sorted(lines.items()):
        text = text.split("#", 1)[0] if not toml else text
        if not text.strip() or text.lstrip().startswith(("-", "[")):
            continue
        match = (_TOML_DEP if toml else _REQ).match(text)
        if match and (toml or match.group(3) or re.fullmatch(r"\s*[\w.-]+\s*", text)):
            spec = re.sub(r"\s+", "", match.group(3) or "")
            found[match.group(1).lower().replace("_", "-")] = (spec or "*", line)
    return found


def _pin_findings(view: FileView) -> list[Finding]:
    toml = view.path.endswith(".toml")
    was, now = _requirements(view.removed, toml), _requirements(view.added, toml)
    out = []
    for name in sorted(set(was) | set(now)):
        old, new = was.get(name, ("-", 0))[0], now.get(name, ("-", 0))[0]
        if old == new:
            continue
        line = now[name][1] if name in now else 0
        shown = view.added.get(line) if line else view.removed.get(was[name][1], "")
        out.append(
            make_finding(
                "dependency-pin-changed",
                "medium",
                view.path,
                line,
                [(shown or "").strip()],
                name=name,
                old=old,
                new=new,
            )
        )
    return out


def _ci_findings(view: FileView) -> list[Finding]:
    out = []
    was, now = _names(_TIMEOUT, view.removed), _names(_TIMEOUT, view.added)
    old = [m.group(1) for t in view.removed.values() for m in [_TIMEOUT.search(t)] if m]
    new = [m.group(1) for t in view.added.values() for m in [_TIMEOUT.search(t)] if m]
    if old != new and (was or now):
        line = min(now.values(), default=0)
        shown = ", ".join(old) or "-", ", ".join(new) or "-"
        out.append(
            make_finding(
                "ci-changed", "medium", view.path, line, [], what="timeout", old=shown[0], new=shown[1]
            )
        )
    steps_old = [m.group(2).strip() for t in view.removed.values() for m in [_STEP.match(t)] if m]
    steps_new = [m.group(2).strip() for t in view.added.values() for m in [_STEP.match(t)] if m]
    if steps_old != steps_new:
        line = min((ln for ln, t in view.added.items() if _STEP.match(t)), default=0)
        gone = ", ".join(s for s in steps_old if s not in steps_new)[:120] or "-"
        added = ", ".join(s for s in steps_new if s not in steps_old)[:120] or "-"
        out.append(
            make_finding("ci-changed", "medium", view.path, line, [], what="steps", old=gone, new=added)
        )
    return out
