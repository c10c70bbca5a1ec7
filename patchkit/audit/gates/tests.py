"""tests gate: the domain's upstream tests on the base and on base+patch, compared by test id."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from patchkit import cache, timing
from patchkit.audit.gates import (
    Gate,
    GateContext,
    PatchUnderAudit,
    apply_patch,
    gate_result,
    not_applied,
    witness,
)
from patchkit.audit.model import Evidence, GateResult
from patchkit.diff.hunks import HunkMismatch
from patchkit.errors import UserError
from patchkit.testrun import affectedrun, basesides, carry, testenv
from patchkit.testrun.basedemand import base_demand, compare_on_demand, demanded, file_of_test, needs_rest
from patchkit.testrun.basesides import LINK_TIMEOUT, base_needed, baseline, materialise, under
from patchkit.testrun.confirm import confirm_failures
from patchkit.testrun.overlaytree import Overlay
from patchkit.testrun.pytestrun import NoReport, TestSettings, environment
from patchkit.testrun.testplan import expand, pack, shard_files
from patchkit.testrun.testselect import (
    FLAKY,
    OUTCOME_FORMAT,
    compare,
    excerpt,
    is_test_file,
    select_tests,
    summary_message,
)
from patchkit.values import Message

__all__ = ["LINK_TIMEOUT", "TestSettings", "materialise", "tests_gate"]


def tests_gate(patch: PatchUnderAudit, pre: Overlay, post: Overlay | None, settings: TestSettings,
               exists, progress: Callable[..., None] = lambda kind, **data: None,
               files_under: Callable[[str], list[str]] = lambda path: []) -> GateResult:  # fmt: skip
    started = time.perf_counter()

    def result(status: str, key: str, params: dict | None = None, evidence: list | None = None,
               **details) -> GateResult:  # fmt: skip
        message = Message(key, params or {})
        return gate_result("tests", status, message, details, time.perf_counter() - started, evidence)

    cannot = "could-not-run"
    if post is None:
        return not_applied("tests", None)
    selection, elsewhere = selection_for(patch, exists)
    if not selection and elsewhere:
        params = {"count": len(elsewhere), "devices": sorted({t.accelerator for t in elsewhere})}
        expected = [{"path": t.path, "device": t.accelerator} for t in elsewhere]
        return result(cannot, "gate.tests.accelerator-only", params, expected_could_not_run=expected)
    if not selection:
        return result(cannot, "gate.tests.no-selection", {"domain": patch.domain})
    if settings.env_error:
        return result(cannot, "gate.tests.no-env", {"error": settings.env_error}, selection=selection)
    env_info = environment(settings.python)
    if "error" in env_info:
        return result(cannot, "gate.tests.interpreter", {"error": env_info["error"]}, selection=selection)
    if not env_info.get("pytest"):
        return result(cannot, "gate.tests.no-pytest", {"python": settings.python}, selection=selection)
    full = selection
    if settings.shard is not None:  # test-level shards: this runner's files (and tests) of the selection
        i, n = settings.shard
        selection = shard_files(expand(full, files_under), settings.plan, settings.shard)
        if not selection:
            part = shard_part(settings, full, [], {}, {}, set())
            return result(
                cannot, "gate.tests.other-shard", {"shard": f"{i}/{n}"}, selection=full, shard_part=part
            )
    work = Path(tempfile.mkdtemp(prefix="patchkit-tests-", dir=_work_root()))
    confirmed: dict = {}
    whole = {fp.old_path for fp in patch.changed_files if fp.old_path and is_test_file(fp.old_path)
             and any(under_path(fp.old_path, p) for p in selection)}  # fmt: skip
    try:  # the patched side first; the base side only where it can change a test's category
        patch_side, groups = affectedrun.patched_side(settings, pre, post, selection, env_info, work,
                                                      patch.name, progress)  # fmt: skip
        if isinstance(patch_side, NoReport):  # no outcome with the patch: the whole base tells what broke
            base_side, base_cached = baseline(settings, pre, selection, env_info, work, progress, patch.name)
            known, stats = set(base_side) if isinstance(base_side, dict) else set(), {"full": len(selection)}
        else:
            if two_sided():  # the reference run base on demand is checked against: the base in full
                base_side, base_cached = baseline(settings, pre, selection, env_info, work, progress,
                                                  patch.name)  # fmt: skip
                known = set(patch_side) | set(base_side) if isinstance(base_side, dict) else set()
                stats = {"full": len(selection)}
            else:
                base_side, known, stats = _on_demand(settings, pre, selection, whole, patch_side, env_info,
                                                     work, progress, patch.name)  # fmt: skip
                base_cached = stats.get("cached-paths", 0)
            if isinstance(base_side, dict):  # a failure with the patch is run once more (confirm)
                patch_side, confirmed = confirm_failures(
                    settings,
                    post,
                    base_side,
                    patch_side,
                    known,
                    env_info,
                    work,
                    patch.name,
                    progress,
                    basesides.run_side,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if isinstance(base_side, NoReport):  # nothing to compare with
        error = {"error": base_side.message.to_dict()}
        return result(cannot, "gate.tests.base-run", error, selection=selection)
    if isinstance(patch_side, NoReport) and not patch_side.timed_out:
        passed = sum(o.status == "passed" for o in base_side.values())
        if passed:  # the base ran; with the patch pytest cannot even report: the patch broke it
            params = {"passed": passed, "error": patch_side.message.to_dict()}
            return result("failed", "gate.tests.no-report", params, selection=selection, base=passed)
    hung = isinstance(patch_side, NoReport) and patch_side.timed_out  # the base finished: the patch's
    if isinstance(patch_side, NoReport) and not hung:
        return result(
            cannot, "gate.tests.patched-run", {"error": patch_side.message.to_dict()}, selection=selection
        )
    details = {"selection": selection, "environment": env_info,
               "baseline_cached": base_cached == len(selection), "baseline_cached_paths": base_cached,
               "base_on_demand": stats, **({"confirmed": confirmed} if confirmed else {}),
               **({"two_sided": True} if two_sided() else {})}  # fmt: skip
    if groups is not None:  # affected tests first (testrun/affectedrun): what each group ran
        details["groups"] = groups
    patched = None if hung else patch_side
    if settings.shard is not None:  # what `patchkit report` needs to merge the shards (testshards)
        details["shard_part"] = shard_part(settings, full, selection, base_side, patched, known)
    return conclude(full, elsewhere, env_info, base_side, patched, known, details, settings, started)


def conclude(selection: list[str], elsewhere: list, env_info: dict, base_side: dict,
             patched: dict | None, known: set[str], details: dict, settings: TestSettings,
             started: float) -> GateResult:  # fmt: skip
    """The gate's result from both sides' outcomes (``patched`` None: the patched run hung); also
    what merging test shards gives (``testshards``)."""
    cannot = "could-not-run"

    def result(status: str, key: str, params: dict | None = None, evidence: list | None = None) -> GateResult:
        message = Message(key, params or {})
        return gate_result("tests", status, message, details, time.perf_counter() - started, evidence)

    hung, stats = patched is None, details.get("base_on_demand", {})
    cmp = compare(base_side, None) if hung else compare_on_demand(base_side, patched, known)
    patched = patched or {}
    details.update({
        "selection": selection,
        "counts": {c: len(ids) for c, ids in cmp.rows.items()},
        "causes": dict(cmp.causes),
        "could_not_run_share": round(cmp.count("could-not-run") / cmp.total, 3) if cmp.total else 0.0,
        "base": dict(cmp.base_counts),
        "patched": dict(cmp.patch_counts),
        "tests": {c: ids[:200] for c, ids in cmp.rows.items() if c not in QUIET},
        "expected_could_not_run": [{"path": t.path, "device": t.accelerator} for t in elsewhere],
        "messages": {t: excerpt(patched[t].text) for c in ("regressed", FLAKY)
                     for t in cmp.rows.get(c, [])[:20] if t in patched},  # fmt: skip
        "path_seconds": path_seconds(patched),
        "test_seconds": test_seconds(patched),
        # the base side as far as it ran (on demand: the tests that did not pass with the patch)
        "base_path_seconds": path_seconds(base_side),
        "base_test_seconds": test_seconds(base_side),
        "file_tests": file_tests(patched),
    })  # fmt: skip
    summary = affectedrun.noted(summary_message(cmp), details.get("groups"), stats)
    evidence = [_pytest_witness(settings, env_info, selection, "patched", cmp.patch_counts)]
    if stats.get("run") or stats.get("full") or stats.get("cached") or stats.get("cached-paths"):
        # the base side as far as it ran, here or in a cached run of the same tree
        base = _pytest_witness(settings, env_info, selection, "base", cmp.base_counts, _shared(stats))
        evidence.insert(0, base)
    if carried := affectedrun.carried_evidence(details.get("groups"), stats):
        evidence.append(witness(**carried))
    if hung:
        params = {
            "seconds": f"{settings.test_timeout:g}",
            "base": len(base_side),
            "summary": summary.to_dict(),
        }
        return result("failed", "gate.tests.patched-timed-out", params, evidence=evidence[:1])
    if cmp.failing:
        return result("failed", summary.key, summary.params, evidence=evidence)
    if not cmp.passed_with_patch:  # nothing witnessed that a test passes with the patch
        return result(cannot, "gate.tests.nothing-passed", {"summary": summary.to_dict()})
    return result("passed", summary.key, summary.params, evidence=evidence)


def path_seconds(side: dict) -> dict[str, float]:
    """Recorded seconds per test file of one side's outcomes (``--shard`` balances by both sides')."""
    out: dict[str, float] = {}
    for test_id, outcome in side.items():
        out[file_of_test(test_id)] = out.get(file_of_test(test_id), 0.0) + outcome.seconds
    return {p: round(v, 3) for p, v in sorted(out.items())}


SLOW_TEST = 1.0  # seconds: a test at least this slow is recorded by its id (``test_seconds``)


def test_seconds(side: dict) -> dict[str, float]:
    """Recorded seconds of one side of each test that took at least ``SLOW_TEST`` (the shard plan
    weighs a split file's tests by them; the faster ones share the rest of the file's time)."""
    slow = {t: round(o.seconds, 3) for t, o in side.items() if o.seconds >= SLOW_TEST}
    return dict(sorted(slow.items()))


LISTED_FILE = 10.0  # seconds: a test file at least this slow with the patch has its tests listed


def file_tests(side: dict) -> dict[str, list[str]]:
    """The JUnit ids of every test of each file that took at least ``LISTED_FILE`` on this side
    (sorted): what ``--shard`` splits a heavy file by without collecting it first (``testplan``)."""
    seconds = path_seconds(side)
    out: dict[str, list[str]] = {}
    for test_id in side:
        if seconds.get(path := file_of_test(test_id), 0.0) >= LISTED_FILE:
            out.setdefault(path, []).append(test_id)
    return {p: sorted(ids) for p, ids in sorted(out.items())}


def shard_part(settings: TestSettings, full: list[str], mine: list[str], base_side: dict,
               patched: dict | None, known: set[str]) -> dict:  # fmt: skip
    """This shard's share of a patch's tests, raw, for ``patchkit report`` to merge (``testshards``)."""
    i, n = settings.shard or (1, 1)
    return {"shard": f"{i}/{n}", "plan": settings.plan_digest, "selection": full, "files": mine,
            "base": pack(base_side, False), "patched": None if patched is None else pack(patched, True),
            "known": sorted(known)}  # fmt: skip


QUIET = ("passed", "skipped", "passed-with-patch")  # categories the record counts but does not list


def under_path(path: str, selected: str) -> bool:
    return path == selected or path.startswith(selected.rstrip("/") + "/")


def _on_demand(settings: TestSettings, pre: Overlay, selection: list[str], whole: set[str], patch_side: dict,
               env_info: dict, work: Path, progress: Callable[..., None], who: str):  # fmt: skip
    """The base side for the tests that need it (``basedemand``); (outcomes or NoReport, the test ids
    whose base outcome is known, the counts the stage table and the record show)."""
    started = time.perf_counter()
    demand = base_demand(patch_side, whole)
    carried = (lambda ids: carry.base_side(settings, env_info, pre, selection, ids)) if (
        settings.select == "affected") else None  # fmt: skip
    base_side, cached_paths, counts = base_needed(settings, pre, selection, demand, env_info, work / "demand",
                                                  progress, who, patch_side, carried)  # fmt: skip
    if isinstance(base_side, NoReport):
        return base_side, set(), {}
    known = {t for t in patch_side if demanded(t, demand) or any(under(t, p) for p in cached_paths)}
    rest = needs_rest(base_side, patch_side, known)
    if rest:  # a new test blames an environment cause the base part did not show: the whole base
        full, _ = baseline(settings, pre, selection, env_info, work, progress, who)
        if isinstance(full, NoReport):
            return full, set(), {}
        base_side, known = {**base_side, **full}, set(patch_side) | set(full)
    fresh = set(counts.get("ran", []))  # the base ran these here; the others' time is saved
    saved = 0.0 if rest else round(sum(o.seconds for t, o in patch_side.items() if t not in fresh), 3)
    stats = {"patched": len(patch_side), "for-failure": len(demand.ids), **demand.why,
             "run": counts.get("run", 0), "cached": counts.get("cached", 0),
             "cached-paths": len(cached_paths),
             "not-needed": len(set(patch_side) - known), "full": len(selection) if rest else 0,
             "saved_seconds": saved,
             **({"carried": counts["carried"], "carried_from": counts["carried_from"]}
                if counts.get("carried") else {}),
             **({"shared_paths": dict(counts["shared"])} if counts.get("shared") else {})}  # fmt: skip
    detail = (f"{who}: patched {len(patch_side)} test(s); base {stats['run']} run (for a failure "
              f"{len(demand.ids)}, deleted/changed {demand.why.get('deleted-or-changed', 0)} file(s)), "
              f"{stats['cached']} cached, {stats.get('carried', 0)} carried, {stats['not-needed']} not "
              f"needed{_shared(stats)}; ~{saved:.0f} s saved against "
              "both sides in full (estimate: recorded durations)")  # fmt: skip
    timing.record("tests.base-on-demand", time.perf_counter() - started, detail, started)
    return base_side, known, stats


def _shared(stats: dict) -> str:
    """The selected paths whose base side another patch's patched run of the same tree gave."""
    shared = stats.get("shared_paths") or {}
    told = ", ".join(f"{n} from the {source}" for source, n in sorted(shared.items()))
    return f"; whole path(s) {told}" if told else ""


def _pytest_witness(
    settings: TestSettings, env_info: dict, selection: list[str], side: str, counts, note: str = ""
) -> Evidence:
    """One pytest run (a side) as evidence: its interpreter, its own outcome counts (``note``: where
    a part of it came from)."""
    told = (", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no test") + note
    return witness(f"pytest ({side})", told, version=str(env_info.get("pytest") or ""),
                   command=[settings.python, "-m", "pytest", "--junitxml={report}", "{selection}"],
                   inputs=selection, counts={k: int(v) for k, v in counts.items()})  # fmt: skip


def host_accelerator() -> bool:
    """Whether this host has a GPU a test could use (NVIDIA or ROCm device nodes)."""
    return any(Path(node).exists() for node in ("/dev/nvidia0", "/dev/kfd"))


def _work_root() -> Path:
    root = cache.cache_root() / "worktrees"
    root.mkdir(parents=True, exist_ok=True)
    return root


def selection_for(patch: PatchUnderAudit, exists: Callable[[str], bool]) -> tuple[list, list]:
    """The patch's test paths, and its focused tests that need an accelerator this host lacks."""
    selection = select_tests(patch.test_templates, patch.changed_files, exists)
    accelerator = host_accelerator()
    elsewhere = [t for t in patch.focused if t.accelerator and not accelerator and t.path not in selection]
    selection += [t.path for t in patch.focused if t not in elsewhere and t.path not in selection]
    return selection, elsewhere


def tree_predicates(base, post: Overlay | None):
    """(exists, files_under) of the tree base + ``post``: a path is there; the test files below a
    directory (``--shard`` expands a selected directory into them)."""

    def exists(path: str) -> bool:
        in_post = post is not None and any(p == path or p.startswith(path.rstrip("/") + "/") for p in post)
        return in_post or base.resolve(path).exists()

    def files_under(path: str) -> list[str]:
        prefix, found = path.rstrip("/") + "/", set()
        try:
            root = base.resolve(path.rstrip("/"))
        except UserError:
            root = None
        if root is not None and root.is_dir():
            found = {p.relative_to(base.root).as_posix() for p in root.rglob("*.py")}
        for p, data in (post or {}).items():
            if p.startswith(prefix):
                (found.add if data is not None else found.discard)(p)
        return sorted(p for p in found if is_test_file(p))

    return exists, files_under


def _run(ctx: GateContext) -> GateResult:
    settings = ctx.settings.get("tests")
    if settings is None:
        return gate_result("tests", "could-not-run", Message("gate.tests.no-settings"))
    pre, post = _test_sides(ctx)
    exists, files_under = tree_predicates(ctx.trees.base, post)
    return tests_gate(ctx.patch, pre, post, settings, exists, ctx.progress, files_under)


def _keyed_by(ctx: GateContext) -> list:
    """The earlier patches the gate's sides are made of (``_test_sides``): those it needs when they
    apply alone, else (and when the patch does not apply in series) all of them — so an edit of one
    patch re-runs the tests of the patches that need it, not of every later one."""
    if ctx.state.post is None:
        return list(ctx.earlier)
    try:
        pre: Overlay = {}
        for other in ctx.earlier:
            if other.name in ctx.needs:
                apply_patch(other, ctx.trees.base.read, pre)
        apply_patch(ctx.patch, ctx.trees.base.read, pre)
    except (HunkMismatch, ValueError):
        return list(ctx.earlier)
    return [p for p in ctx.earlier if p.name in ctx.needs]


def _test_sides(ctx: GateContext) -> tuple[Overlay, Overlay | None]:
    """Base side = base + only the patches this one needs (so independent patches share one cached
    baseline); patched side = that + this patch. Falls back to the series order."""
    pre: Overlay = {}
    try:
        for other in ctx.earlier:
            if other.name in ctx.needs:
                apply_patch(other, ctx.trees.base.read, pre)
        post = dict(pre)
        apply_patch(ctx.patch, ctx.trees.base.read, post)
    except (HunkMismatch, ValueError):
        return ctx.state.pre, ctx.state.post
    return pre, post


def two_sided() -> bool:
    """``PATCHKIT_BASE_SIDE=full``: every selected test on both sides (the two-sided reference run
    that base on demand must agree with; docs/guarantees.md)."""
    return os.environ.get("PATCHKIT_BASE_SIDE", "").strip().lower() == "full"


def _cache_config(ctx: GateContext) -> object:
    t = ctx.settings.get("tests")
    if t is None:
        return None
    shard = [t.shard, t.plan_digest] if t.shard else []  # a shard's share is not the whole result
    select = [t.select] if t.select != "upstream" else []  # the default's key is as before
    both = ["two-sided"] if two_sided() else []
    return [environment(t.python), t.per_test_timeout, t.test_timeout, t.env_error, OUTCOME_FORMAT, *shard,
            *select, *both]  # fmt: skip


def _environment(settings: dict) -> dict:
    if settings.get("tests") is None:
        return {}
    found = environment(settings["tests"].python)
    origin = testenv.torch_origin(settings["tests"].python)  # which file of the base named it
    return {"tests": {**found, "torch_from": origin} if origin else found}


GATE = Gate("tests", _run, cache_config=_cache_config, environment=_environment, keyed_by=_keyed_by)
