"""Audit records: gate results, per-patch verdicts and the whole result (the guide's findings are
``guide/model``'s)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from patchkit.diff.model import Commit
from patchkit.values import SCHEMA_VERSION, JsonMixin, Message, Pin

GateStatus = Literal["passed", "failed", "could-not-run", "skipped"]
Verdict = Literal[
    "ready", "incomplete", "needs-work", "blocked"
]  # incomplete: a requested gate could not run


@dataclass
class ProgressEvent:
    """What the audit is doing now, for a progress display (never recorded).

    kind: gate-start | gate-done | patch-done | tests (live pytest counts of one side)."""

    kind: str
    patch: str
    number: int  # 1-based among the patches this audit (shard) covers
    total: int
    gate: str = ""
    status: str = ""  # gate-done: the gate's status
    seconds: float = 0.0  # gate-done: how long the gate took
    side: str = ""  # tests: base | patched
    done: int = 0  # tests: tests finished so far
    selected: int = 0  # tests: tests pytest collected for this side


@dataclass
class Evidence(JsonMixin):
    """One witness a gate ran: what ran, on what, and what it said itself.

    A ``passed`` GateResult needs at least one complete Evidence (a tool and its outcome);
    ``audit/verdict.py`` demotes one without to could-not-run. Everything here is data, shown
    verbatim; the labels around it come from the catalogues (``evidence.*``)."""

    tool: str  # what ran, as it names itself: "ruff", "python", "pytest", "git interpret-trailers"
    version: str = ""  # its version, as it reports it
    command: list[str] = field(default_factory=list)  # argv of a process; what varies as {placeholder}
    inputs: list[str] = field(default_factory=list)  # what it read: files, modules, tests, commits
    outcome: str = ""  # its own result in its own terms: "exit 0", "3 passed, 1 skipped", "agrees"
    counts: dict[str, int] = field(default_factory=dict)  # what it counted (keys: evidence.count.*)

    @property
    def complete(self) -> bool:
        return bool(self.tool.strip() and self.outcome.strip())


@dataclass
class GateResult(JsonMixin):
    gate: str
    status: GateStatus
    summary: str  # English; JSON consumers and CI logs read it
    details: dict[str, Any] = field(default_factory=dict)
    duration: float = 0.0
    cached: bool = False
    message: Message | None = None  # ``summary`` for the catalogues; None in records before it
    evidence: list[Evidence] = field(default_factory=list)  # the witnesses that ran (passed needs one)
    cause: str | None = None  # skipped: the gate whose failure left nothing to run ("apply")


@dataclass
class CiStepRef(JsonMixin):
    """The upstream CI step a focused test comes from (``.buildkite/...``)."""

    label: str
    key: str
    file: str
    device: str


@dataclass
class FocusedTest(JsonMixin):
    """A test file the patch should run, and why: the CI steps whose source dependencies cover the
    patch's files and that run it, narrowed to tests that exercise the changed modules."""

    path: str
    why: str  # "changed" | "mirrors <source>" | "named <source>" | "imports <source>"
    steps: list[CiStepRef] = field(default_factory=list)
    accelerator: str | None = None  # every step that runs it needs this device (none runs on a CPU)


@dataclass
class RuntimeTarget(JsonMixin):
    """One vLLM object a plugin module replaces at run time (``patchkit runtime``), as resolved.

    status: present | unchanged | body-changed | signature-changed | missing | added | new-upstream |
    unknown. ``witness`` says what decided it: "static" (the pinned tree read with ``ast``) or
    "interpreter" (a real import; ``real`` holds what it saw)."""

    target: str  # dotted: vllm.v1.core.kv_cache_utils.f
    kind: str  # assign | setattr | class-swap | decorator | registry
    lines: list[int]  # the plugin module's lines that replace it
    status: str
    witness: str = "static"
    replacement: str = ""  # what the plugin puts there, as its source names it
    guard: list[str] = field(default_factory=list)  # enclosing ``if`` tests and functions
    captured: list[int] = field(default_factory=list)  # lines that keep the original in a name
    original_kind: str = ""  # function | class | module | value | external | builtin | unresolved
    defined_in: str = ""  # vllm/x.py:LINE of the original in the pin (re-exports and bases followed)
    via: list[str] = field(default_factory=list)
    reason: dict[str, Any] = field(default_factory=dict)  # why a target is missing or unknown (a message)
    moved_to: list[str] = field(default_factory=list)  # same-named definitions elsewhere in the pin
    signature: str = ""  # the original's, in the pin
    parameters: list[list[Any]] | None = None  # the original's (name, kind, has a default) rows
    replacement_signature: str = ""
    signature_problems: list[dict[str, Any]] = field(default_factory=list)  # why a call may not fit
    old_defined_in: str = ""  # with --since: where it was in the older pin
    old_signature: str = ""
    upstream_diff: str = ""  # the original's source, older pin -> pin (unified diff)
    source_sha256: str = ""  # of the original's source lines in the pin
    uses: list[dict[str, Any]] = field(default_factory=list)  # {name, line, status} inside the replacement
    registry: list[dict[str, Any]] = field(default_factory=list)  # the plugin's notes naming it
    real: dict[str, Any] = field(default_factory=dict)  # the interpreter's answer and the comparison


# A test shard's patch guide keeps, under this key, the guide before the gates' findings: the merge
# finishes it from the gates of every shard (``audit/testshards``); words leave it as messages.
GUIDE_UNFINISHED = "unfinished"


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
    labels: list[str] = field(default_factory=list)  # vLLM's mergify labels its files earn
    reviewers: list[str] = field(default_factory=list)  # CODEOWNERS of its files, most files first
    # the CODEOWNERS lines that decided its files: {"line", "pattern", "owners", "files"}, most files first
    owner_lines: list[dict[str, Any]] = field(default_factory=list)
    focused_tests: list[FocusedTest] = field(default_factory=list)  # from upstream CI steps
    targets: list[RuntimeTarget] = field(default_factory=list)  # ``patchkit runtime``: one per target
    registry: dict[str, Any] = field(default_factory=dict)  # ``patchkit runtime``: the plugin's own note


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
    guide: dict[str, Any] = field(default_factory=dict)  # the series' lead paragraph
    stages: list[dict[str, Any]] = field(default_factory=list)  # where this run's time went (timing.Stage)
    since: dict[str, Any] = field(default_factory=dict)  # ``--since OLD.json``: interdiff/since
