"""Test-level shards (pure logic): the test files of the whole audit spread over N runners,
balanced by recorded durations (fallback: counts), and what a shard records so that
``patchkit report`` can merge the shards into the record an unsharded audit writes.

A unit is a test file (a selected directory is expanded into its test files, the same way on every
runner: from the base and the series). A file goes to one shard for every patch that selects it,
so its base side, shared between those patches, still runs once. The plan depends only on the
series, the base and the durations file: every runner computes the same plan, and its digest is
in each shard's record (``patchkit report`` refuses shards of different plans).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

from patchkit.audit.testselect import Outcome, excerpt

DURATIONS_FILE = "test-durations.json"  # in the series dir: {test path: seconds}, from a record


def expand(selection: list[str], files_under: Callable[[str], list[str]]) -> list[str]:
    """Each selected directory as the test files below it; files stay; order kept, no repeats."""
    out: list[str] = []
    for path in selection:
        for f in [path] if path.endswith(".py") or "::" in path else files_under(path) or [path]:
            if f not in out:
                out.append(f)
    return out


def plan(units: dict[str, int], durations: dict[str, float], shards: int) -> dict[str, int]:
    """File -> shard (1..N). ``units``: file -> how many patches select it (each runs its patched
    side). Longest first onto the least loaded shard; a file without a recorded duration weighs
    the median of those recorded (all unrecorded: 1 each, i.e. balanced by counts)."""
    recorded = sorted(v for f, v in durations.items() if f in units and v > 0)
    default = recorded[len(recorded) // 2] if recorded else 1.0
    weight = {f: (durations.get(f) or default) * uses for f, uses in units.items()}
    load = [0.0] * shards
    out: dict[str, int] = {}
    for f in sorted(weight, key=lambda f: (-weight[f], f)):
        k = min(range(shards), key=lambda i: (load[i], i))
        out[f] = k + 1
        load[k] += weight[f]
    return out


def digest(assignment: dict[str, int], shards: int) -> str:
    text = json.dumps([shards, sorted(assignment.items())])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def owner(path: str, assignment: dict[str, int], shards: int) -> int:
    """A file's shard; one the plan does not know goes by a stable hash (same on every runner)."""
    if path in assignment:
        return assignment[path]
    return int(hashlib.sha256(path.encode()).hexdigest(), 16) % shards + 1


def durations_from(record: dict) -> dict[str, float]:
    """{test path: seconds} from an audit record (its tests gates' ``path_seconds``), summed over
    patches: the durations file ``--shard`` balances by."""
    out: dict[str, float] = {}
    for pa in record.get("patches", []):
        for gate in pa.get("gates", []):
            if gate.get("gate") == "tests":
                for path, seconds in (gate.get("details", {}).get("path_seconds") or {}).items():
                    out[path] = round(out.get(path, 0.0) + float(seconds), 3)
    return dict(sorted(out.items()))


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
