"""What looking a dotted name up in a tree finds: a ``Definition``, or ``Unresolved`` and why."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Definition", "Resolution", "Unresolved"]


@dataclass(frozen=True)
class Definition:
    """A name that resolves. kind: module | class | function | value | external | builtin."""

    path: str  # the dotted name asked for
    kind: str
    file: str = ""  # repo-relative file holding the definition ('' for external / builtin)
    line: int = 0  # first line, decorators included
    end: int = 0
    qualname: str = ""  # 'Cls.method' inside ``file``; '' for a module
    via: tuple[str, ...] = ()  # the re-exports and bases followed to get here ('file:line')
    detail: str = ""  # external: the dotted name outside the tree
    node: ast.AST | None = field(default=None, compare=False, repr=False)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.file and self.line else self.file or self.detail


@dataclass(frozen=True)
class Unresolved:
    """A name that does not resolve. reason: absent (nothing defines it) | unknown (cannot tell)."""

    path: str
    reason: str
    detail: str = ""  # what stopped the search: the missing module, the external base, __getattr__
    owner: Definition | None = None  # the last part that did resolve
    why: dict[str, Any] = field(default_factory=dict, compare=False)  # ``detail`` as a catalogue message

    kind = "unresolved"


Resolution = Definition | Unresolved
