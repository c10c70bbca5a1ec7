"""Case 6: the floor of the tests gate on this host, measured with the main job's own parts.

The main job's tests gate runs every patch's focused upstream tests on the base and with the patch.
vLLM's ``tests/conftest.py`` has an autouse fixture, ``cleanup_fixture``, that calls
``cleanup_dist_env_and_memory()`` after every test not marked ``skip_global_cleanup`` (a subdirectory
may override ``should_do_global_cleanup_after_test``). With torch, vLLM and the conftest loaded, the
full ``gc.collect()`` in it is most of a CPU unit test's time. This case measures, in the main job's
test venv and on its base tree:

1. one ``cleanup_dist_env_and_memory()`` call after loading vLLM's tests/conftest.py as pytest does
   (each run a new process, the median of its calls), against a named baseline in the same run: one
   ``gc.collect()`` in a process that imported only torch;
2. how many of each patch's selected tests pay it: ``pytest --collect-only`` of the selection on the
   base tree with a small plugin that reads each item's fixtures and markers (pytest is the witness);
3. pytest's own ``--durations`` teardown times for one selected file, as a second witness of (1);
4. the floor: the paying test runs x the median call / the host's cores. Each patch's patched side
   is its own; a base side (base + the patches it needs) is shared by the patches with the same
   needs, so a test counts once per distinct base. Test bodies, start-ups and timeouts are left
   out, so the real run is longer.

It needs the main job's audit JSON (``patchkit audit --json``, run here unless ``--audit-json`` names
one): a cold main job first, minutes, when the caches are empty.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

from bench.cases import CaseResult, _guard
from bench.measure import CommandFailed, Samples

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 300.0  # issue 20: the cold main job

_CALLS = 5  # cleanup calls per probe process

_CLEANUP_PROBE = """
import json, statistics, sys, time
import tests.conftest  # what pytest loads first for every test under tests/
from vllm.distributed import cleanup_dist_env_and_memory
import gc
times = []
for _ in range({calls}):
    start = time.perf_counter()
    try:
        cleanup_dist_env_and_memory()
    except Exception as exc:  # on a CPU host it ends raising "Cannot access accelerator device"
        raised = f"{{type(exc).__name__}}: {{exc}}"
    else:
        raised = None
    times.append(time.perf_counter() - start)
print(json.dumps({{"median": statistics.median(times), "objects": len(gc.get_objects()),
                  "modules": len(sys.modules), "raised": raised}}))
"""

_GC_PROBE = """
import gc, json, statistics, sys, time
import torch
times = []
for _ in range({calls}):
    start = time.perf_counter()
    gc.collect()
    times.append(time.perf_counter() - start)
print(json.dumps({{"median": statistics.median(times), "objects": len(gc.get_objects()),
                  "modules": len(sys.modules), "raised": None}}))
"""

_PLUGIN = '''
"""Collect-only: which items run vLLM's root cleanup_fixture (and so its gc.collect) after them."""
import json, os

def pytest_collection_finish(session):
    out = {}
    for item in session.items:
        names = getattr(item, "fixturenames", ())
        pays = "cleanup_fixture" in names and item.get_closest_marker("skip_global_cleanup") is None
        if pays:
            defs = item._fixtureinfo.name2fixturedefs.get("should_do_global_cleanup_after_test", ())
            root = item._fixtureinfo.name2fixturedefs.get("cleanup_fixture", ())
            if defs and root and defs[-1].baseid != root[-1].baseid:
                pays = None  # overridden below tests/: it may return False, so not counted
        out[item.nodeid] = pays
    with open(os.environ["PATCHKIT_FLOOR_OUT"], "w") as f:
        json.dump(out, f)
'''


def _env(tree: Path, extra_path: Path | None = None) -> dict[str, str]:
    from patchkit.testrun.pytestrun import OFFLINE_DEFAULTS

    paths = [str(tree), *([str(extra_path)] if extra_path else [])]
    env = {**OFFLINE_DEFAULTS, **os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return {**env, "PYTHONPATH": os.pathsep.join(paths)}


def _probe(python: str, code: str, tree: Path) -> dict:
    """The JSON line of one probe process (a new process per run)."""
    try:
        proc = subprocess.run([python, "-c", code], cwd=tree, env=_env(tree), capture_output=True, text=True,
                              timeout=600)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CommandFailed(f"probe: {exc}") from None
    if proc.returncode != 0:
        raise CommandFailed(f"probe exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def audit_json(work: Path, given: Path | None) -> dict:
    if given is not None:
        return json.loads(given.read_text("utf-8"))
    out = work / "mainjob-audit.json"
    out.unlink(missing_ok=True)
    subprocess.run([sys.executable, "-m", "patchkit", "audit", "--json", str(out)], cwd=REPO,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=7200)  # fmt: skip
    return _read_output(out, "patchkit audit --json")


def base_tree(data: dict) -> Path:
    """The audit's own base (its JSON records the pin it prepared), else this project's pin."""
    from patchkit.base.pin import prepare_base
    from patchkit.project import Project
    from patchkit.values import Pin

    pin = Pin.from_dict(data["base"]) if data.get("base") else Project(REPO).config.target
    return Path(prepare_base(pin))


def selections(data: dict) -> dict[str, list[str]]:
    out = {}
    for patch in data["patches"]:
        for gate in patch["gates"]:
            if "selection" in gate.get("details", {}):
                out[patch["patch"]] = gate["details"]["selection"]
    return out


def collect(python: str, tree: Path, paths: list[str], work: Path) -> dict[str, bool | None]:
    plugin_dir = work / "floor-plugin"
    plugin_dir.mkdir(parents=True, exist_ok=True)
    (plugin_dir / "patchkit_floor_plugin.py").write_text(_PLUGIN, "utf-8")
    out = work / "floor-items.json"
    out.unlink(missing_ok=True)
    env = {**_env(tree, plugin_dir), "PATCHKIT_FLOOR_OUT": str(out)}
    present = [p for p in paths if (tree / p).exists()]
    command = [python, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
               "-p", "patchkit_floor_plugin", "--continue-on-collection-errors", *present]  # fmt: skip
    subprocess.run(command, cwd=tree, env=env, capture_output=True, timeout=1800)
    return _read_output(out, "pytest --collect-only")


def _read_output(path: Path, what: str) -> dict:
    if not path.is_file():
        raise CommandFailed(f"{what} wrote no {path.name}")
    return json.loads(path.read_text("utf-8"))


def in_selection(nodeid: str, paths: list[str]) -> bool:
    return any(nodeid == p or nodeid.startswith(p.rstrip("/") + ("/" if not p.endswith(".py") else "::"))
               for p in paths)  # fmt: skip


_DURATION = re.compile(r"^([\d.]+)s teardown\s+(\S+)")


def durations_witness(python: str, tree: Path, path: str) -> dict:
    """pytest's own teardown times for one file (``--durations=0``, every phase listed)."""
    proc = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=0",
                           "--durations-min=0", path], cwd=tree, env=_env(tree), capture_output=True,
                          text=True, timeout=1800)  # fmt: skip
    teardowns = [float(m.group(1)) for line in proc.stdout.splitlines() if (m := _DURATION.match(line))]
    return {
        "file": path,
        "teardowns": len(teardowns),
        "median_teardown_s": round(statistics.median(teardowns), 4) if teardowns else None,
    }


NAME = "tests gate floor: vLLM's per-test cleanup x test runs / cores"


def testfloor_cases(runs: int, work: Path, given: Path | None = None) -> list[CaseResult]:
    """One row; a step that fails prints "failed: ..." in it, as the other cases do."""
    return [_guard("6", NAME, lambda: _measure(runs, work, given))]


def _measure(runs: int, work: Path, given: Path | None) -> CaseResult:
    name = NAME
    data = audit_json(work, given)
    python = (data.get("environment", {}).get("tests") or {}).get("interpreter")
    if not python:
        return CaseResult("6", name, unavailable="not available: the audit ran no tests gate")
    tree = base_tree(data)
    cand = Samples(["cleanup_dist_env_and_memory() after tests.conftest"])
    base = Samples(["gc.collect() after import torch"])
    probes: dict[str, dict] = {}
    for _ in range(runs):  # interleaved: load hits both alike
        for samples, code, key in ((cand, _CLEANUP_PROBE, "cleanup"), (base, _GC_PROBE, "gc")):
            probes[key] = _probe(python, code.format(calls=_CALLS), tree)
            samples.wall.append(probes[key]["median"])
            samples.cpu.append(0.0)
            samples.max_rss_kb.append(0)
    chosen = selections(data)
    items = collect(python, tree, sorted({p for paths in chosen.values() for p in paths}), work)
    per_patch, bases = {}, {}
    for patch in data["patches"]:
        paths = chosen.get(patch["patch"])
        if paths is None:
            continue
        mine = {nodeid: pays for nodeid, pays in items.items() if in_selection(nodeid, paths)}
        per_patch[patch["patch"]] = {
            "collected": len(mine),
            "pay_cleanup": sum(p is True for p in mine.values()),
            "override_unknown": sum(p is None for p in mine.values()),
        }
        # the base side is base + the patches this one needs: patches with the same needs share it
        # (a path runs there once), so it counts each paying test once per distinct base
        shared = bases.setdefault(tuple(sorted(patch.get("depends_on") or [])), set())
        shared.update(nodeid for nodeid, pays in mine.items() if pays is True)
    patched = sum(p["pay_cleanup"] for p in per_patch.values())
    base_runs = sum(len(ids) for ids in bases.values())
    cores = os.cpu_count() or 1
    floor = (patched + base_runs) * cand.median / cores
    patched_only = patched * cand.median / cores
    by_file: dict[str, int] = {}
    for nodeid, pays in items.items():
        if pays:
            by_file[nodeid.split("::", 1)[0]] = by_file.get(nodeid.split("::", 1)[0], 0) + 1
    small = min((f for f, n in by_file.items() if n >= 10), key=lambda f: by_file[f], default=None)
    witness = durations_witness(python, tree, small) if small else {"file": None}
    result = CaseResult("6", name, cand, "gc.collect() after import torch", base)
    result.target = f"floor <= {TARGET_S:g} s (cold main job target)"
    result.verdict = "PASS" if floor <= TARGET_S else "MISS"
    result.extra = {
        "note": (
            f"{patched} patched-side + {base_runs} base-side test runs pay vLLM's cleanup x "
            f"{cand.median:.3f} s / {cores} cores = floor {floor:.0f} s before any test body or "
            f"start-up (patched sides alone: {patched_only:.0f} s)"
        ),  # fmt: skip
        "floor_s": round(floor, 1),
        "floor_patched_sides_only_s": round(patched_only, 1),
        "test_runs": {"patched": patched, "base": base_runs},
        "cores": cores,
        "per_patch": per_patch,
        "probe": {k: {kk: v for kk, v in p.items() if kk != "median"} for k, p in probes.items()},
        "pytest_durations_witness": witness,
        "interpreter": python,
    }
    return result
