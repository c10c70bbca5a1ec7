"""The coverage map of a base: which tests executed which scope (``analysis/scopes``) of which file,
recorded by coverage.py on the base side, cached per selected test path under the base and the
environment (``cache``: checksummed; a corrupt entry, or one whose base or environment differs, is
a miss).

How it is recorded: one pytest run of the bare base in the test venv, with coverage started in
every Python process the run starts (a ``sitecustomize`` on PYTHONPATH calls
``coverage.process_startup()`` under ``COVERAGE_PROCESS_START``: the pytest process, pytest-xdist
workers, the subprocesses a test spawns), and a pytest plugin that switches coverage's dynamic
context to the test's JUnit id for its setup, call and teardown (fixtures included) and to
``collect:<file>`` while a test module is imported, and to ``fixture:<scope>:<node>`` while a
fixture shared by several tests (class, module, package or session scope) is set up — it runs in
the first test's setup only, yet every test of its scope depends on what it did; a subprocess
inherits the context of the test that started it. The data files are combined and read by the test
venv's own coverage.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path

from patchkit import cache, timing
from patchkit.analysis.scopes import line_scopes
from patchkit.proc import TimeoutExpired, run_process
from patchkit.testrun.basedemand import file_of_test
from patchkit.testrun.basesides import base_key, run_side, under
from patchkit.testrun.pytestrun import Extra, NoReport, TestSettings
from patchkit.testrun.testselect import JUNIT_ID_SOURCE

KIND = "audit-covermap"
MAP_FORMAT = 2  # 2: a shared fixture's lines belong to every test of its scope
COLLECT = "collect:"  # the context of a test module's import
FIXTURE = "fixture:"  # the context of a shared (class, module, package, session) fixture's setup

CONTEXT_PLUGIN = (
    """\
import os
import re

import coverage
import pytest


"""
    + JUNIT_ID_SOURCE
    + """

_CURRENT = [""]


def _switch(label):
    _CURRENT[0] = label
    os.environ["PATCHKIT_COVERAGE_CONTEXT"] = label  # a subprocess the test starts inherits it
    cov = coverage.Coverage.current()
    if cov is not None:
        cov.switch_context(label)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _switch(_junit_id(item.nodeid))
    yield
    _switch("")


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(fixturedef, request):
    # a fixture shared by several tests runs in the setup of the first of them only: its lines
    # belong to every test of its scope (module, class: the file; package: the directory; session)
    scope = getattr(fixturedef, "scope", "function")
    shared = scope in ("class", "module", "package", "session")
    before = _CURRENT[0]
    if shared:
        owner = "" if scope == "session" else getattr(request.node, "nodeid", "")
        _switch(f"fixture:{scope}:{owner}")
    yield
    if shared:
        _switch(before)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    module = isinstance(collector, pytest.Module)
    if module:
        _switch("collect:" + collector.nodeid)
    yield
    if module:
        _switch("")


def pytest_unconfigure(config):
    cov = coverage.Coverage.current()  # xdist workers may end without running atexit
    if cov is not None:
        cov.stop()
        cov.save()
"""
)

SITECUSTOMIZE = """\
import os

if os.environ.get("COVERAGE_PROCESS_START"):
    try:
        import coverage

        # a newer coverage starts itself from its own .pth before this file runs (process_startup
        # then returns None): the context goes to whichever Coverage is running
        _cov = coverage.process_startup() or coverage.Coverage.current()
        if _cov is not None and os.environ.get("PATCHKIT_COVERAGE_CONTEXT"):
            _cov.switch_context(os.environ["PATCHKIT_COVERAGE_CONTEXT"])
    except Exception:  # a process coverage cannot start in runs unmeasured rather than not at all
        pass
"""

DUMP = """\
import json, os, sys
import coverage

rc, tree, out = sys.argv[1:4]
cov = coverage.Coverage(config_file=rc)
cov.combine()
data = cov.get_data()
contexts = sorted(data.measured_contexts())
index = {c: i for i, c in enumerate(contexts)}
files = {}
for path in data.measured_files():
    rel = os.path.relpath(path, tree)
    if rel.startswith(".."):
        continue
    by = {}
    for line, labels in data.contexts_by_lineno(path).items():
        for label in labels:
            by.setdefault(index[label], []).append(line)
    files[rel] = by
with open(out, "w", encoding="utf-8") as f:
    json.dump({"coverage": coverage.__version__, "contexts": contexts, "files": files}, f)
"""


def map_key(settings: TestSettings, env_info: dict, path: str) -> str:
    """The map of one selected path: the bare base, the environment, the path."""
    common = base_key(settings, {}, env_info)
    return hashlib.sha256(
        json.dumps(["covermap", MAP_FORMAT, *common, path], default=str).encode()
    ).hexdigest()


def load(settings: TestSettings, env_info: dict, paths: list[str]) -> dict[str, dict]:
    """The cached maps of ``paths`` (those the cache holds, checked against base and environment)."""
    found = {}
    for path in paths if settings.use_cache else []:
        value = cache.get_json(KIND, map_key(settings, env_info, path))
        if valid(value, settings, env_info):
            found[path] = value
    return found


def valid(value: object, settings: TestSettings, env_info: dict) -> bool:
    """A map for this base and this environment, in this format."""
    return (isinstance(value, dict) and value.get("format") == MAP_FORMAT
            and value.get("base") == settings.base_hash and value.get("environment") == fingerprint(env_info)
            and isinstance(value.get("tests"), list) and isinstance(value.get("files"), dict))  # fmt: skip


def fingerprint(env_info: dict) -> dict:
    """What of the environment a stored map must match (the interpreter, torch, the platform)."""
    keys = ("python", "torch", "platform", "machine", "pytest", "vllm_target_device")
    return {k: env_info.get(k) for k in keys}


def _extra(plugin: Path, data: Path, rc: Path) -> Callable[[Path], Extra]:
    def extra(tree: Path) -> Extra:
        data.mkdir(parents=True, exist_ok=True)
        rc.write_text(
            f"[run]\nparallel = True\ndata_file = {data / '.coverage'}\nsource =\n    {tree}\n", "utf-8"
        )
        return Extra(path=[plugin], env={"COVERAGE_PROCESS_START": str(rc)}, args=["-p", "patchkit_contexts"])

    return extra


def measured(settings: TestSettings, env_info: dict, overlay: dict, paths: list[str], work: Path, label: str,
             who: str, progress: Callable[..., None], only: tuple | None = None,
             invert: bool = False, need_map: bool = True):  # fmt: skip
    """One pytest run of ``paths`` on base + ``overlay`` under coverage, a context per test; (its
    outcomes, one map per path with the scopes of that tree's files, files measured), or why there
    are none (``need_map=False``: coverage's data unreadable gives the outcomes and no map)."""
    plugin = work / f"{label}-plugin"
    plugin.mkdir(parents=True, exist_ok=True)
    (plugin / "patchkit_contexts.py").write_text(CONTEXT_PLUGIN, "utf-8")
    (plugin / "sitecustomize.py").write_text(SITECUSTOMIZE, "utf-8")
    rc, data = plugin / "coveragerc", plugin / "data"
    outcomes = run_side(settings, overlay, paths, env_info, work, label, who, progress, only, invert,
                        extra=_extra(plugin, data, rc))  # fmt: skip
    if isinstance(outcomes, NoReport):
        return outcomes
    tree, raw_file = work / label, plugin / "map.json"
    if not outcomes:  # nothing of the paths in this tree, or every test deselected
        return outcomes, {p: {"tests": [], "files": {}} for p in paths}, 0
    try:
        proc = run_process(
            [settings.python, "-c", DUMP, str(rc), str(tree), str(raw_file)],
            text=True,
            timeout=settings.test_timeout,
        )
        failed = proc.returncode != 0
        raw = json.loads(raw_file.read_text("utf-8")) if not failed else {}
    except (OSError, ValueError, TimeoutExpired) as exc:
        return NoReport(_no_map(str(exc))) if need_map else (outcomes, {}, 0)
    if failed:
        return NoReport(_no_map(proc.stderr.strip()[-300:])) if need_map else (outcomes, {}, 0)
    maps = split(raw, list(outcomes), paths, lambda rel: _read(tree / rel))
    return outcomes, maps, len(raw.get("files", {}))


def build(settings: TestSettings, env_info: dict, paths: list[str], work: Path,
          progress: Callable[..., None], who: str) -> dict[str, dict] | NoReport:  # fmt: skip
    """Run ``paths`` on the bare base under coverage and cache one map per path; the maps, or why
    the run gave none."""
    started = time.perf_counter()
    run = measured(settings, env_info, {}, paths, work, "covermap", who, progress)
    if isinstance(run, NoReport):
        return run
    outcomes, maps, measured_files = run
    for path, value in maps.items():
        value.update(format=MAP_FORMAT, base=settings.base_hash, environment=fingerprint(env_info))
        if settings.use_cache:
            cache.put_json(KIND, map_key(settings, env_info, path), value)
    detail = f"{who}: {len(outcomes)} test(s) under coverage, {measured_files} file(s) measured"
    timing.record("tests.covermap", time.perf_counter() - started, detail, started)
    return maps


def _no_map(error: str):
    from patchkit.values import Message

    return Message("tests.run.no-map", {"error": error})


def _read(path: Path) -> str | None:
    try:
        return path.read_text("utf-8", errors="replace")
    except OSError:
        return None


def owners(label: str, by_file: dict[str, list[str]], test_ids: list[str]) -> list[str]:
    """The tests a coverage context's lines belong to: a test's own; a module's import
    (``collect:<file>``): every test of it; a shared fixture's setup (``fixture:<scope>:<node>``):
    every test of its file (module, class), of its directory (package), or of the run (session)."""
    if label.startswith(COLLECT):
        return by_file.get(label[len(COLLECT) :], [])
    if label.startswith(FIXTURE):
        scope, _, node = label[len(FIXTURE) :].partition(":")
        if scope == "session":
            return list(test_ids)
        where = node.split("::")[0]
        if scope == "package":
            folder = where[: -len("/__init__.py")] if where.endswith("/__init__.py") else where
            folder = folder.rstrip("/") + "/"
            return [t for f, ts in by_file.items() if f.startswith(folder) for t in ts]
        return by_file.get(where, [])
    return [label] if label else []


def split(
    raw: dict, test_ids: list[str], paths: list[str], source: Callable[[str], str | None]
) -> dict[str, dict]:
    """coverage's lines per context into one map per selected path: its tests, and for each file
    executed, each scope -> the indices (into tests) of the tests that executed a line of it; a
    module's import counts for every test of that module."""
    contexts = raw.get("contexts", [])
    by_file: dict[str, list[str]] = {}
    for test_id in test_ids:
        by_file.setdefault(file_of_test(test_id), []).append(test_id)
    out = {p: {"tests": sorted(t for t in test_ids if under(t, p)), "files": {}} for p in paths}
    where = {p: {t: i for i, t in enumerate(out[p]["tests"])} for p in paths}
    for rel, per_context in raw.get("files", {}).items():
        text = source(rel) if rel.endswith(".py") else None
        scopes = line_scopes(text, executed=True) if text is not None else None
        for index, lines in per_context.items():
            label = contexts[int(index)]
            tests = owners(label, by_file, test_ids)
            if not tests:
                continue
            names = {scopes[n - 1] if scopes and 0 < n <= len(scopes) else "<module>" for n in lines}
            for path in paths:
                mine = [where[path][t] for t in tests if t in where[path]]
                for name in names if mine else ():
                    entry = out[path]["files"].setdefault(rel, {}).setdefault(name, [])
                    entry.extend(mine)
    for value in out.values():
        for scopes_of in value["files"].values():
            for name, ids in scopes_of.items():
                scopes_of[name] = sorted(set(ids))
    return out
