"""The tests gate's two sides: a cheap copy of the base with an overlay, one pytest run of a side,
and the base side as the gate needs it — in full per selected path, or on demand (the tests that did
not pass with the patch, the files it changes or deletes), each cached per base + earlier patches +
environment and shared between the patches' gates (``inflight``)."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from patchkit import cache, timing
from patchkit.proc import TimeoutExpired, run_process
from patchkit.testrun.basedemand import Demand, file_of_test
from patchkit.testrun.inflight import claim, release
from patchkit.testrun.overlaytree import Overlay, installed_vllm, lay_over, write_over
from patchkit.testrun.pytestrun import Extra, NoReport, TestSettings, run_pytest
from patchkit.testrun.testplan import split_files
from patchkit.testrun.testselect import OUTCOME_FORMAT, Outcome, outcomes_by_path

LINK_TIMEOUT = 600  # seconds for `cp -al` of one top-level entry of the base


def materialise(base_root: Path, overlay: Overlay, dest: Path) -> None:
    """A cheap copy of the base (hard links, no .git) with the overlay's files written as new files,
    so the cached base is never edited."""
    dest.mkdir(parents=True)
    for entry in base_root.iterdir():
        if entry.name == ".git":
            continue
        try:
            copied = run_process(["cp", "-al", str(entry), str(dest / entry.name)], timeout=LINK_TIMEOUT)
            linked = copied.returncode == 0
        except (OSError, TimeoutExpired):  # a hung or missing cp: copy in-process instead
            shutil.rmtree(dest / entry.name, ignore_errors=True)
            linked = False
        if not linked:  # another file system, or cp could not: a real copy
            copy = shutil.copytree if entry.is_dir() else shutil.copy2
            copy(entry, dest / entry.name)
    write_over(dest, overlay)


def key_digest(*parts: object) -> str:
    """A cache key: the sha256 of ``parts`` as sorted JSON (the base side's and ``carry``'s)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def base_reader(root: Path) -> Callable[[str], bytes | None]:
    """A file of the base tree at ``root`` by relative path; None where it does not exist."""

    def read(path: str) -> bytes | None:
        try:
            return (root / path).read_bytes()
        except OSError:
            return None

    return read


def overlay_digest(overlay: Overlay) -> str:
    return key_digest(
        sorted((p, hashlib.sha256(d).hexdigest() if d is not None else None) for p, d in overlay.items())
    )


def run_side(settings: TestSettings, overlay: Overlay, tests: list[str], env_info: dict, work: Path,
             label: str, who: str, progress: Callable[..., None],
             only: tuple | None = None, invert: bool = False,
             extra: Callable[[Path], Extra] | None = None):  # fmt: skip
    """One pytest run of ``tests`` in base + ``overlay`` (``extra``: more for the run, given its tree)."""
    tree = work / label
    with timing.stage("tests.materialise", f"{who} {label}"):
        materialise(settings.base_root, overlay, tree)
        installed = installed_vllm(settings.python)
        if installed is not None:  # a compiled build: test the patch against it, not the source tree
            lay_over(installed, overlay, tree)
    present = [t for t in tests if (tree / t).exists()]
    if not present:
        return {}
    side = "patched" if label.startswith("patch") else "base"

    def on_count(done: int, selected: int) -> None:
        progress("tests", gate="tests", side=side, done=done, selected=selected)

    with timing.stage(f"tests.pytest.{label}", f"{who}: {len(present)} path(s)"):
        more = extra(tree) if extra is not None else None
        return run_pytest(settings, tree, present, env_info, on_count, only, invert, more)


def base_key(settings: TestSettings, pre: Overlay, env_info: dict) -> tuple:
    """What a base-side outcome depends on: the base, the patches before, the environment."""
    keys = ("python", "torch", "platform", "machine", "pytest_timeout", "vllm_target_device")
    fingerprint = {k: env_info.get(k) for k in keys}
    if installed := installed_vllm(settings.python):
        fingerprint["installed_vllm"] = [str(installed.root), *installed.compiled]
    # a shard's run of a file split by test id holds only its tests: not the file's outcome for others
    shard = [settings.shard, settings.plan_digest] if settings.shard and split_files(settings.plan) else []
    timeout = settings.per_test_timeout
    return OUTCOME_FORMAT, settings.base_hash, overlay_digest(pre), fingerprint, timeout, *shard


def baseline(settings: TestSettings, pre: Overlay, tests: list[str], env_info: dict, work: Path,
             progress: Callable[..., None], who: str = ""):  # fmt: skip
    """The base side, cached per selected path under base hash + earlier patches + environment:
    patches whose selections overlap (and runs after them) run a shared path on the base once.
    Returns (outcomes or NoReport, how many of the paths came from the cache)."""
    common = base_key(settings, pre, env_info)
    whole = key_digest("baseline", *common, tests)
    if settings.use_cache and (hit := cache.get_json("audit-baseline", whole)) is not None:
        return {t: Outcome(**o) for t, o in hit["outcomes"].items()}, len(tests)
    keys = {t: key_digest("baseline-path", *common, t) for t in tests}
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
        fresh = run_side(settings, pre, paths, env_info, where, "base", who, progress)
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


def record_as_base(settings: TestSettings, tree: Overlay, paths: list[str], env_info: dict, outcomes,
                   who: str) -> int:  # fmt: skip
    """A patched run is a run of base + ``tree``: the base side of every patch whose earlier
    patches make that same tree (0004 needs 0001, so 0001's patched tree is 0004's base). Its
    outcomes per selected path go under the key the base side reads (``base_key`` of ``tree``), with
    where they came from; a path already held is left as it is. Returns how many paths it wrote.
    Only a run of whole paths counts (``outcomes_by_path``), never a part of a selection."""
    if not settings.use_cache or not isinstance(outcomes, dict):
        return 0
    by_path = outcomes_by_path(outcomes, paths)
    if by_path is None:
        return 0
    common = base_key(settings, tree, env_info)
    wrote = 0
    for path, mine in by_path.items():
        key = key_digest("baseline-path", *common, path)
        if cache.get_json("audit-baseline", key) is None:
            record = {"outcomes": {t: vars(o) for t, o in mine.items()}, "from": f"patched run of {who}"}
            cache.put_json("audit-baseline", key, record)
            wrote += 1
    return wrote


def under(test_id: str, path: str) -> bool:
    """Whether a JUnit test id lies in a selected path (a test file or a directory)."""
    module = (path[:-3] if path.endswith(".py") else path.rstrip("/")).replace("/", ".")
    return test_id == module or test_id.startswith((module + ".", module + "::"))


def base_needed(settings: TestSettings, pre: Overlay, selection: list[str], demand: Demand, env_info: dict,
                work: Path, progress: Callable[..., None], who: str = "",
                patched: dict | None = None, carried: Callable | None = None):  # fmt: skip
    """The base side on demand: the selected paths the cache holds in full (as the two-sided run
    left them), then ``demand``'s files and tests, from the cache per file / per test, from
    ``carried`` (test ids -> (outcomes, where from): ``--select affected``'s recorded runs), or run
    here in one pytest run. Returns (outcomes or NoReport, the paths cached in full, counts: run /
    cached / carried)."""
    common = base_key(settings, pre, env_info)
    outcomes: dict[str, Outcome] = {}
    stats: Counter = Counter()
    whole: list[str] = []
    for path in selection if settings.use_cache else []:
        if (hit := cache.get_json("audit-baseline", key_digest("baseline-path", *common, path))) is not None:
            outcomes.update({t: Outcome(**o) for t, o in hit["outcomes"].items()})
            whole.append(path)
            if isinstance(source := hit.get("from"), str):  # another patch's patched run of this tree
                shared = stats.setdefault("shared", {})
                shared[source] = shared.get(source, 0) + 1
    # the base's tests in the test files the patch changes that are gone with it (``basedemand.gone``)
    # run in the same base run as the rest, its plugin choosing them at collection: one pytest process
    # and one vLLM import, not a collection first
    changed = [f for f in demand.changed if not any(under(f[:-3].replace("/", "."), p) for p in whole)]
    gone_in = {f: sorted(t for t in patched or {} if file_of_test(t) == f) for f in changed}
    files = [f for f in demand.files if not any(under(f[:-3].replace("/", "."), p) for p in whole)]
    ids = [t for t in demand.ids if not any(under(t, p) for p in whole)]
    stats["cached"] += len(demand.ids) - len(ids) + len(demand.files) - len(files)
    keys = {**{("id", t): key_digest("baseline-test", *common, t) for t in ids},
            **{("file", f): key_digest("baseline-file", *common, f) for f in files}}  # fmt: skip

    def load(wanted: list[tuple[str, str]]) -> list[tuple[str, str]]:
        left = []
        for want in wanted:
            hit = cache.get_json("audit-baseline", keys[want]) if settings.use_cache else None
            if hit is None:
                left.append(want)
                continue
            outcomes.update({t: Outcome(**o) for t, o in hit["outcomes"].items()})
            stats["cached"] += 1
        return left

    def run(wanted: list[tuple[str, str]], where: Path, gone_in: dict[str, list[str]]) -> NoReport | None:
        only = (
            [w for kind, w in wanted if kind == "id"],
            [w for kind, w in wanted if kind == "file"],
            gone_in,
        )
        paths = sorted(set(only[1]) | {file_of_test(t) for t in only[0]} | set(gone_in))
        fresh = run_side(settings, pre, paths, env_info, where, "base", who, progress, only)
        if not isinstance(fresh, dict):
            return fresh
        outcomes.update(fresh)
        lost = sorted(t for t in fresh if file_of_test(t) in gone_in and t not in (patched or {}))
        demand.ids = sorted(set(demand.ids) | set(lost))  # run for the patch's sake, as a failure's are
        for test_id in lost if settings.use_cache else []:
            key = key_digest("baseline-test", *common, test_id)
            cache.put_json("audit-baseline", key, {"outcomes": {test_id: vars(fresh[test_id])}})
        ran = set(only[0]) | {t for t in fresh if any(under(t, f) for f in only[1])} | set(lost)
        stats["run"] += len(ran)
        stats["ran"] = sorted(set(stats.get("ran", [])) | ran)
        for kind, what in wanted if settings.use_cache else []:
            mine = {t: vars(o) for t, o in fresh.items() if (t == what if kind == "id" else under(t, what))}
            cache.put_json("audit-baseline", keys[(kind, what)], {"outcomes": mine})
        return None

    missing = load(list(keys))
    if carried is not None and (ids := {what for kind, what in missing if kind == "id"}):
        got, sources = carried(ids)  # outcomes a recorded run proves unaffected (testrun/carry)
        if got:
            outcomes.update(got)
            stats["carried"] += len(got)
            stats["carried_from"] = sources
            missing = [(kind, what) for kind, what in missing if not (kind == "id" and what in got)]
    if not missing and not gone_in:
        return outcomes, whole, stats
    if settings.use_cache:
        ours, theirs = claim([keys[w] for w in missing])
    else:
        ours, theirs = {keys[w] for w in missing}, []
    try:
        failed = run([w for w in missing if keys[w] in ours], work, gone_in) if ours or gone_in else None
    finally:
        if settings.use_cache:
            release(ours)
    if failed is not None:
        return failed, whole, stats
    for event in theirs:
        event.wait()
    if left := load([w for w in missing if keys[w] not in ours]):  # theirs failed: run them here
        if (failed := run(left, work / "after-wait", {})) is not None:
            return failed, whole, stats
    return outcomes, whole, stats
