"""tests gate: the domain's upstream tests on the base and on base+patch, compared by test id."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache as memoised
from pathlib import Path

from patchkit import cache, timing
from patchkit.audit.gates import Gate, GateContext, Overlay, PatchUnderAudit, apply_patch, gate_result
from patchkit.audit.inflight import claim, release
from patchkit.audit.model import GateResult
from patchkit.audit.overlaytree import installed_vllm, lay_over, write_over
from patchkit.audit.testselect import (
    OUTCOME_FORMAT,
    Outcome,
    compare,
    outcomes_by_path,
    parse_junit,
    select_tests,
    summary_message,
)
from patchkit.diff.hunks import HunkMismatch
from patchkit.values import Message

_PROBE = (
    "import json, platform, sys\n"
    "from importlib import metadata, util\n"
    "def v(n):\n"
    "    try: return metadata.version(n)\n"
    "    except metadata.PackageNotFoundError: return None\n"
    "print(json.dumps({'python': platform.python_version(), 'implementation': sys.implementation.name,"
    " 'platform': platform.platform(), 'machine': platform.machine(), 'torch': v('torch'),"
    " 'pytest': v('pytest'), 'pytest_timeout': util.find_spec('pytest_timeout') is not None,"
    " 'xdist': util.find_spec('xdist') is not None}))\n"
)


@dataclass
class TestSettings:
    __test__ = False  # not a pytest test class

    python: str
    base_root: Path
    base_hash: str
    test_timeout: float = 300  # the whole pytest run, per side
    per_test_timeout: float = 60
    use_cache: bool = True
    env_error: str | None = None  # why no test environment could be prepared
    workers: int = 1  # pytest-xdist workers per run (1: no xdist)


@memoised
def environment(python: str) -> dict:
    """The interpreter's fingerprint (python, torch, platform); {'error': ...} if it cannot run."""
    try:
        proc = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"cannot run {python}: {exc}"}
    if proc.returncode != 0:
        return {"error": f"{python} failed: {proc.stderr.strip()[-300:]}"}
    return {"interpreter": python, **json.loads(proc.stdout)}


@dataclass
class NoReport:
    """Why a pytest run produced no outcomes."""

    message: Message
    timed_out: bool = False


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


# Upstream tests run offline unless the caller's environment says otherwise: without this a test
# that wants the model hub retries with backoff for minutes instead of failing at once (and being
# classified model-hub-unreachable).
OFFLINE_DEFAULTS = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


_COUNT = re.compile(r"\[\s*(\d+)\s*/\s*(\d+)\s*\]\s*$")  # pytest's console_output_style=count


def run_pytest(
    settings: TestSettings, tree: Path, tests: list[str], env_info: dict, on_count: Callable[[int, int], None]
) -> dict[str, Outcome] | NoReport:
    """Outcomes by test id, or the reason the run produced none. ``on_count(done, selected)`` is
    told the run's own progress as pytest prints it ("[ 12/296]" at the end of a line)."""
    junit = tree / ".patchkit-junit.xml"
    # one module that cannot be collected here (e.g. "Unsupported platform") must not stop the rest
    args = [settings.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
            "--continue-on-collection-errors", "-o", "console_output_style=count"]  # fmt: skip
    if env_info.get("pytest_timeout"):
        args.append(f"--timeout={settings.per_test_timeout:g}")
    args += xdist_args(settings.workers, env_info, tests)
    env = {**OFFLINE_DEFAULTS, **os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    if owns_bytecode(settings.python):
        del env["PYTHONDONTWRITEBYTECODE"]
    proc = subprocess.Popen([*args, *tests], cwd=tree, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace")  # fmt: skip
    timed_out = threading.Event()

    def stop() -> None:
        timed_out.set()
        proc.kill()

    timer = threading.Timer(settings.test_timeout, stop)
    timer.start()
    lines: list[str] = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if count := _COUNT.search(line):
                on_count(int(count.group(1)), int(count.group(2)))
        proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if timed_out.is_set():
        seconds = f"{settings.test_timeout:g}"
        return NoReport(Message("tests.run.timeout", {"seconds": seconds}), timed_out=True)
    if not junit.is_file():
        tail = "".join(lines).strip().splitlines()[-3:]
        return NoReport(Message("tests.run.no-report", {"code": proc.returncode, "tail": tail}))
    return parse_junit(junit.read_text("utf-8", errors="replace"))


def owns_bytecode(python: str) -> bool:
    """The test venv patchkit built is compiled by its first pytest run, only the modules the tests
    import (a few thousand of torch's and vLLM's deps' ~17,000 files); an interpreter someone else
    owns is never written to. The materialised trees are fresh directories, so the base stays clean."""
    return Path(python).is_relative_to(cache.cache_root() / "testenv")


def xdist_args(workers: int, env_info: dict, tests: list[str]) -> list[str]:
    """Spread a run over ``workers`` processes, a test file per worker at a time (``loadfile`` keeps a
    module's fixtures in one process); not for a single file, where it would only add start-ups."""
    if workers <= 1 or not env_info.get("xdist") or (len(tests) == 1 and tests[0].endswith(".py")):
        return []
    return ["-n", str(workers), "--dist", "loadfile"]


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

    def result(status: str, key: str, params: dict | None = None, **details) -> GateResult:
        message = Message(key, params or {})
        return gate_result("tests", status, message, details, time.perf_counter() - started)

    cannot = "could-not-run"
    if post is None:
        return result("skipped", "gate.tests.not-applied")
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
    for key, side in (("gate.tests.base-run", base_side), ("gate.tests.patched-run", patch_side)):
        if isinstance(side, NoReport):
            return result(cannot, key, {"error": side.message.to_dict()}, selection=selection)
    cmp = compare(base_side, patch_side)
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
        "messages": {
            t: patch_side[t].text[:1500] for t in cmp.rows.get("regressed", [])[:20] if t in patch_side
        },
    }
    summary = summary_message(cmp)
    if cmp.count("regressed") or cmp.count("new-failed"):
        return result("failed", summary.key, summary.params, **details)
    if cmp.ran_on_both == 0:  # "ran" = at least one selected test ran on the base and with the patch
        return result(cannot, "gate.tests.nothing-ran", {"summary": summary.to_dict()}, **details)
    return result("passed", summary.key, summary.params, **details)


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
    return {"tests": environment(settings["tests"].python)} if settings.get("tests") is not None else {}


GATE = Gate("tests", _run, cache_config=_cache_config, environment=_environment)
