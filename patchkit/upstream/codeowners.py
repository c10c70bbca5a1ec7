"""``.github/CODEOWNERS`` → who reviews a path, by GitHub's rules, through the ``codeowners`` parser
(a port of hmarr/codeowners): the last matching line wins, ``docs/*`` owns only the direct children
of ``docs/``, ``\\ `` escapes a space, ``**`` crosses directories, a leading ``/`` (or any inner one)
anchors at the root, a trailing ``/`` names a directory. What GitHub does not support — ``!``
negation, ``[ ]`` character ranges, a ``\\#`` escape — is never matched (GitHub reports such a line
as an error and ignores it); those lines are kept in ``unsupported`` with their numbers."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from codeowners import CodeOwners


@dataclass(frozen=True)
class OwnerRule:
    pattern: str
    owners: tuple[str, ...]
    line: int  # 1-based line of .github/CODEOWNERS


@dataclass(frozen=True)
class Unsupported:
    line: int
    text: str
    why: str  # "negation" | "character range" | "escaped #"


class OwnerRules(list):
    """The rules in file order (a list of ``OwnerRule``), plus the lines GitHub would not use."""

    def __init__(self, rules: list[OwnerRule] = (), unsupported: list[Unsupported] = ()) -> None:
        super().__init__(rules)
        self.unsupported = list(unsupported)


_RANGE = re.compile(r"(?<!\\)\[[^\]]*\]")


def _unsupported(pattern: str) -> str | None:
    if pattern.startswith("!"):
        return "negation"
    if pattern.startswith("\\#"):
        return "escaped #"
    if _RANGE.search(pattern):
        return "character range"
    return None


def parse_codeowners(text: str) -> OwnerRules:
    rules, unsupported = [], []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pattern = line.replace("\\ ", "\0").split()[0].replace("\0", "\\ ")
        if why := _unsupported(pattern):
            unsupported.append(Unsupported(number, line, why))
            continue
        rules.append(OwnerRule(pattern, _owners(line), number))
    return OwnerRules(rules, unsupported)


def _owners(line: str) -> tuple[str, ...]:
    """@user, @org/team or an e-mail address, up to a ``#`` comment."""
    owners = []
    for word in line.replace("\\ ", "\0").split()[1:]:
        if word.startswith("#"):
            break
        if "@" in word:
            owners.append(word)
    return tuple(owners)


@functools.lru_cache(maxsize=8)
def _file_matcher(rules: tuple[OwnerRule, ...]) -> tuple[CodeOwners, dict[int, OwnerRule]]:
    """One parser over the rules, each on its own line number, so the parser's answer names it."""
    lines = [""] * (max((r.line for r in rules), default=0))
    for rule in rules:
        lines[rule.line - 1] = f"{rule.pattern} {' '.join(rule.owners)}".rstrip()
    return CodeOwners("\n".join(lines)), {r.line: r for r in rules}


def owners_of(path: str, rules: list[OwnerRule]) -> OwnerRule | None:
    """The rule that decides ``path`` (the last matching line), or None; an owner-less last match
    means nobody in particular."""
    matcher, by_line = _file_matcher(tuple(rules))
    _, line, _, _ = matcher.matching_line(path)
    return by_line.get(line) if line is not None else None
