"""What the summary tables and the pictures count, read from the record: each patch's test outcomes
in a few buckets, and the seconds each gate took. The terminal and the HTML show the same numbers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from patchkit.audit.model import AuditResult, GateResult, PatchAudit

# the tests gate's categories (audit/testselect.py, docs/guarantees.md) in the buckets a reader sees
BUCKETS: dict[str, tuple[str, ...]] = {
    "passed": ("passed", "fixed", "unskipped", "new-passed", "passed-with-patch"),
    "failed": ("regressed", "new-failed"),
    "still-failing": ("still-failing",),
    "could-not-run": ("could-not-run",),
    "skipped": ("skipped", "newly-skipped"),
    "flaky": ("flaky",),  # failed with the patch, passed when run again: a finding, not a pass
    "other": ("removed", "dropped"),
}
BUCKET_OF = {category: bucket for bucket, categories in BUCKETS.items() for category in categories}


def tests_gate(audit: PatchAudit) -> GateResult | None:
    return next((g for g in audit.gates if g.gate == "tests"), None)


def test_buckets(audit: PatchAudit) -> dict[str, int]:
    """The patch's tests per bucket, in ``BUCKETS`` order, zero buckets left out; empty when the
    tests gate did not run or recorded no comparison. Counted from ``details.counts`` (every test),
    else from the listed rows (``details.tests``, a record without counts)."""
    gate = tests_gate(audit)
    if gate is None or gate.status == "skipped":
        return {}
    details = gate.details or {}
    counted: Counter = Counter()
    counts = details.get("counts")
    if isinstance(counts, Mapping) and counts:
        for category, number in counts.items():
            if isinstance(number, int) and number > 0:
                counted[BUCKET_OF.get(str(category), "other")] += number
    elif isinstance(details.get("tests"), list):
        for row in details["tests"]:
            if isinstance(row, Mapping):
                counted[BUCKET_OF.get(str(row.get("outcome")), "other")] += 1
    return {bucket: counted[bucket] for bucket in BUCKETS if counted[bucket]}


def gate_seconds(result: AuditResult) -> dict[str, tuple[float, int, int]]:
    """Per gate, in the order the record names them: (seconds summed over the patches, patches it
    ran on, of which answered from the cache). A cached result counts the seconds it first took."""
    seconds: dict[str, list] = {}
    for audit in result.patches:
        for gate in audit.gates:
            if gate.status == "skipped" and not gate.duration:
                continue
            entry = seconds.setdefault(gate.gate, [0.0, 0, 0])
            entry[0] += max(0.0, float(gate.duration or 0.0))
            entry[1] += 1
            entry[2] += 1 if gate.cached else 0
    return {name: (total, runs, cached) for name, (total, runs, cached) in seconds.items()}


def gate_names(result: AuditResult) -> list[str]:
    """Every gate the record names, in the order the patches list them."""
    return list(dict.fromkeys(g.gate for p in result.patches for g in p.gates))
