"""apply gate: each patch alone on the base, and at its place in the series."""

from __future__ import annotations

import time

from patchkit import __version__
from patchkit.audit.gates import (
    Gate,
    GateContext,
    PatchUnderAudit,
    SeriesState,
    apply_patch,
    gate_result,
    witness,
)
from patchkit.audit.model import GateResult
from patchkit.audit.needs import applies, series_needs
from patchkit.base.tree import BaseTree
from patchkit.diff.hunks import HunkMismatch
from patchkit.testrun.overlaytree import Overlay
from patchkit.values import Message


def series_states(base: BaseTree, patches: list[PatchUnderAudit]) -> list[SeriesState]:
    states: list[SeriesState] = []
    overlay: Overlay = {}
    for patch in patches:
        pre = dict(overlay)
        post = dict(overlay)
        try:
            apply_patch(patch, base.read, post)
        except (HunkMismatch, ValueError) as exc:
            states.append(SeriesState(pre, None, str(exc)))
            continue  # later patches see the series without it
        states.append(SeriesState(pre, post, None))
        overlay = post
    return states


def patch_needs(base: BaseTree, patch: PatchUnderAudit, earlier: list[PatchUnderAudit],
                alone_error: str | None) -> tuple[list[str], str]:  # fmt: skip
    """The earlier patches ``patch`` needs and where that comes from: split.json's depends_on
    (textual and semantic needs alike), else computed — none when it applies alone — and in both
    cases what it needs to work besides (``audit.needs.series_needs``: "… + working", each added one
    with why in ``patch.needs_why``). ``alone_error`` is kept for the callers' sake."""
    needs, source, why = series_needs(base, [*earlier, patch])[-1]
    for name, text in why.items():
        patch.needs_why.setdefault(name, text)
    return needs, source


def apply_gate(
    base: BaseTree, patch: PatchUnderAudit, earlier: list[PatchUnderAudit], state: SeriesState
) -> GateResult:
    started = time.perf_counter()
    alone_error = applies(base, [patch])
    needs, needs_from = patch_needs(base, patch, earlier, alone_error)
    details = {
        "alone": "applies" if alone_error is None else "does not apply",
        "alone_error": alone_error,
        "in_series": "applies" if state.error is None else "does not apply",
        "series_error": state.error,
        "needs": needs,
        "needs_from": needs_from,
        "needs_why": {name: why for name, why in patch.needs_why.items() if name in needs},
        "files": len(patch.files),
    }
    if patch.overlays:  # each one's preimage check is part of applying in series and alone
        details["overlays"] = [{"name": o.name, "target": o.target, "base_sha256": o.base_sha256}
                               for o in patch.overlays]  # fmt: skip
    if state.error is not None:
        status, message = "failed", Message("gate.apply.series-failed", {"error": state.error})
    elif needs:  # a patch whose (semantic) dependencies are missing does not "apply alone"
        why = "; ".join(patch.needs_why[n] for n in needs if n in patch.needs_why)
        key = "gate.apply.needs-why" if why else "gate.apply.needs"
        status, message = "passed", Message(key, {"needs": needs, "why": why})
    elif alone_error is None:
        status, message = "passed", Message("gate.apply.applies")
    else:
        status, message = "passed", Message("gate.apply.not-alone", {"error": alone_error})
    hunks = sum(len(fp.hunks) for fp in patch.files)
    outcome = "applied in series" if state.error is None else f"refused: {state.error}"
    counts = {
        "files": len(patch.files),
        "hunks": hunks,
        "overlays": len(patch.overlays),
        "earlier": len(earlier),
    }
    inputs = [patch.name, *[p.name for p in earlier if p.name in needs]]
    evidence = witness(ENGINE, outcome, version=__version__, inputs=inputs, counts=counts)
    return gate_result("apply", status, message, details, time.perf_counter() - started, [evidence])


ENGINE = "patchkit apply engine (git apply's rules, diff/engine.py)"


def _run(ctx: GateContext) -> GateResult:
    return apply_gate(ctx.trees.base, ctx.patch, ctx.earlier, ctx.state)


GATE = Gate("apply", _run, needs_applied=False)
