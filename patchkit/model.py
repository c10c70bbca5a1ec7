"""The data model every stage shares; JSON round-trip through ``to_dict`` / ``from_dict``.

Parse produces it, every later stage reads it, reports render only from its JSON.
Schema changes bump ``SCHEMA_VERSION`` (documented in docs/schema.md).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

SCHEMA_VERSION = 1

GateStatus = Literal["passed", "failed", "could-not-run", "skipped"]
Verdict = Literal["ready", "needs-work", "blocked"]


class JsonMixin:
    """Dataclass <-> plain dict conversion, recursing into nested dataclasses and lists."""

    def to_dict(self) -> dict[str, Any]:
        return _to_plain(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]):  # noqa: ANN206 - returns cls
        return _from_plain(cls, data)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _to_plain(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        if value and isinstance(value[0], str):
            return list(value)  # hunk lines: the bulk of any record
        return [_to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_plain(v) for k, v in value.items()}
    cls = type(value)
    names = _FIELD_NAMES.get(cls)
    if names is None and dataclasses.is_dataclass(cls):
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    if names is not None:
        return {name: _to_plain(getattr(value, name)) for name in names}
    return value


def _from_plain(tp: Any, value: Any) -> Any:
    """``value`` as ``tp``; a value of the wrong JSON type is a ValueError naming both."""
    origin = typing.get_origin(tp)
    if value is None:
        if tp is Any or (origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp)):
            return None
        raise ValueError(f"expected {_type_name(tp)}, got null")
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return _from_plain(args[0], value) if len(args) == 1 else value
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise ValueError(f"expected one of {list(typing.get_args(tp))}, got {value!r:.60}")
        return value
    if origin is list:
        _expect(value, list, tp)
        (item_tp,) = typing.get_args(tp)
        return [_from_plain(item_tp, v) for v in value]
    if origin is dict:
        _expect(value, dict, tp)
        _, val_tp = typing.get_args(tp)
        return {k: _from_plain(val_tp, v) for k, v in value.items()}
    if tp in (str, bool):
        _expect(value, tp, tp)
    elif tp in (int, float):
        if isinstance(value, bool) or not isinstance(value, int if tp is int else (int, float)):
            raise ValueError(f"expected {_type_name(tp)}, got {type(value).__name__} {value!r:.60}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ValueError(f"expected an object for {tp.__name__}, got {type(value).__name__}")
        hints = typing.get_type_hints(tp)
        known = {f.name for f in dataclasses.fields(tp)}
        kwargs = {k: _from_plain(hints[k], v) for k, v in value.items() if k in known}
        return tp(**kwargs)
    return value


def _expect(value: Any, kind: type, tp: Any) -> None:
    if not isinstance(value, kind):
        raise ValueError(f"expected {_type_name(tp)}, got {type(value).__name__} {value!r:.60}")


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


# --------------------------------------------------------------------------- replay


@dataclass
class Trailer(JsonMixin):
    key: str  # as written, e.g. "Signed-off-by"
    value: str  # "Name <email>"


@dataclass
class Commit(JsonMixin):
    sha: str | None
    author: str | None
    email: str | None
    date: str | None
    subject: str
    body: str = ""
    trailers: list[Trailer] = field(default_factory=list)
    source: str = ""  # "file:line" where the commit starts in the replay

    @property
    def has_metadata(self) -> bool:
        return self.author is not None

    def trailer_values(self, key: str) -> list[str]:
        return [t.value for t in self.trailers if t.key.lower() == key.lower()]


@dataclass
class Hunk(JsonMixin):
    """One ``@@`` hunk. ``lines`` keep their diff prefix: ' ', '-', '+' or '\\' (no newline marker)."""

    old_start: int
    old_count: int
    new_start: int
    new_count: int
    lines: list[str] = field(default_factory=list)  # empty in split.json: the patch files hold them
    section: str = ""  # text after the second @@
    commits: list[int] = field(default_factory=list)  # indexes into Replay.commits

    @property
    def added(self) -> int:
        return sum(1 for ln in self.lines if ln.startswith("+"))

    @property
    def removed(self) -> int:
        return sum(1 for ln in self.lines if ln.startswith("-"))

    def header(self) -> str:
        tail = f" {self.section}" if self.section else ""
        return (
            f"@@ -{_range(self.old_start, self.old_count)} +{_range(self.new_start, self.new_count)} @@{tail}"
        )


def _range(start: int, count: int) -> str:
    return str(start) if count == 1 else f"{start},{count}"


@dataclass
class FilePatch(JsonMixin):
    old_path: str | None  # None for a new file (/dev/null)
    new_path: str | None  # None for a deleted file
    old_mode: str | None = None
    new_mode: str | None = None
    old_blob: str | None = None  # preimage blob id from the ``index`` line (often abbreviated)
    new_blob: str | None = None
    hunks: list[Hunk] = field(default_factory=list)
    binary: bool = False
    similarity: int | None = None  # rename/copy similarity index
    source: str = ""  # "file:line" of its ``diff`` header

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    @property
    def is_new(self) -> bool:
        return self.old_path is None

    @property
    def is_deleted(self) -> bool:
        return self.new_path is None

    @property
    def is_rename(self) -> bool:
        return bool(self.old_path and self.new_path and self.old_path != self.new_path)

    @property
    def added(self) -> int:
        return sum(h.added for h in self.hunks)

    @property
    def removed(self) -> int:
        return sum(h.removed for h in self.hunks)


@dataclass
class Patch(JsonMixin):
    """One commit's worth of diff (or one loose diff file with commit=None)."""

    commit: Commit | None
    files: list[FilePatch]
    source: str = ""  # file name it came from


@dataclass
class Replay(JsonMixin):
    patches: list[Patch]
    sources: list[str] = field(default_factory=list)

    @property
    def commits(self) -> list[Commit | None]:
        return [p.commit for p in self.patches]


# --------------------------------------------------------------------------- domains


@dataclass
class DomainRule(JsonMixin):
    paths: list[str]
    patterns: list[str] = field(default_factory=list)  # regexes over changed lines; empty = whole file


@dataclass
class Domain(JsonMixin):
    name: str
    title: dict[str, str]  # {"en": ..., "zh": ...}
    rules: list[DomainRule]
    tests: list[str] = field(default_factory=list)  # upstream test paths or templates ({stem}, {path})
    fallback: bool = False


# --------------------------------------------------------------------------- split


@dataclass
class Assignment(JsonMixin):
    """Why one changed block (a sub-hunk) went to a domain."""

    file: str
    old_line: int  # first base line of the block (or insertion point)
    new_line: int  # first line in base+replay
    added: int
    removed: int
    domain: str
    rule: str  # human-readable: 'paths vllm/tool_parsers/** (tool-parser)'
    hunk: int  # index of the net -U3 hunk in its file this block belongs to
    mixed: bool = False  # True when the hunk holds blocks of several domains
    commits: list[int] = field(default_factory=list)


@dataclass
class SplitPatch(JsonMixin):
    number: int
    domain: str
    title: dict[str, str]
    filename: str  # NNNN-<domain>.patch
    files: list[FilePatch]
    source_commits: list[int]  # indexes into Replay.commits, in replay order
    depends_on: list[str] = field(default_factory=list)  # domains this patch needs first
    sha256: str = ""  # of the written patch file
    tests: list[str] = field(default_factory=list)
    overlays: list[str] = field(default_factory=list)  # series-relative overlay tomls listed after it


@dataclass
class Pin(JsonMixin):
    name: str = "vllm"
    source: str = "path"  # index | git | path
    version: str | None = None
    sha256: str | None = None
    url: str | None = None
    rev: str | None = None
    path: str | None = None
    tree_hash: str | None = None  # content hash of the prepared tree


@dataclass
class Series(JsonMixin):
    base: Pin
    patches: list[SplitPatch]
    commits: list[Commit | None]
    assignments: list[Assignment] = field(default_factory=list)
    path_prefix: str = ""  # what was prepended to replay paths to root them at the repo ("vllm/")
    absorbed: list[int] = field(default_factory=list)  # commits none of whose lines survive net
    warnings: list[str] = field(default_factory=list)  # e.g. a patch that leaves a file unparsable
    proof: dict[str, Any] = field(default_factory=dict)  # verify.py's record of the lossless check
    schema: int = SCHEMA_VERSION


# --------------------------------------------------------------------------- audit


@dataclass
class Message(JsonMixin):
    """A report sentence as a catalogue key and its params (patchkit/report/i18n/*.json).

    Params are plain data (counts, names, lists); a param that is itself ``{"key", "params"}`` is a
    nested message. The English string beside it stays the fallback of every renderer."""

    key: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class GateResult(JsonMixin):
    gate: str
    status: GateStatus
    summary: str  # English; JSON consumers and CI logs read it
    details: dict[str, Any] = field(default_factory=dict)
    duration: float = 0.0
    cached: bool = False
    message: Message | None = None  # ``summary`` for the catalogues; None in records before it


@dataclass
class Finding(JsonMixin):
    """One reviewer-guide finding."""

    kind: str
    severity: Literal["high", "medium", "low", "info"]
    file: str
    line: int
    message: dict[str, str]  # {"en": ..., "zh": ...}
    evidence: list[str] = field(default_factory=list)


@dataclass
class PatchAudit(JsonMixin):
    patch: str  # file name
    domain: str
    title: dict[str, str]
    gates: list[GateResult]
    verdict: Verdict
    reasons: list[str]  # English
    files: list[dict[str, Any]] = field(default_factory=list)  # path, added, removed
    commits: list[Commit | None] = field(default_factory=list)
    depends_on: list[str] = field(default_factory=list)
    diff: str = ""
    guide: dict[str, Any] = field(default_factory=dict)  # findings, priority, order, follow_ups
    reason_messages: list[Message] = field(default_factory=list)  # ``reasons`` for the catalogues, same order


@dataclass
class AuditResult(JsonMixin):
    series_dir: str
    base: Pin
    patches: list[PatchAudit]
    verdict: Verdict
    environment: dict[str, Any] = field(default_factory=dict)
    shard: str | None = None  # "I/N"
    created: str = ""
    schema: int = SCHEMA_VERSION
