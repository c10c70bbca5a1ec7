"""The test-level plan of one audit (``--shard I/N`` with the tests gate): its units — each patch's
selected test files, and the heavy ones (``testplan.heavy``) split by test id: the ids the
durations file lists for that file (``@tests``: pytest's JUnit report of the run it was written
from), else pytest's own ``--collect-only`` in the test venv on the base + patch tree (base + the
whole series, one process, when every patch applies; else each heavy file on the tree of the first
patch that selects it: a test a patch's own tree has and that tree lacks goes to its file's home
shard) — planned over the shards by the series dir's recorded durations; the tests gate's settings
for this shard, and what its record says."""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from patchkit import cache, timing
from patchkit.audit.gates import PatchUnderAudit, SeriesState
from patchkit.audit.gates.apply import applies, patch_needs
from patchkit.audit.gates.tests import selection_for, tree_predicates
from patchkit.base.tree import BaseTree
from patchkit.testrun.basedemand import file_of_test
from patchkit.testrun.basesides import base_key, materialise
from patchkit.testrun.pytestrun import TestSettings, collect_ids, environment
from patchkit.testrun.testplan import (
    DURATIONS_FILE,
    TESTS_KEY,
    digest,
    expand,
    heavy,
    owner,
    plan,
    split_files,
    split_weights,
)

COLLECT_FORMAT = 1  # bump when a cached collection's shape changes


def selected_files(
    base: BaseTree, patches: list[PatchUnderAudit], states: list[SeriesState]
) -> dict[str, list[str]]:
    """Each applied patch's selected test files (directories expanded), by patch name."""
    out: dict[str, list[str]] = {}
    for patch in patches:
        if states[patch.index].post is not None:
            exists, files_under = tree_predicates(base, states[patch.index].post)
            out[patch.name] = expand(selection_for(patch, exists)[0], files_under)
    return out


def longest_first(series_dir: Path, base: BaseTree, patches: list[PatchUnderAudit], states: list[SeriesState],
                  settings: TestSettings) -> list[PatchUnderAudit]:  # fmt: skip
    """The patches in the order the audit's jobs start them: by their tests' recorded seconds
    (test-durations.json; a file several patches select counts its share), longest first — LPT, so
    that no core idles at the end while one long selection still runs; series order without
    durations, or where they tie. In a test shard, only its own share of each file counts."""
    durations = read_durations(series_dir)
    if not durations:
        return list(patches)
    files = selected_files(base, patches, states)
    uses: dict[str, int] = {}
    for chosen in files.values():
        for f in chosen:
            uses[f] = uses.get(f, 0) + 1
    weight = {name: sum(durations.get(f, 0.0) / uses[f] * _share(f, settings, durations) for f in chosen)
              for name, chosen in files.items()}  # fmt: skip
    return sorted(patches, key=lambda p: (-weight.get(p.name, 0.0), p.index))


def providers_first(
    order: list[PatchUnderAudit], patches: list[PatchUnderAudit], base: BaseTree, jobs: int = 1
) -> list[PatchUnderAudit]:
    """``order`` with every patch after the patches its base side is made of (split.json's
    ``depends_on``; else what the apply gate computes: none when it applies alone). The patched run
    of a patch is the base side of the patches that need it (``basesides.record_as_base``: 0004's
    base is 0001's patched tree), so the one that provides it starts first, and the patches that
    need it do not start beside it (the first ``jobs`` start at once) where another can; the rest
    keeps its order."""
    by_name = {p.name: p for p in order}

    def providers(patch: PatchUnderAudit) -> list[str]:  # the apply gate's rule; applied only if needed
        alone = None if patch.declared_needs else applies(base, [patch])
        return patch_needs(base, patch, patches[: patch.index], alone)[0]

    needs = {p.name: [n for n in providers(p) if n in by_name] for p in order}
    out: list[PatchUnderAudit] = []
    seen: set[str] = set()

    def emit(patch: PatchUnderAudit) -> None:
        if patch.name in seen:
            return
        seen.add(patch.name)
        for name in needs[patch.name]:
            emit(by_name[name])
        out.append(patch)

    for patch in order:
        emit(patch)
    first: list[PatchUnderAudit] = []
    later: list[PatchUnderAudit] = []
    for patch in out:
        beside = any(p.name in needs[patch.name] for p in first)
        (first if len(first) < jobs and not beside else later).append(patch)
    return first + later


def _share(path: str, settings: TestSettings, durations: dict[str, float]) -> float:
    """The share of a test file's recorded time this runner runs (unsharded: all): of a file split
    by test id, its own tests' weights (``testplan.split_weights``) over the file's."""
    if settings.shard is None:
        return 1.0
    i, n = settings.shard
    if split := split_files(settings.plan).get(path):
        weights = split_weights(durations.get(path, 0.0), list(split), durations)
        total = sum(weights.values())
        if not total:
            return sum(s == i for s in split.values()) / len(split)
        return sum(w for t, w in weights.items() if split[t] == i) / total
    return 1.0 if owner(path, settings.plan, n) == i else 0.0


def prepare(series_dir: Path, base: BaseTree, patches: list[PatchUnderAudit], states: list[SeriesState],
            settings: TestSettings, shard: tuple[int, int]) -> tuple[TestSettings, dict]:  # fmt: skip
    """The tests gate's settings for this shard (its plan) and what the record says about it."""
    units: dict[str, int] = {}
    first: dict[str, int] = {}  # test file -> the first patch (series order) that selects it
    by_name = {p.name: p.index for p in patches}
    for name, files in selected_files(base, patches, states).items():
        for f in files:
            units[f] = units.get(f, 0) + 1
            first.setdefault(f, by_name[name])
    durations = read_durations(series_dir)
    count = shard[1]
    big = heavy(units, durations, count)
    listed = read_tests(series_dir)
    ids: dict[str, list[str]] = {f: listed[f] for f in big if listed.get(f)}  # recorded: no collection
    unlisted = [f for f in big if f not in ids]
    final = states[-1].post if states and all(s.post is not None for s in states) else None
    if final is not None and unlisted:  # one collection (one vLLM import) on base + the whole series
        ids.update(collected(settings, final, unlisted, "base + series"))
    for index in sorted({first[f] for f in unlisted}) if final is None else []:  # else per patch tree
        files = [f for f in unlisted if first[f] == index]
        ids.update(collected(settings, states[index].post or {}, files, patches[index].name))
    assignment = plan(units, durations, count, ids)
    key = digest(assignment, count)
    mine = sum(s == shard[0] for u, s in assignment.items() if u not in ids)
    info = {"shard": f"{shard[0]}/{count}", "plan": key, "files": len(units),
            "balanced_by": "recorded durations" if any(f in durations for f in units) else "counts",
            "recorded": sum(f in durations for f in units), "mine": mine,
            "split": {f: len(t) for f, t in sorted(ids.items())},
            "split_ids_from": {f: "recorded" if f in listed and f not in unlisted else "collected"
                               for f in sorted(ids)}}  # fmt: skip
    return replace(settings, shard=shard, plan=assignment, plan_digest=key), info


def collected(settings: TestSettings, post: dict, files: list[str], who: str) -> dict[str, list[str]]:
    """The tests pytest collects in ``files`` on base + ``post`` (JUnit ids, by file); a file whose
    collection fails is absent (it stays one unit). Cached per base, tree and test environment."""
    tree = base_key(replace(settings, shard=None), post, environment(settings.python))
    key = json.dumps([COLLECT_FORMAT, tree, files, settings.python], sort_keys=True, default=str)
    digest_key = hashlib.sha256(key.encode()).hexdigest()
    if settings.use_cache and isinstance(hit := cache.get_json("audit-collect", digest_key), dict):
        return {f: list(t) for f, t in hit.items()}
    root = cache.cache_root() / "worktrees"
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="patchkit-plan-", dir=root))
    try:
        with timing.stage("tests.plan.collect", f"{who}: {len(files)} file(s) split by test id"):
            materialise(settings.base_root, post, work / "tree")
            found = collect_ids(settings, work / "tree", [f for f in files if (work / "tree" / f).exists()])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if found is None:
        return {}
    out: dict[str, list[str]] = {f: [] for f in files}
    for test_id in found:
        if (f := file_of_test(test_id)) in out:
            out[f].append(test_id)
    out = {f: t for f, t in out.items() if t}
    if settings.use_cache:
        cache.put_json("audit-collect", digest_key, out)
    return out


def _durations_json(series_dir: Path) -> dict:
    path = series_dir / DURATIONS_FILE
    try:
        if not path.is_file() or path.stat().st_size > 16 << 20:
            return {}
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def read_tests(series_dir: Path) -> dict[str, list[str]]:
    """The durations file's ``@tests`` ({test file: JUnit ids}); missing or malformed: none."""
    listed = _durations_json(series_dir).get(TESTS_KEY)
    if not isinstance(listed, dict):
        return {}
    return {f: [t for t in ids if isinstance(t, str)] for f, ids in listed.items()
            if isinstance(f, str) and isinstance(ids, list)}  # fmt: skip


def read_durations(series_dir: Path) -> dict[str, float]:
    """The series dir's test-durations.json ({test file: seconds}); missing or malformed: none."""
    data = _durations_json(series_dir)
    return {
        k: float(v) for k, v in data.items() if isinstance(k, str) and isinstance(v, int | float) and v >= 0
    }
