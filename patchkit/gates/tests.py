"""tests gate: the domain's upstream tests on the base and on base+patch, compared by test id."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from patchkit import store
from patchkit.gates import Overlay, PatchUnderAudit
from patchkit.model import GateResult
from patchkit.testmap import OUTCOME_FORMAT, Outcome, compare, parse_junit, select_tests, summarise

_PROBE = (
    "import json, platform, sys\n"
    "from importlib import metadata, util\n"
    "def v(n):\n"
    "    try: return metadata.version(n)\n"
    "    except metadata.PackageNotFoundError: return None\n"
    "print(json.dumps({'python': platform.python_version(), 'implementation': sys.implementation.name,"
    " 'platform': platform.platform(), 'machine': platform.machine(), 'torch': v('torch'),"
    " 'pytest': v('pytest'), 'pytest_timeout': util.find_spec('pytest_timeout') is not None}))\n"
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


@cache
def environment(python: str) -> dict:
    """The interpreter's fingerprint (python, torch, platform); {'error': ...} if it cannot run."""
    try:
        proc = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"cannot run {python}: {exc}"}
    if proc.returncode != 0:
        return {"error": f"{python} failed: {proc.stderr.strip()[-300:]}"}
    return {"interpreter": python, **json.loads(proc.stdout)}


def materialise(base_root: Path, overlay: Overlay, dest: Path) -> None:
    """A cheap copy of the base (hard links, no .git) with the overlay's files written as new files,
    so the cached base is never edited."""
    dest.mkdir(parents=True)
    for entry in base_root.iterdir():
        if entry.name == ".git":
            continue
        proc = subprocess.run(["cp", "-al", str(entry), str(dest / entry.name)], capture_output=True)
        if proc.returncode != 0:  # another file system: a real copy
            copy = shutil.copytree if entry.is_dir() else shutil.copy2
            copy(entry, dest / entry.name)
    for path, data in overlay.items():
        target = dest / path
        if target.exists() or target.is_symlink():
            target.unlink()
        if data is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)


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


def run_pytest(
    settings: TestSettings, tree: Path, tests: list[str], env_info: dict
) -> dict[str, Outcome] | str:
    """Outcomes by test id, or the reason the run produced none."""
    junit = tree / ".patchkit-junit.xml"
    # one module that cannot be collected here (e.g. "Unsupported platform") must not stop the rest
    args = [settings.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
            "--continue-on-collection-errors"]  # fmt: skip
    if env_info.get("pytest_timeout"):
        args.append(f"--timeout={settings.per_test_timeout:g}")
    env = {**OFFLINE_DEFAULTS, **os.environ, "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        proc = subprocess.run([*args, *tests], cwd=tree, env=env, capture_output=True, text=True,
                              timeout=settings.test_timeout)  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"timeout: pytest did not finish in {settings.test_timeout:g} s"
    if not junit.is_file():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return f"pytest exited {proc.returncode} without a report: {' / '.join(tail)}"
    return parse_junit(junit.read_text("utf-8", errors="replace"))


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def overlay_digest(overlay: Overlay) -> str:
    return _digest(
        sorted((p, hashlib.sha256(d).hexdigest() if d is not None else None) for p, d in overlay.items())
    )


def _side(settings: TestSettings, overlay: Overlay, tests: list[str], env_info: dict, work: Path, label: str):
    tree = work / label
    materialise(settings.base_root, overlay, tree)
    present = [t for t in tests if (tree / t).exists()]
    if not present:
        return {}
    return run_pytest(settings, tree, present, env_info)


def baseline(settings: TestSettings, pre: Overlay, tests: list[str], env_info: dict, work: Path):
    """The base side, cached under base hash + earlier patches + selection + environment."""
    fingerprint = {k: env_info.get(k) for k in ("python", "torch", "platform", "machine", "pytest_timeout")}
    key = _digest("baseline", OUTCOME_FORMAT, settings.base_hash, overlay_digest(pre), tests,
                  fingerprint, settings.per_test_timeout)  # fmt: skip
    if settings.use_cache and (hit := store.get_json("audit-baseline", key)) is not None:
        return {t: Outcome(**o) for t, o in hit["outcomes"].items()}, True
    outcomes = _side(settings, pre, tests, env_info, work, "base")
    if isinstance(outcomes, dict) and settings.use_cache:
        store.put_json("audit-baseline", key, {"outcomes": {t: vars(o) for t, o in outcomes.items()}})
    return outcomes, False


def tests_gate(patch: PatchUnderAudit, pre: Overlay, post: Overlay | None, settings: TestSettings,
               exists) -> GateResult:  # fmt: skip
    started = time.perf_counter()

    def result(status: str, summary: str, **details) -> GateResult:
        return GateResult("tests", status, summary, details, time.perf_counter() - started)

    if post is None:
        return result("skipped", "the patch does not apply, so its tests cannot run")
    selection = select_tests(patch.test_templates, patch.changed_files, exists)
    if not selection:
        return result("could-not-run", f"no upstream test selected for {patch.domain} and its files")
    if settings.env_error:
        return result("could-not-run", f"no test environment: {settings.env_error}", selection=selection)
    env_info = environment(settings.python)
    if "error" in env_info:
        return result("could-not-run", env_info["error"], selection=selection)
    if not env_info.get("pytest"):
        return result("could-not-run", f"pytest is not installed in {settings.python}", selection=selection)
    work = Path(tempfile.mkdtemp(prefix="patchkit-tests-", dir=_work_root()))
    try:
        base_side, base_cached = baseline(settings, pre, selection, env_info, work)
        patch_side = _side(settings, post, selection, env_info, work, "patch")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if isinstance(patch_side, str) and isinstance(base_side, dict) and not patch_side.startswith("timeout"):
        passed = sum(o.status == "passed" for o in base_side.values())
        if passed:  # the base ran; with the patch pytest cannot even report: the patch broke it
            return result("failed", f"the patched tree gives no test report ({passed} passed on the "
                          f"base): {patch_side}", selection=selection, base=passed)  # fmt: skip
    for label, side in (("base", base_side), ("patched", patch_side)):
        if isinstance(side, str):
            return result("could-not-run", f"{label} run: {side}", selection=selection)
    cmp = compare(base_side, patch_side)
    details = {
        "selection": selection,
        "environment": env_info,
        "baseline_cached": base_cached,
        "counts": {c: len(ids) for c, ids in cmp.rows.items()},
        "causes": dict(cmp.causes),
        "base": dict(cmp.base_counts),
        "patched": dict(cmp.patch_counts),
        "tests": {c: ids[:200] for c, ids in cmp.rows.items() if c not in ("passed", "skipped")},
        "messages": {
            t: patch_side[t].text[:1500] for t in cmp.rows.get("regressed", [])[:20] if t in patch_side
        },
    }
    summary = summarise(cmp)
    if cmp.count("regressed") or cmp.count("new-failed"):
        return result("failed", summary, **details)
    if cmp.ran == 0:
        return result("could-not-run", f"nothing ran: {summary}", **details)
    return result("passed", summary, **details)


def _work_root() -> Path:
    root = store.cache_root() / "worktrees"
    root.mkdir(parents=True, exist_ok=True)
    return root
