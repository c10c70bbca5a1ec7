"""``.github/CODEOWNERS`` → who reviews a path (gitignore-style patterns; the last match wins)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from patchkit.globs import glob_source


@dataclass(frozen=True)
class OwnerRule:
    pattern: str
    owners: tuple[str, ...]
    line: int


def parse_codeowners(text: str) -> list[OwnerRule]:
    rules = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        pattern, *owners = line.split()
        if pattern.startswith("\\#"):
            pattern = pattern[1:]
        rules.append(OwnerRule(pattern, tuple(o for o in owners if o.startswith("@") or "@" in o), number))
    return rules


@functools.lru_cache(maxsize=2048)
def _regex(pattern: str) -> re.Pattern[str]:
    anchored = pattern.startswith("/") or "/" in pattern.rstrip("/")
    body = pattern.strip("/")
    lead = "" if anchored else "(?:.*/)?"
    # a pattern names a file or a directory; a directory owns everything below it
    return re.compile(lead + glob_source(body) + r"(?:/.*)?\Z")


def owners_of(path: str, rules: list[OwnerRule]) -> OwnerRule | None:
    """The rule that decides ``path`` (the last matching one), or None; an owner-less last match
    means nobody in particular."""
    found = None
    for rule in rules:
        if _regex(rule.pattern).match(path):
            found = rule
    return found
