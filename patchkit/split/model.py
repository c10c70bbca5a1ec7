"""Domain rules as the split reads them from domains.toml."""

from __future__ import annotations

from dataclasses import dataclass, field

from patchkit.values import JsonMixin


@dataclass
class DomainRule(JsonMixin):
    paths: list[str]
    patterns: list[str] = field(default_factory=list)  # regexes over changed lines; empty = whole file
    why: str = ""  # the reason a verdict gives instead of "path <glob>" (rules made from vLLM's metadata)


@dataclass
class Domain(JsonMixin):
    name: str
    title: dict[str, str]  # {"en": ..., "zh": ...}
    rules: list[DomainRule]
    tests: list[str] = field(default_factory=list)  # upstream test paths or templates ({stem}, {path})
    fallback: bool = False
    origin: str = "rules"  # rules | mergify (a vLLM label) | layout (a vLLM directory)
