"""A split series: its patches in order, where each changed block went and why."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from patchkit.diff.model import Commit, FilePatch
from patchkit.values import SCHEMA_VERSION, JsonMixin, Pin


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
    needs_why: dict[str, str] = field(default_factory=dict)  # depends_on entry → why (semantic ones)
    sha256: str = ""  # of the written patch file
    tests: list[str] = field(default_factory=list)
    overlays: list[str] = field(default_factory=list)  # series-relative overlay tomls listed after it


@dataclass
class Series(JsonMixin):
    base: Pin
    patches: list[SplitPatch]
    commits: list[Commit | None]
    assignments: list[Assignment] = field(default_factory=list)
    path_prefix: str = ""  # what was prepended to replay paths to root them at the repo ("vllm/")
    absorbed: list[int] = field(default_factory=list)  # commits none of whose lines survive net
    warnings: list[str] = field(default_factory=list)  # e.g. a patch that leaves a file unparsable
    resolutions: list[dict[str, Any]] = field(default_factory=list)  # cross-file moves/reorders/merges
    proof: dict[str, Any] = field(default_factory=dict)  # verify.py's record of the lossless check
    edits: list[dict[str, Any]] = field(default_factory=list)  # lines that came from the edit loop
    schema: int = SCHEMA_VERSION
