"""domains.toml → ordered ``Domain`` rules, and the classifier that says why a change went where.

A change block is the unit (one ``-U0`` hunk). Pattern rules anchor single changed lines to a
domain; a block whose anchors name several domains is split at line granularity. A block with no
anchor goes to the first domain whose path-only rule matches, else to the fallback domain.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from patchkit.errors import UserError
from patchkit.globs import glob_source
from patchkit.split.model import Domain, DomainRule

DEFAULT_RULES = "default-domains.toml"


def load_rules(path: Path | None = None) -> list[Domain]:
    """The shipped vLLM default, extended by the rules file at ``path``: its domains come first
    (one with a default's name replaces it; its fallback replaces the default's), unless the file
    says ``replace = true``, when it is the whole rule set."""
    text = resources.files("patchkit.data").joinpath(DEFAULT_RULES).read_text("utf-8")
    defaults = parse_rules(text, f"<patchkit>/{DEFAULT_RULES}")
    if path is None:
        return defaults
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read rules file: {exc}", str(path)) from exc
    data = _toml(text, str(path))
    project = parse_rules(text, str(path))
    if data.get("replace", False):
        return project
    return extend_rules(project, defaults)


def extend_rules(project: list[Domain], defaults: list[Domain]) -> list[Domain]:
    """``project`` first, then the defaults it does not redefine; one fallback, last."""
    names = {d.name for d in project}
    has_fallback = any(d.fallback for d in project)
    kept = [d for d in defaults if d.name not in names and not (has_fallback and d.fallback)]
    merged = [d for d in project if not d.fallback] + [d for d in kept if not d.fallback]
    return merged + [d for d in project + kept if d.fallback]


def _toml(text: str, name: str) -> dict:
    try:
        return tomllib.loads(text)
    except ValueError as exc:  # TOMLDecodeError, or an integer too long to convert
        raise UserError(f"invalid TOML: {exc}", name) from exc
    except RecursionError:
        raise UserError("invalid TOML: arrays or tables nested too deeply", name) from None


def parse_rules(text: str, name: str) -> list[Domain]:
    data = _toml(text, name)
    unknown = set(data) - {"domain", "replace"}
    if unknown:
        raise UserError(f"unknown top-level key(s) {sorted(unknown)}; expected [[domain]]", name)
    if not isinstance(data.get("replace", False), bool):
        raise UserError("'replace' must be true or false", name)
    tables = data.get("domain")
    if not isinstance(tables, list) or not tables:
        raise UserError("no [[domain]] tables", name)
    domains = [_parse_domain(t, f"{name}: domain #{i + 1}") for i, t in enumerate(tables)]
    names = [d.name for d in domains]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise UserError(f"domain name(s) used twice: {duplicated}", name)
    fallbacks = [d.name for d in domains if d.fallback]
    if len(fallbacks) > 1:
        raise UserError(f"more than one domain declares fallback = true: {fallbacks}", name)
    return domains


_DOMAIN_KEYS = {"name", "title", "paths", "patterns", "match", "tests", "fallback"}


def _parse_domain(table: object, where: str) -> Domain:
    if not isinstance(table, dict):
        raise UserError("a [[domain]] entry must be a table", where)
    name = table.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", name):
        raise UserError(f"'name' must be a lower-case slug, got {name!r}", where)
    where = f"{where} ({name})"
    unknown = set(table) - _DOMAIN_KEYS
    if unknown:
        raise UserError(f"unknown key(s) {sorted(unknown)}", where)
    title = table.get("title", {"en": name, "zh": name})
    if isinstance(title, str):
        title = {"en": title, "zh": title}
    if not isinstance(title, dict) or not all(isinstance(v, str) for v in title.values()):
        raise UserError("'title' must be a string or a table {en = ..., zh = ...}", where)
    rules = []
    if "paths" in table:
        rules.append(_rule(table.get("paths"), table.get("patterns", []), where))
    elif "patterns" in table:
        raise UserError("'patterns' needs 'paths' beside it", where)
    for i, match in enumerate(_as_list(table.get("match", []), "match", where)):
        if not isinstance(match, dict) or set(match) - {"paths", "patterns"}:
            raise UserError(f"[[domain.match]] #{i + 1} takes only 'paths' and 'patterns'", where)
        rules.append(_rule(match.get("paths"), match.get("patterns", []), where))
    fallback = table.get("fallback", False)
    if not isinstance(fallback, bool):
        raise UserError("'fallback' must be true or false", where)
    tests = _as_list(table.get("tests", []), "tests", where)
    if not all(isinstance(t, str) for t in tests):
        raise UserError("'tests' must be a list of strings", where)
    if not rules and not fallback:
        raise UserError("a domain needs 'paths', [[domain.match]] or fallback = true", where)
    return Domain(name=name, title=dict(title), rules=rules, tests=tests, fallback=fallback)


def _as_list(value: object, key: str, where: str) -> list:
    if not isinstance(value, list):
        raise UserError(f"'{key}' must be a list", where)
    return value


def _rule(paths: object, patterns: object, where: str) -> DomainRule:
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
        raise UserError("'paths' must be a non-empty list of globs", where)
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise UserError("'patterns' must be a list of regular expressions", where)
    for pattern in patterns:
        try:
            re.compile(pattern)
        except (re.error, OverflowError, RecursionError, ValueError) as exc:  # a{huge}, nesting, (?L)
            raise UserError(f"'patterns': bad regex {pattern!r}: {exc}", where) from exc
    return DomainRule(paths=list(paths), patterns=list(patterns))


@functools.lru_cache(maxsize=1024)
def glob_regex(glob: str) -> re.Pattern[str]:
    """``**`` crosses directories, ``*`` and ``?`` stay inside one path segment."""
    return re.compile(glob_source(glob) + r"\Z")


def path_matches(path: str, globs: list[str]) -> str | None:
    return next((g for g in globs if glob_regex(g).match(path)), None)


FALLBACK_SNIPPET = '[[domain]] name = "other" fallback = true'
UNCLAIMED_CAP = 10


class Unclaimed(UserError):
    """A change no rule claims, with no fallback domain to take it (the split gathers them all)."""

    def __init__(self, where: str) -> None:
        super().__init__(f"no domain rule claims this change; add: {FALLBACK_SNIPPET}", where)


def unclaimed_error(places: list[str], source: str | None = None) -> UserError:
    """One line naming every file with unclaimed changes (capped) and the fallback snippet."""
    files = list(dict.fromkeys(p.rsplit(":", 1)[0] if p.rsplit(":", 1)[-1].isdigit() else p for p in places))
    shown = ", ".join(files[:UNCLAIMED_CAP])
    if len(files) > UNCLAIMED_CAP:
        shown += f" and {len(files) - UNCLAIMED_CAP} more"
    return UserError(
        f"no domain rule claims the changes in {len(files)} file(s): {shown}; add a catch-all domain "
        f"to the rules file: {FALLBACK_SNIPPET}",
        source,
    )


@dataclass
class LineVerdict:
    domain: str
    reason: str


class Classifier:
    """Assign each changed line of a block to a domain, with the rule that decided it."""

    def __init__(self, domains: list[Domain]) -> None:
        self.domains = domains
        self.fallback = next((d for d in domains if d.fallback), None)
        self._compiled = [(d, r, [re.compile(p) for p in r.patterns]) for d in domains for r in d.rules]

    def by_name(self, name: str) -> Domain:
        return next(d for d in self.domains if d.name == name)

    def path_domain(self, path: str) -> LineVerdict | None:
        for domain, rule, patterns in self._compiled:
            glob = path_matches(path, rule.paths)
            if glob and not patterns:
                return LineVerdict(domain.name, rule.why or f"path {glob}")
        if self.fallback:
            return LineVerdict(self.fallback.name, "fallback domain")
        return None

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - one classifier per split, paths repeat
    def _pattern_rules(self, path: str) -> list[tuple[str, str, re.Pattern[str]]]:
        rules = []
        for domain, rule, patterns in self._compiled:
            glob = path_matches(path, rule.paths) if patterns else None
            if glob:
                rules += [(domain.name, glob, pattern) for pattern in patterns]
        return rules

    def anchor(self, path: str, text: str) -> LineVerdict | None:
        for name, glob, pattern in self._pattern_rules(path):
            if pattern.search(text):
                return LineVerdict(name, f"pattern /{pattern.pattern}/ in {glob}")
        return None

    def classify_lines(
        self, path: str, lines: list[str], where: str, following: list[str] = ()
    ) -> list[LineVerdict]:
        """One verdict per changed line (``lines`` carry their '+'/'-' prefix).

        ``following`` are the unchanged lines right after the block: a block of comments with no
        anchor of its own documents the statement below it and goes where that statement goes.
        """
        anchors = [self.anchor(path, line[1:]) for line in lines]
        if not any(anchors) and all(_is_comment_or_blank(line) for line in lines):
            below = next((ln for ln in following if ln.strip()), None)
            verdict = self.anchor(path, below) if below is not None else None
            if verdict:
                return [LineVerdict(verdict.domain, f"{verdict.reason} (the line it documents)")] * len(lines)
        if not any(anchors):
            verdict = self.path_domain(path)
            if verdict is None:
                raise Unclaimed(where)
            return [verdict] * len(lines)
        return _spread_anchors(lines, anchors)


def _spread_anchors(lines: list[str], anchors: list[LineVerdict | None]) -> list[LineVerdict]:
    """Unanchored lines follow the previous anchor; comments just above an anchor join it; the
    header of a definition (decorators, ``def``/``class`` line, signature) goes with its body."""
    result: list[LineVerdict | None] = list(anchors)
    first = next(a for a in anchors if a)
    current = LineVerdict(first.domain, f"{first.reason} (nearby line)")
    for i, verdict in enumerate(anchors):
        if verdict:
            current = LineVerdict(verdict.domain, f"{verdict.reason} (nearby line)")
        else:
            result[i] = current
    for start, stop in _definition_units(lines):
        owner = next((a for a in anchors[start:stop] if a), None)
        if owner is None:
            continue
        i = start
        while i < stop and not anchors[i]:
            result[i] = LineVerdict(owner.domain, f"{owner.reason} (the definition it opens)")
            i += 1
        j = start  # comments right above it document it; blank lines above stay where they are,
        while (  # the trailing separator of what comes before
            j > 0 and not anchors[j - 1] and lines[j - 1][:1] == lines[start][:1]
            and _is_comment_or_blank(lines[j - 1])
        ):  # fmt: skip
            j -= 1
        while j < start and not lines[j][1:].strip():
            j += 1
        for k in range(j, start):
            result[k] = LineVerdict(owner.domain, f"{owner.reason} (comment above the definition)")
    for i, verdict in enumerate(anchors):
        if not verdict:
            continue
        j = i - 1
        while j >= 0 and not anchors[j] and _is_comment_or_blank(lines[j]):
            result[j] = LineVerdict(verdict.domain, f"{verdict.reason} (comment above)")
            j -= 1
    return [v for v in result if v is not None]


_DEFINITION = re.compile(r"(\s*)(@|def\s|async\s+def\s|class\s)")


def _definition_units(lines: list[str]) -> list[tuple[int, int]]:
    """(start, stop) of each definition a block adds or removes whole: from its first decorator
    (or ``def``/``class`` line) to the next definition at the same indentation on the same side.

    Only definitions at the block's outermost indentation count, so a nested ``def`` stays with
    the function around it.
    """
    units: list[tuple[int, int]] = []
    for side in "-+":
        index = [i for i, ln in enumerate(lines) if ln[:1] == side]
        texts = [lines[i][1:] for i in index]
        indents = [len(t) - len(t.lstrip()) for t in texts if t.strip()]
        if not indents:
            continue
        outer = min(indents)
        starts = []
        previous = ""
        for k, text in enumerate(texts):
            match = _DEFINITION.match(text)
            if match and len(match.group(1)) == outer and not previous.startswith("@"):
                starts.append(k)
            if text.strip():
                previous = text[outer:] if len(text) - len(text.lstrip()) == outer else " "
        for n, k in enumerate(starts):
            stop = starts[n + 1] if n + 1 < len(starts) else len(texts)
            units.append((index[k], index[stop - 1] + 1))
    return units


def _is_comment_or_blank(line: str) -> bool:
    text = line[1:].strip()
    return not text or text.startswith("#")
