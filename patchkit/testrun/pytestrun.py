"""Running pytest for the tests gate: the settings, the interpreter's fingerprint, one run of
a selection in a tree (JUnit XML, live counts, a whole-run timeout), and pytest-xdist's spread."""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache as memoised
from pathlib import Path

from patchkit import cache
from patchkit.proc import TimeoutExpired, run_process, stream_process
from patchkit.testrun.shardfilter import shard_plugin
from patchkit.testrun.testselect import JUNIT_ID_SOURCE, Outcome, excerpt, parse_junit
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
    shard: tuple[int, int] | None = None  # test-level shard I/N of the whole audit (testrun/testplan)
    plan: dict[str, int] = field(default_factory=dict)  # test file or JUnit id -> shard (testplan)
    plan_digest: str = ""
    select: str = "upstream"  # "affected": only the tests the base's coverage map ties to the change


def target_device(torch_version: str | None, environ: dict[str, str]) -> tuple[str | None, str]:
    """vLLM's platform for the tests (``VLLM_TARGET_DEVICE``) and why: the caller's own setting; else
    ``cpu`` when the interpreter's torch is a CPU build (local version ``+cpu``), as vLLM's CPU CI
    builds it — without it vLLM on a CUDA-less torch is its ``UnspecifiedPlatform``, whose cleanup
    after every test raises "Cannot access accelerator device"; else vLLM's own default."""
    if environ.get("VLLM_TARGET_DEVICE"):
        return environ["VLLM_TARGET_DEVICE"], "set in the environment"
    from packaging.version import InvalidVersion, Version

    try:
        local = Version(torch_version).local if torch_version else None
    except InvalidVersion:
        local = None
    if local and "cpu" in local.split("."):
        return "cpu", f"torch {torch_version} is a CPU build"
    return None, "vLLM's default (torch is not a CPU build)"


def platform_env(env_info: dict) -> dict[str, str]:
    """What the tests' environment gets for vLLM's platform (see ``target_device``)."""
    device = env_info.get("vllm_target_device")
    return {"VLLM_TARGET_DEVICE": device} if device else {}


@memoised
def environment(python: str) -> dict:
    """The interpreter's fingerprint (python, torch, platform, the vLLM platform its tests run on);
    {'error': ...} if it cannot run."""
    try:
        proc = run_process([python, "-c", _PROBE], text=True, timeout=120)
    except (OSError, TimeoutExpired) as exc:
        return {"error": f"cannot run {python}: {exc}"}
    if proc.returncode != 0:
        return {"error": f"{python} failed: {proc.stderr.strip()[-300:]}"}
    found = json.loads(proc.stdout)
    device, why = target_device(found.get("torch"), dict(os.environ))
    return {"interpreter": python, **found, "vllm_target_device": device, "vllm_target_device_from": why}


@dataclass
class Extra:
    """More for one pytest run (the coverage map's): directories first on PYTHONPATH, variables,
    arguments."""

    path: list[Path] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)


@dataclass
class NoReport:
    """Why a pytest run produced no outcomes."""

    message: Message
    timed_out: bool = False


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


# Keeps only the collected tests whose JUnit id is listed, or that lie in a listed file (base on
# demand); the others are deselected, so a listed test missing here is simply absent. "invert":
# keeps the others instead (``--select affected``: every test but the ones proven unaffected).
ONLY_PLUGIN = (
    """\
import json, os, re


"""
    + JUNIT_ID_SOURCE
    + """

def pytest_collection_modifyitems(session, config, items):
    with open(os.environ["PATCHKIT_ONLY"], encoding="utf-8") as f:
        want = json.load(f)
    ids, files = set(want["ids"]), set(want["files"])
    gone_in = {f: set(t) for f, t in want.get("gone_in", {}).items()}  # a changed file: those not listed
    keep, drop = [], []
    for item in items:
        path, test_id = item.nodeid.split("::")[0], _junit_id(item.nodeid)
        wanted = path in files or test_id in ids or (path in gone_in and test_id not in gone_in[path])
        wanted = wanted != bool(want.get("invert"))
        (keep if wanted else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
"""
)


def junit_id(nodeid: str) -> str:
    """pytest's node id as its JUnit XML names the test ('tests/a/test_x.py::T::f[1]' ->
    'tests.a.test_x.T::f[1]'), the same as ONLY_PLUGIN's."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]) + "::" + names[-1] if len(names) > 1 else names[0]


def collect_ids(settings: TestSettings, tree: Path, tests: list[str]) -> list[str] | None:
    """The JUnit ids pytest collects from ``tests`` in ``tree`` (nothing runs); None when the
    collection fails or times out (the caller then runs the files in full)."""
    args = [settings.python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *tests]
    platform = platform_env(environment(settings.python))
    env = {**OFFLINE_DEFAULTS, **platform, **os.environ, "PYTHONPATH": str(tree),
           "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
    try:
        proc = run_process(
            args, cwd=tree, env=env, text=True, errors="replace", timeout=settings.test_timeout
        )
    except (OSError, TimeoutExpired):
        return None
    if proc.returncode not in (0, 5):  # 5: nothing collected
        return None
    lines = [line.strip() for line in proc.stdout.splitlines()]
    return [junit_id(line) for line in lines if "::" in line and line.split("::", 1)[0].endswith(".py")]


def run_pytest(settings: TestSettings, tree: Path, tests: list[str], env_info: dict,
               on_count: Callable[[int, int], None],
               only: tuple | None = None, invert: bool = False,
               extra: Extra | None = None) -> dict[str, Outcome] | NoReport:  # fmt: skip
    """Outcomes by test id, or the reason the run produced none. ``on_count(done, selected)`` is
    told the run's own progress as pytest prints it ("[ 12/296]" at the end of a line). ``only``:
    (JUnit ids, files[, {changed file: the patched run's ids in it}]) — run just those tests of
    ``tests``, and a changed file's tests not listed for it (the rest are deselected); ``invert``:
    all but those."""
    junit = tree / ".patchkit-junit.xml"
    # one module that cannot be collected here (e.g. "Unsupported platform") must not stop the rest
    args = [settings.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
            "--continue-on-collection-errors", "-o", "console_output_style=count"]  # fmt: skip
    if env_info.get("pytest_timeout"):
        args.append(f"--timeout={settings.per_test_timeout:g}")
    args += xdist_args(settings.workers, env_info, tests)
    env = {**OFFLINE_DEFAULTS, **platform_env(env_info), **os.environ, "PYTHONPATH": str(tree),
           "PYTHONDONTWRITEBYTECODE": "1"}  # fmt: skip
    if only is not None:
        plugin = tree.parent / f".patchkit-only-{tree.name}"
        plugin.mkdir(exist_ok=True)
        (plugin / "patchkit_only.py").write_text(ONLY_PLUGIN, "utf-8")
        want = {"ids": only[0], "files": only[1], "invert": invert,
                "gone_in": only[2] if len(only) > 2 else {}}  # fmt: skip
        (plugin / "only.json").write_text(json.dumps(want), "utf-8")
        env.update(PYTHONPATH=f"{tree}{os.pathsep}{plugin}", PATCHKIT_ONLY=str(plugin / "only.json"))
        args += ["-p", "patchkit_only"]
    if extra is not None:
        env.update(extra.env)
        env["PYTHONPATH"] = os.pathsep.join([*map(str, extra.path), env["PYTHONPATH"]])
        args += extra.args
    where = tree.parent / f".patchkit-shard-{tree.name}"  # a test shard: its tests of a split file
    shard_args, shard_env = shard_plugin(settings.shard, settings.plan, tests, where)
    if shard_args:
        env.update(PYTHONPATH=f"{env['PYTHONPATH']}{os.pathsep}{where}", **shard_env)
        args += shard_args
    if owns_bytecode(settings.python):
        del env["PYTHONDONTWRITEBYTECODE"]
    first = _attempt([*args, *tests], tree, env, junit, settings.test_timeout, on_count)
    if not _crashed(first):
        return first
    # pytest itself crashed (INTERNALERROR: a plugin's or conftest's hook raised). JUnit then holds
    # one "pytest::internal" case and no outcome for the tests after the crash: that is no verdict on
    # the patch, and the tests it cut off are not "absent". One more run; if it crashes again, the
    # run has no report, saying how far it got.
    again = _attempt([*args, *tests], tree, env, junit, settings.test_timeout, on_count)
    if not _crashed(again):
        return again
    reported = len(again) - 1
    text = excerpt(again[INTERNAL_ERROR].text.strip(), 600)
    return NoReport(Message("tests.run.internal-error", {"runs": 2, "reported": reported, "text": text}))


# The test id JUnit gives pytest's own crash (``<testcase classname="pytest" name="internal">``).
INTERNAL_ERROR = "pytest::internal"


def _crashed(outcomes: dict[str, Outcome] | NoReport) -> bool:
    return isinstance(outcomes, dict) and INTERNAL_ERROR in outcomes


def _attempt(command: list[str], tree: Path, env: dict[str, str], junit: Path, timeout: float,
             on_count: Callable[[int, int], None]) -> dict[str, Outcome] | NoReport:  # fmt: skip
    """One pytest process with a whole-run timeout; its JUnit outcomes, or why there are none."""
    junit.unlink(missing_ok=True)  # a report left by an earlier attempt is not this run's
    proc = stream_process(command, cwd=tree, env=env)
    timed_out = threading.Event()

    def stop() -> None:
        timed_out.set()
        proc.kill()

    timer = threading.Timer(timeout, stop)
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
        return NoReport(Message("tests.run.timeout", {"seconds": f"{timeout:g}"}), timed_out=True)
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
