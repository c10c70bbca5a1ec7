"""Shape checks for the free-form parts of an audit record (guide, files, gate details).

``AuditResult.from_dict`` types the fixed fields; these parts are plain JSON objects, so a
hand-edited or corrupted record is checked here before any renderer reads it. Each problem names
its JSON path, e.g. ``patches[2].guide.findings[0].line: expected an integer``.
"""

from __future__ import annotations

from typing import Any

from patchkit.audit.model import AuditResult

SEVERITIES = {"high", "medium", "low", "info"}
LEVELS = {"close-read", "skim", "skip"}
ROLES = {"contract", "consumer", "test"}


def problems(result: AuditResult) -> list[str]:
    found: list[str] = []
    for i, pa in enumerate(result.patches):
        at = f"patches[{i}]"
        for j, entry in enumerate(_list(pa.files, f"{at}.files", found)):
            _fields(entry, f"{at}.files[{j}]", {"path": str, "added": int, "removed": int}, found)
        _guide(pa.guide, f"{at}.guide", found)
        for k, gate in enumerate(pa.gates):
            _details(gate.details, f"{at}.gates[{k}].details", found)
        for k, test in enumerate(pa.focused_tests):
            _nonempty(test.steps, f"{at}.focused_tests[{k}].steps", "the CI step it comes from", found)
        for k, target in enumerate(pa.targets):
            if target.lines is not None:
                _is(target.lines, list, f"{at}.targets[{k}].lines", found)
    return found


def _nonempty(value: Any, at: str, what: str, found: list[str]) -> None:
    """A list every renderer reads the first item of: empty is a problem, never an IndexError."""
    if _is(value, list, at, found) and not value:
        found.append(f"{at}: expected at least one item ({what})")


def _guide(guide: Any, at: str, found: list[str]) -> None:
    if not _is(guide, dict, at, found) or not guide:
        return
    for j, finding in enumerate(_list(guide.get("findings", []), f"{at}.findings", found)):
        where = f"{at}.findings[{j}]"
        if _fields(finding, where, {"kind": str, "file": str, "line": int}, found):
            _choice(finding.get("severity"), SEVERITIES, f"{where}.severity", found)
            _texts(finding.get("message"), f"{where}.message", found)
            for m, line in enumerate(_list(finding.get("evidence", []), f"{where}.evidence", found)):
                _is(line, str, f"{where}.evidence[{m}]", found)
    priority = guide.get("priority")
    if priority is not None and _is(priority, dict, f"{at}.priority", found):
        _choice(priority.get("level"), LEVELS, f"{at}.priority.level", found)
        _texts(priority.get("reason"), f"{at}.priority.reason", found)
    for j, step in enumerate(_list(guide.get("order", []), f"{at}.order", found)):
        if _fields(step, f"{at}.order[{j}]", {"path": str}, found):
            _choice(step.get("role"), ROLES, f"{at}.order[{j}].role", found)
            _texts(step.get("why"), f"{at}.order[{j}].why", found)
    for j, item in enumerate(_list(guide.get("follow_ups", []), f"{at}.follow_ups", found)):
        _texts(item, f"{at}.follow_ups[{j}]", found)


def _details(details: Any, at: str, found: list[str]) -> None:
    if not _is(details, dict, at, found):
        return
    for key in ("findings", "commits", "tests"):
        value = details.get(key)
        if isinstance(value, list):
            for j, item in enumerate(value):
                _is(item, dict, f"{at}.{key}[{j}]", found)
    for key in ("reason", "rule"):
        if details.get(key) is not None:
            _is(details[key], str, f"{at}.{key}", found)


def _list(value: Any, at: str, found: list[str]) -> list:
    return value if _is(value, list, at, found) else []


def _fields(value: Any, at: str, types: dict[str, type], found: list[str]) -> bool:
    if not _is(value, dict, at, found):
        return False
    ok = True
    for key, kind in types.items():
        ok &= _is(value.get(key), kind, f"{at}.{key}", found)
    return ok


def _texts(value: Any, at: str, found: list[str]) -> None:
    """A {language: text} table; English is every renderer's fallback, so it must be there."""
    if _is(value, dict, at, found):
        for lang, text in value.items():
            _is(text, str, f"{at}.{lang}", found)
        if "en" not in value:
            found.append(f"{at}: needs an 'en' text (the fallback of every language)")


def _choice(value: Any, allowed: set[str], at: str, found: list[str]) -> None:
    if not isinstance(value, str) or value not in allowed:
        found.append(f"{at}: expected one of {sorted(allowed)}, got {value!r:.40}")


_NAMES = {str: "a string", int: "an integer", list: "a list", dict: "an object"}


def _is(value: Any, kind: type, at: str, found: list[str]) -> bool:
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if not ok:
        found.append(f"{at}: expected {_NAMES[kind]}, got {type(value).__name__}")
    return ok
