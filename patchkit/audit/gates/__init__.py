"""The audit gates share one interface: a ``Gate`` turns a ``GateContext`` into a ``GateResult``.

Each gate module (apply, ruff, dco, tests) exports ``GATE``; ``registry.py`` lists them in running
order and the engine loops over that list without knowing which gate it holds. A new gate is one
module with a ``GATE`` and one line in ``registry.py`` (docs/architecture.md shows it)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from patchkit.audit.model import Evidence, FocusedTest, GateResult, GateStatus
from patchkit.audit.verdict import checked
from patchkit.base.tree import BaseTree
from patchkit.diff import engine
from patchkit.diff.model import Commit, FilePatch
from patchkit.series.overlays import Overlay as WholeFile
from patchkit.series.overlays import base_matches, mismatch
from patchkit.testrun.overlaytree import Overlay
from patchkit.values import Message


@dataclass
class PatchUnderAudit:
    """One patch of the series as the gates see it."""

    name: str
    index: int  # 0-based place in the series
    text: str
    files: list[FilePatch]
    commits: list[Commit | None]  # the source commits behind it (None = loose diff)
    domain: str
    title: dict[str, str]
    declared_needs: list[str] | None = None  # patch names from split.json's depends_on, if any
    test_templates: list[str] = field(default_factory=list)
    commit_files: list[set[str]] | None = None  # per source commit: every file it touched in the series
    overlays: list[WholeFile] = field(default_factory=list)  # listed after it in the series, same domain
    overlay_files: list[FilePatch] = field(default_factory=list)  # their diffs, computed at audit time
    focused: list[FocusedTest] = field(default_factory=list)  # from upstream CI steps (audit/focus.py)
    needs_why: dict[str, str] = field(default_factory=dict)  # patch name → why (split.json needs_why)

    @property
    def changed_files(self) -> list[FilePatch]:
        """What a reviewer and the ruff / tests gates see: the diff plus each overlay as a full diff."""
        return self.files + self.overlay_files

    @property
    def touched(self) -> set[str]:
        return {fp.path for fp in self.files} | {o.target for o in self.overlays}


@dataclass
class SeriesState:
    """The touched files before a patch (base + every earlier patch that applied) and after it."""

    pre: Overlay
    post: Overlay | None
    error: str | None  # why it does not apply in series


@dataclass
class Trees:
    """Touched-file overlays over the base: before this patch (base + earlier ones) and after."""

    base: BaseTree
    pre: Overlay
    post: Overlay | None  # None when the patch does not apply in series

    def pre_read(self, path: str) -> bytes | None:
        return self.pre[path] if path in self.pre else self.base.read(path)

    def post_read(self, path: str) -> bytes | None:
        overlay = self.post if self.post is not None else self.pre
        return overlay[path] if path in overlay else self.base.read(path)


def gate_result(gate: str, status: GateStatus, message: Message, details: dict | None = None,
                duration: float = 0.0, evidence: list[Evidence] | None = None) -> GateResult:  # fmt: skip
    """A gate's result: ``message`` (a catalogue key and its data) says it; ``report/`` renders the
    English ``summary`` and every other language from it. ``evidence``: the witnesses that ran; a
    ``passed`` without one comes back as could-not-run (``audit/verdict.checked``)."""
    return checked(GateResult(gate, status, "", details or {}, duration, message=message,
                              evidence=list(evidence or [])))  # fmt: skip


def witness(tool: str, outcome: str, *, version: str = "", command: Sequence[str] = (),
            inputs: Sequence[str] = (), counts: dict[str, int] | None = None) -> Evidence:  # fmt: skip
    """One ``Evidence``: ``tool`` ran and said ``outcome``; inputs are kept to the first 50."""
    return Evidence(tool, version, list(command), list(inputs)[:MAX_INPUTS], outcome, dict(counts or {}))


MAX_INPUTS = 50
NOT_APPLIED = Message("gate.skipped.not-applied")  # every later gate of a patch that does not apply


def not_applied(gate: str, error: str | None) -> GateResult:
    """``gate`` skipped because the patch does not apply in series: caused by the failed apply
    check, so the patch is never ready (``audit/verdict``)."""
    message = Message("gate.skipped.not-applied-because", {"error": error or "-"})
    return GateResult(gate, "skipped", "", {"error": error}, message=message, cause="apply")


def apply_files(files: list[FilePatch], read: Callable[[str], bytes | None], overlay: Overlay) -> None:
    """Apply ``files`` on top of ``read`` into ``overlay`` with the shared engine (all or raise)."""

    def state(path: str) -> tuple[bytes | None, str | None]:
        return (overlay[path], None) if path in overlay else (read(path), None)

    outcome = engine.apply_files(files, state)
    overlay.update({path: data for path, (data, _) in outcome.files.items()})


def apply_patch(patch: PatchUnderAudit, read: Callable[[str], bytes | None], overlay: Overlay) -> None:
    """Apply the patch's diff, then its overlays (preimage checked), into ``overlay``; all or raise."""
    staged = dict(overlay)
    apply_files(patch.files, read, staged)
    for owned in patch.overlays:
        current = staged[owned.target] if owned.target in staged else read(owned.target)
        if not base_matches(owned, current):
            raise ValueError(mismatch(owned, current))
        staged[owned.target] = owned.content
    overlay.update(staged)


def write_overlay(root: Path, paths: list[str], read: Callable[[str], bytes | None]) -> None:
    """Write the given files (as read) under ``root``; absent ones are skipped."""
    for path in paths:
        data = read(path)
        if data is None:
            continue
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


@dataclass
class GateContext:
    """Everything a gate may read for one patch: the patch, the ones before it, the trees around it,
    what it needs first (from the apply gate or split.json) and the gates' settings."""

    patch: PatchUnderAudit
    earlier: list[PatchUnderAudit]
    state: SeriesState
    trees: Trees
    needs: list[str]
    settings: dict[str, Any] = field(default_factory=dict)  # per gate name, e.g. {"tests": TestSettings}
    progress: Callable[..., None] = lambda kind, **data: None  # live progress, e.g. ("tests", side=...)


@dataclass(frozen=True)
class Gate:
    """One audit gate. ``run`` decides; ``cache_config`` is what, besides the patch text, the earlier
    patches and the base, decides its result (a cached result is reused only when it is equal);
    ``environment`` is what the audit records about the tools it ran with."""

    name: str
    run: Callable[[GateContext], GateResult]
    cache_config: Callable[[GateContext], object] = lambda ctx: None
    environment: Callable[[dict[str, Any]], dict[str, Any]] = lambda settings: {}
    needs_applied: bool = True  # skipped when the patch does not apply in series
    # the earlier patches its result depends on, for the cache key (None: all of them)
    keyed_by: Callable[[GateContext], list] | None = None
