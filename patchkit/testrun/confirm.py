"""A failure with the patch is run once more before it fails the gate (vLLM's own CI retries a
failed job step too): a test that was ``regressed`` or ``new-failed`` and passes when run again
on the same patched tree is ``flaky`` — shown in the report with the first run's text, never a
failure by itself, never "passed" either. One that fails again keeps its first outcome.

Only a few tests are retried (``MAX_RETRIED``): more failures than that are no accident of one run.
The retry is one pytest run of just those test ids (``pytestrun``'s ``only`` plugin)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from patchkit import timing
from patchkit.testrun.basedemand import compare_on_demand, file_of_test
from patchkit.testrun.testselect import FAILING, FLAKY, Outcome

if TYPE_CHECKING:
    from patchkit.testrun.overlaytree import Overlay
    from patchkit.testrun.pytestrun import TestSettings

MAX_RETRIED = 20


def confirm_failures(settings: TestSettings, post: Overlay, base_side: dict[str, Outcome],
                     patch_side: dict[str, Outcome], known: set[str], env_info: dict, work: Path,
                     who: str, progress: Callable[..., None],
                     run_side: Callable[..., object]) -> tuple[dict[str, Outcome], dict]:  # fmt: skip
    """(the patched outcomes with each retried test that passed marked ``flaky``, what was done).
    ``run_side`` is ``basesides.run_side`` (passed in: tests replace it)."""
    cmp = compare_on_demand(base_side, patch_side, known)
    failing = sorted(t for c in FAILING for t in cmp.rows.get(c, []) if t in patch_side)
    if not failing:
        return patch_side, {}
    if len(failing) > MAX_RETRIED:
        return patch_side, {"retried": 0, "not_retried": len(failing), "why": "too-many"}
    started = time.perf_counter()
    paths = sorted({file_of_test(t) for t in failing})
    again = run_side(settings, post, paths, env_info, work, "patch-retry", who, progress, (failing, []))
    seconds = time.perf_counter() - started
    if not isinstance(again, dict):  # the retry gave no report: the first outcomes stand
        timing.record(
            "tests.confirm", seconds, f"{who}: {len(failing)} failure(s) run again: no report", started
        )
        return patch_side, {"retried": len(failing), "flaky": 0, "retry_report": False}
    out = dict(patch_side)
    flaky = []
    for test_id in failing:
        if again.get(test_id, Outcome("absent")).status == "passed":
            first = patch_side[test_id]
            out[test_id] = Outcome(
                FLAKY, first.text, first.cause, first.teardown_cause, seconds=first.seconds
            )
            flaky.append(test_id)
    detail = f"{who}: {len(failing)} failure(s) run again with the patch, {len(flaky)} passed (flaky)"
    timing.record("tests.confirm", seconds, detail, started)
    return out, {"retried": len(failing), "flaky": len(flaky), "retry_report": True}
