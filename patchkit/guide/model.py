"""The guide's types: a finding, and what the lead reads of an audited patch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from patchkit.values import JsonMixin


@dataclass
class Finding(JsonMixin):
    """One reviewer-guide finding."""

    kind: str
    severity: Literal["high", "medium", "low", "info"]
    file: str
    line: int
    message: dict[str, Any]  # {"key", "params"} from the guide; {"en": ..., "zh": ...} once report/ filled it
    evidence: list[str] = field(default_factory=list)


class AuditedPatch(Protocol):
    """What the lead reads of an audited patch, once its gates ran (``audit.model.PatchAudit`` is one;
    ``reviewers``, ``labels`` and ``owner_lines`` are read when it has them)."""

    patch: str
    domain: str
    gates: list[Any]  # each with ``gate``, ``status`` and ``details``
    guide: dict[str, Any]
    files: list[dict[str, Any]]
    depends_on: list[str]
