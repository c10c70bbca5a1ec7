"""tests gate: the domain's upstream tests on the base and on base+patch, compared by test id."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from patchkit import cache, timing
from patchkit.audit import testenv
from patchkit.audit.gates import (
    Gate,
    GateContext,
    Overlay,
    PatchUnderAudit,
    apply_patch,
    gate_result,
    not_applied,
    witness,
)
from patchkit.audit.inflight import claim, release
from patchkit.audit.model import Evidence, GateResult
from patchkit.audit.overlaytree import installed_vllm, lay_over, write_over
from patchkit.audit.pytestrun import NoReport, TestSettings, environment, run_pytest
from patchkit.audit.testselect import (
    OUTCOME_FORMAT,
    Outcome,
    compare,
    outcomes_by_path,
    select_tests,
    summary_message,
)
from patchkit.diff.hunks import HunkMismatch
from patchkit.values import Message

LINK_TIMEOUT = 600  # seconds for `cp -al` of one top-level entry of the base


def materialise(base_root: Path, overlay: Overlay, dest: Path) -> None:
    """A cheap copy of the base (hard links, no .git) with the overlay's files written as new files,
    so the cached base is never edited."""
    dest.mkdir(parents=True)
    for entry in base_root.iterdir():
        if entry.name == ".git":
            continue
        try:
            linked = subprocess.run(["cp", "-al", str(entry), str(dest / entry.name)], capture_output=True,
                                    timeout=LINK_TIMEOUT).returncode == 0  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):  # a hung or missing cp: copy in-process instead
            shutil.rmtree(dest / entry.name, ignore_errors=True)
            linked = False
        if not linked:  # another file system, or cp could not: a real copy
            copy = shutil.copytree if entry.is_dir() else shutil.copy2
            copy(entry, dest / entry.name)
    write_over(dest, overlay)


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def overlay_digest(overlay: Overlay) -> str:
    return _digest(
        sorted((p, hashlib.sha256(d).hexdigest() if d is not None else None) for p, d in overlay.items())
    )


def _side(settings: TestSettings, overlay: Overlay, tests: list[str], env_info: dict, work: Path, label: str,
          who: str, progress: Callable[..., None]):  # fmt: skip
    tree = work / label
    with timing.stage("tests.materialise", f"{who} {label}"):
        materialise(settings.base_root, overlay, tree)
        installed = installed_vllm(settings.python)
        if installed is not None:  # a compiled build: test the patch against it, not the source tree
            lay_over(installed, overlay, tree)
    present = [t for t in tests if (tree / t).exists()]
    if not present:
        return {}
    side = "base" if label == "base" else "patched"

    def on_count(done: int, selected: int) -> None:
        progress("tests", gate="tests", side=side, done=done, selected=selected)

    with timing.stage(f"tests.pytest.{label}", f"{who}: {len(present)} path(s)"):
        return run_pytest(settings, tree, present, env_info, on_count)


def baseline(settings: TestSettings, pre: Overlay, tests: list[str], env_info: dict, work: Path,
             progress: Callable[..., None], who: str = ""):  # fmt: skip
    """The base side, cached per selected path under base hash + earlier patches + environment:
    patches whose selections overlap (and runs after them) run a shared path on the base once.
    Returns (outcomes or NoReport, how many of the paths came from the cache)."""
    fingerprint = {k: env_info.get(k) for k in ("python", "torch", "platform", "machine", "pytest_timeout")}
    if installed := installed_vllm(settings.python):
        fingerprint["installed_vllm"] = [str(installed.root), *installed.compiled]
    common = (OUTCOME_FORMAT, settings.base_hash, overlay_digest(pre), fingerprint, settings.per_test_timeout)
    whole = _digest("baseline", *common, tests)
    if settings.use_cache and (hit := cache.get_json("audit-baseline", whole)) is not None:
        return {t: Outcome(**o) for t, o in hit["outcomes"].items()}, len(tests)
    keys = {t: _digest("baseline-path", *common, t) for t in tests}
    outcomes: dict[str, Outcome] = {}
    from_cache: list[str] = []

    def load(paths: list[str]) -> list[str]:
        """Fill ``outcomes`` from the cache; the paths it does not hold."""
        left = []
        for test in paths:
            hit = cache.get_json("audit-baseline", keys[test]) if settings.use_cache else None
            if hit is None:
                left.append(test)
            else:
                outcomes.update({t: Outcome(**o) for t, o in hit["outcomes"].items()})
                from_cache.append(test)
        return left

    def run(paths: list[str], where: Path) -> NoReport | None:
        fresh = _side(settings, pre, paths, env_info, where, "base", who, progress)
        if not isinstance(fresh, dict):
            return fresh
        outcomes.update(fresh)
        if settings.use_cache:
            by_path = outcomes_by_path(fresh, paths)
            if by_path is None:  # paths that overlap or name single tests: only the whole selection
                cache.put_json(
                    "audit-baseline", whole, {"outcomes": {t: vars(o) for t, o in outcomes.items()}}
                )
            else:
                for test, mine in by_path.items():
                    cache.put_json(
                        "audit-baseline", keys[test], {"outcomes": {t: vars(o) for t, o in mine.items()}}
                    )
        return None

    missing = load(tests)
    if not missing:
        return outcomes, len(tests)
    # a path another patch's gate is running on this same base right now: wait for its result
    # instead of running it twice (jobs > 1); ours are released before waiting (no deadlock)
    if settings.use_cache:
        ours, theirs = claim([keys[t] for t in missing])
    else:  # --no-cache: nothing is shared, every path runs here
        ours, theirs = {keys[t] for t in missing}, []
    try:
        failed = run([t for t in missing if keys[t] in ours], work) if ours else None
    finally:
        if settings.use_cache:
            release(ours)
    if failed is not None:
        return failed, len(from_cache)
    for event in theirs:
        event.wait()
    if left := load([t for t in missing if keys[t] not in ours]):  # theirs failed: run them here
        failed = run(left, work / "after-wait")
        if failed is not None:
            return failed, len(from_cache)
    return outcomes, len(from_cache)


def tests_gate(patch: PatchUnderAudit, pre: Overlay, post: Overlay | None, settings: TestSettings,
               exists, progress: Callable[..., None] = lambda kind, **data: None) -> GateResult:  # fmt: skip
    started = time.perf_counter()

    def result(status: str, key: str, params: dict | None = None, evidence: list | None = None,
               **details) -> GateResult:  # fmt: skip
        message = Message(key, params or {})
        return gate_result("tests", status, message, details, time.perf_counter() - started, evidence)

    cannot = "could-not-run"
    if post is None:
        return not_applied("tests", None)
    selection = select_tests(patch.test_templates, patch.changed_files, exists)
    accelerator = host_accelerator()
    elsewhere = [t for t in patch.focused if t.accelerator and not accelerator and t.path not in selection]
    selection += [t.path for t in patch.focused if t not in elsewhere and t.path not in selection]
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
    work = Path(tempfile.mkdtemp(prefix="patchkit-tests-", dir=_work_root()))
    try:
        base_side, base_cached = baseline(settings, pre, selection, env_info, work, progress, patch.name)
        if isinstance(base_side, NoReport):  # nothing to compare with: the patched run would be wasted
            return result(
                cannot, "gate.tests.base-run", {"error": base_side.message.to_dict()}, selection=selection
            )
        patch_side = _side(settings, post, selection, env_info, work, "patch", patch.name, progress)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if isinstance(patch_side, NoReport) and isinstance(base_side, dict) and not patch_side.timed_out:
        passed = sum(o.status == "passed" for o in base_side.values())
        if passed:  # the base ran; with the patch pytest cannot even report: the patch broke it
            params = {"passed": passed, "error": patch_side.message.to_dict()}
            return result("failed", "gate.tests.no-report", params, selection=selection, base=passed)
    hung = isinstance(patch_side, NoReport) and patch_side.timed_out  # the base finished: the patch's
    if isinstance(patch_side, NoReport) and not hung:
        return result(
            cannot, "gate.tests.patched-run", {"error": patch_side.message.to_dict()}, selection=selection
        )
    patched = {} if hung else patch_side
    cmp = compare(base_side, None if hung else patch_side)
    details = {
        "selection": selection,
        "environment": env_info,
        "baseline_cached": base_cached == len(selection),
        "baseline_cached_paths": base_cached,
        "counts": {c: len(ids) for c, ids in cmp.rows.items()},
        "causes": dict(cmp.causes),
        "could_not_run_share": round(cmp.count("could-not-run") / cmp.total, 3) if cmp.total else 0.0,
        "base": dict(cmp.base_counts),
        "patched": dict(cmp.patch_counts),
        "tests": {c: ids[:200] for c, ids in cmp.rows.items() if c not in ("passed", "skipped")},
        "expected_could_not_run": [{"path": t.path, "device": t.accelerator} for t in elsewhere],
        "messages": {t: patched[t].text[:1500] for t in cmp.rows.get("regressed", [])[:20] if t in patched},
    }
    summary = summary_message(cmp)
    evidence = [_pytest_witness(settings, env_info, selection, "base", cmp.base_counts),
                _pytest_witness(settings, env_info, selection, "patched", cmp.patch_counts)]  # fmt: skip
    if hung:
        params = {
            "seconds": f"{settings.test_timeout:g}",
            "base": len(base_side),
            "summary": summary.to_dict(),
        }
        return result("failed", "gate.tests.patched-timed-out", params, evidence=evidence[:1], **details)
    if cmp.failing:
        return result("failed", summary.key, summary.params, evidence=evidence, **details)
    if not cmp.passed_with_patch:  # nothing witnessed that a test passes with the patch
        return result(cannot, "gate.tests.nothing-passed", {"summary": summary.to_dict()}, **details)
    return result("passed", summary.key, summary.params, evidence=evidence, **details)


def _pytest_witness(
    settings: TestSettings, env_info: dict, selection: list[str], side: str, counts
) -> Evidence:
    """One pytest run (a side) as evidence: its interpreter, its own outcome counts."""
    told = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no test"
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


def _run(ctx: GateContext) -> GateResult:
    settings = ctx.settings.get("tests")
    if settings is None:
        return gate_result("tests", "could-not-run", Message("gate.tests.no-settings"))
    pre, post = _test_sides(ctx)
    trees = ctx.trees

    def exists(path: str) -> bool:
        in_post = post is not None and any(p == path or p.startswith(path.rstrip("/") + "/") for p in post)
        return in_post or trees.base.resolve(path).exists()

    return tests_gate(ctx.patch, pre, post, settings, exists, ctx.progress)


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


def _cache_config(ctx: GateContext) -> object:
    t = ctx.settings.get("tests")
    if t is None:
        return None
    return [environment(t.python), t.per_test_timeout, t.test_timeout, t.env_error, OUTCOME_FORMAT]


def _environment(settings: dict) -> dict:
    if settings.get("tests") is None:
        return {}
    found = environment(settings["tests"].python)
    origin = testenv.torch_origin(settings["tests"].python)  # which file of the base named it
    return {"tests": {**found, "torch_from": origin} if origin else found}


GATE = Gate("tests", _run, cache_config=_cache_config, environment=_environment)
