"""``.github/mergify.yml`` → the labels vLLM gives a pull request and the file patterns that earn them.

Only ``files~=REGEX`` (searched, as mergify does) and ``files=NAME`` conditions count, anywhere
under ``or``/``and`` but never under ``not``; title, label and check conditions are ignored.
Precedence, for a file that earns several labels: the most specific pattern first — an exact file
name, then the longest literal prefix of an anchored regex (``^vllm/model_executor/layers/quant``
beats ``^vllm/model_executor/``); unanchored patterns (``cuda``, ``(?i)rust``) come last; a tie keeps
the file's order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import yaml

from patchkit.errors import UserError
from patchkit.upstream import yamltext


@dataclass(frozen=True)
class FilePattern:
    text: str  # as written: "files~=^vllm/v1/spec_decode/" or "files=setup.py"
    regex: re.Pattern[str]
    specificity: int
    literal: str = ""  # the literal text an anchored regex starts with ("vllm/v1/" for ^vllm/v1/)


@dataclass
class LabelRule:
    label: str
    rule: str  # the mergify rule's name
    patterns: list[FilePattern] = field(default_factory=list)

    def earned_by(self, path: str) -> FilePattern | None:
        """The most specific of this label's patterns that ``path`` matches."""
        hits = [p for p in self.patterns if p.regex.search(path)]
        return max(hits, key=lambda p: p.specificity, default=None)


_LITERAL = re.compile(r"\\[./\-_]|[A-Za-z0-9_/\-]")


def literal_prefix(regex: str) -> str:
    """The literal text an anchored regex starts with; '' when unanchored."""
    if not regex.startswith("^"):
        return ""
    out, i = [], 1
    while m := _LITERAL.match(regex, i):
        if m.end() < len(regex) and regex[m.end()] in "*?{":  # the last char is optional/repeated
            break
        out.append(m.group()[-1])
        i = m.end()
    return "".join(out)


def specificity(regex: str) -> int:
    """Length of the literal text an anchored regex starts with; 0 when unanchored."""
    return len(literal_prefix(regex))


def _pattern(condition: str) -> FilePattern | None:
    text = condition.strip()
    if text.startswith("files~="):
        source = text[len("files~=") :].strip()
        try:
            return FilePattern(text, re.compile(source), specificity(source), literal_prefix(source))
        except (re.error, OverflowError, RecursionError):
            return None  # a pattern Python cannot read (mergify's regex dialect) earns nothing here
    if text.startswith("files="):
        name = text[len("files=") :].strip()
        return FilePattern(text, re.compile(rf"\A{re.escape(name)}\Z"), len(name) + 1, name)
    return None


def _file_conditions(conditions: object) -> list[FilePattern]:
    found: list[FilePattern] = []
    if isinstance(conditions, str):
        pattern = _pattern(conditions)
        return [pattern] if pattern else []
    if isinstance(conditions, list):
        for item in conditions:
            found += _file_conditions(item)
    elif isinstance(conditions, dict):
        for key in ("or", "and"):
            found += _file_conditions(conditions.get(key, []))
    return found


def _labels_added(rule: dict) -> list[str]:
    actions = rule.get("actions") or {}
    label = actions.get("label") if isinstance(actions, dict) else None
    added = label.get("add", []) if isinstance(label, dict) else []
    return [a for a in added if isinstance(a, str)] if isinstance(added, list) else []


def parse_mergify(text: str, name: str) -> list[LabelRule]:
    """Every (label, file patterns) the rules declare, in file order; labels without file
    conditions (``needs-rebase`` on a conflict) are left out."""
    try:
        data = yamltext.safe_load(text)
    except yaml.YAMLError as exc:
        raise UserError(f"invalid YAML: {str(exc).splitlines()[0]}", name) from exc
    rules = data.get("pull_request_rules", []) if isinstance(data, dict) else []
    out: list[LabelRule] = []
    for rule in rules if isinstance(rules, list) else []:
        if not isinstance(rule, dict):
            continue
        patterns = _file_conditions(rule.get("conditions", []))
        for label in _labels_added(rule):
            if patterns:
                out.append(LabelRule(label, str(rule.get("name", label)), list(patterns)))
    return out


def labels_of(path: str, rules: list[LabelRule]) -> list[tuple[str, FilePattern]]:
    """Every label ``path`` earns with the pattern that earned it, most specific first."""
    hits: dict[str, FilePattern] = {}
    for rule in rules:
        pattern = rule.earned_by(path)
        if pattern and (rule.label not in hits or pattern.specificity > hits[rule.label].specificity):
            hits[rule.label] = pattern
    order = {rule.label: i for i, rule in reversed(list(enumerate(rules)))}
    return sorted(hits.items(), key=lambda kv: (-kv[1].specificity, order[kv[0]]))
