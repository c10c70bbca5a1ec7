"""Test-level shards (pure logic): the tests of the whole audit spread over N runners, balanced by
recorded durations (fallback: counts), and what a shard records so that ``patchkit report`` can
merge the shards into the record an unsharded audit writes.

A unit is a test file (a selected directory is expanded into its test files, the same way on every
runner: from the base and the series) or, for a file whose recorded duration is large
(``heavy``), one test of it (its JUnit id, from pytest's own ``--collect-only`` on the base + patch
tree), so that one big file is split over the shards. A unit goes to one shard for every patch that
selects it, so its base side, shared between those patches, still runs once. A test of a split file
the plan does not know (collected nowhere at plan time) belongs to the file's home shard (the shard
of its first test), a file the plan does not know to a stable hash: every test has one owner. The
plan depends only on the series, the base, the test environment's collection and the durations
file: every runner computes the same plan, and its digest is in each shard's record (``patchkit
report`` refuses shards of different plans).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

from patchkit.testrun.basedemand import file_of_test
from patchkit.testrun.testselect import Outcome, excerpt

DURATIONS_FILE = "test-durations.json"  # in the series dir: {test path or JUnit id: seconds}, from a record
TESTS_KEY = "@tests"  # in it, never a path: {test file: [JUnit ids]}, every test of the slow files
SPLIT_SHARE = 0.25  # a file heavier than this share of one shard's even load is split by test id


def expand(selection: list[str], files_under: Callable[[str], list[str]]) -> list[str]:
    """Each selected directory as the test files below it; files stay; order kept, no repeats."""
    out: list[str] = []
    for path in selection:
        for f in [path] if path.endswith(".py") or "::" in path else files_under(path) or [path]:
            if f not in out:
                out.append(f)
    return out


def _file_weights(units: dict[str, int], durations: dict[str, float]) -> dict[str, float]:
    """Each file's weight: its recorded seconds (summed over the patches that ran it), else the
    median of those recorded times the patches that select it (none recorded: 1 each, by counts)."""
    recorded = sorted(v for f, v in durations.items() if f in units and v > 0)
    default = recorded[len(recorded) // 2] if recorded else 1.0
    return {f: durations[f] if durations.get(f) else default * uses for f, uses in units.items()}


def heavy(units: dict[str, int], durations: dict[str, float], shards: int) -> list[str]:
    """The files to split by test id: a recorded duration above ``SPLIT_SHARE`` of one shard's even
    load (longest-first packing balances well only units well below a shard's share)."""
    if shards < 2:
        return []
    weight = _file_weights(units, durations)
    limit = SPLIT_SHARE * sum(weight.values()) / shards
    return sorted(f for f, w in weight.items() if f.endswith(".py") and durations.get(f) and w > limit)


def plan(units: dict[str, int], durations: dict[str, float], shards: int,
         ids: dict[str, list[str]] | None = None) -> dict[str, int]:  # fmt: skip
    """Unit -> shard (1..N). ``units``: file -> how many patches select it (each runs its patched
    side); ``ids``: for the files split by test id, their tests (JUnit ids, collection order), each
    weighing its recorded seconds, else an even share of the file's. Longest first onto the least
    loaded shard; a split file itself maps to its home shard (the shard of its first test)."""
    weight = _file_weights(units, durations)
    split = {f: list(dict.fromkeys(ids[f])) for f in sorted(ids or {}) if f in units and ids[f]}
    for f, tests in split.items():
        weight.update(split_weights(weight.pop(f), tests, durations))
    load = [0.0] * shards
    out: dict[str, int] = {}
    for unit in sorted(weight, key=lambda u: (-weight[u], u)):
        k = min(range(shards), key=lambda i: (load[i], i))
        out[unit] = k + 1
        load[k] += weight[unit]
    for f, tests in split.items():
        out[f] = out[tests[0]]
    return dict(sorted(out.items()))


def split_weights(total: float, tests: list[str], durations: dict[str, float]) -> dict[str, float]:
    """The tests of a file split by test id, each with its weight: recorded tests their seconds, the
    others an even share of what is left of the file's ``total``."""
    known = {t: durations[t] for t in tests if durations.get(t)}
    rest = [t for t in tests if t not in known]
    each = max(total - sum(known.values()), 0.0) / len(rest) if rest else 0.0
    return {**{t: each for t in rest}, **known}


def digest(assignment: dict[str, int], shards: int) -> str:
    text = json.dumps([shards, sorted(assignment.items())])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def owner(unit: str, assignment: dict[str, int], shards: int) -> int:
    """A unit's shard: its own; a test the plan does not know, its file's (a split file's home); a
    file the plan does not know, a stable hash (the same on every runner)."""
    if unit in assignment:
        return assignment[unit]
    path = file_of_test(unit) if "::" in unit else unit
    if path in assignment:
        return assignment[path]
    return int(hashlib.sha256(path.encode()).hexdigest(), 16) % shards + 1


def split_files(assignment: dict[str, int]) -> dict[str, dict[str, int]]:
    """The files split by test id: file -> {JUnit id: shard}."""
    out: dict[str, dict[str, int]] = {}
    for unit, shard in assignment.items():
        if "::" in unit:
            out.setdefault(file_of_test(unit), {})[unit] = shard
    return out


def shard_files(files: list[str], assignment: dict[str, int], shard: tuple[int, int]) -> list[str]:
    """The files of ``files`` shard I runs: whole files it owns, and split files where it owns a test
    or is the home (it runs only its tests of those: ``shardfilter``)."""
    i, n = shard
    split = split_files(assignment)
    return [f for f in files
            if owner(f, assignment, n) == i or (f in split and i in split[f].values())]  # fmt: skip


def owns(test_id: str, assignment: dict[str, int], shard: tuple[int, int] | None) -> bool:
    """Whether this runner runs ``test_id`` (unsharded: every test)."""
    return shard is None or owner(test_id, assignment, shard[1]) == shard[0]


SECONDS_KEYS = ("path_seconds", "test_seconds", "base_path_seconds", "base_test_seconds")


def durations_from(record: dict) -> dict[str, float]:
    """{test path or JUnit id: seconds} from an audit record (its tests gates' ``path_seconds`` and,
    for the slow tests, ``test_seconds``, of the patched side and of the base side as far as it
    ran), summed over patches and sides: the durations file ``--shard`` balances by. A test that
    does not pass with the patch costs its base run too, on the runner that owns it."""
    out: dict[str, float] = {}
    for pa in record.get("patches", []):
        for gate in pa.get("gates", []):
            if gate.get("gate") == "tests":
                details = gate.get("details", {})
                for key in SECONDS_KEYS:
                    for unit, seconds in (details.get(key) or {}).items():
                        out[unit] = round(out.get(unit, 0.0) + float(seconds), 3)
    return dict(sorted(out.items()))


def tests_from(record: dict) -> dict[str, list[str]]:
    """{test file: JUnit ids} from an audit record: every test of each file the tests gate listed
    (``file_tests``: the slow ones), over all patches, sorted — a heavy file is split by these
    ids without a collection first. An id the tree no longer has is a unit nobody runs; a test the
    list lacks goes to its file's home shard (``owner``): the plan stays whole either way."""
    out: dict[str, set[str]] = {}
    for pa in record.get("patches", []):
        for gate in pa.get("gates", []):
            listed = gate.get("details", {}).get("file_tests") if gate.get("gate") == "tests" else None
            for path, ids in (listed or {}).items() if isinstance(listed, dict) else []:
                if isinstance(path, str) and isinstance(ids, list):
                    out.setdefault(path, set()).update(t for t in ids if isinstance(t, str))
    return {p: sorted(ids) for p, ids in sorted(out.items())}


def pack(outcomes: dict[str, Outcome], text: bool) -> dict[str, list]:
    """Outcomes in a shard's record: [status, cause, teardown cause, seconds, text]."""
    return {
        t: [
            o.status,
            o.cause,
            o.teardown_cause,
            o.seconds,
            excerpt(o.text) if text and o.status != "passed" else "",
        ]
        for t, o in outcomes.items()
    }


def unpack(packed: dict[str, list]) -> dict[str, Outcome]:
    return {
        t: Outcome(s, text, cause, teardown, seconds=sec)
        for t, (s, cause, teardown, sec, text) in packed.items()
    }
