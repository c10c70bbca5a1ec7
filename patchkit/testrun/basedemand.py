"""Base on demand (pure logic): the patched side runs first, the base side only where its outcome
can change a test's category.

A test that passes with the patch cannot be ``regressed`` whatever the base did; only its name in
the summary (passed on both, fixed, unskipped, new-passed) needs the base. So the base runs:

- every test that did not pass with the patch (failed, error, skipped): the base tells
  ``still-failing`` from ``regressed``, ``skipped`` from ``newly-skipped``;
- in full, every test file the patch changes or deletes (a test it deletes is ``removed``) and
  every module that failed to collect with the patch (its base tests take that module's error);
- in full (the rest of the selection), when a test the base lacks fails with an environment cause
  the base part that ran did not show: the table blames the environment only when the base hit
  the same cause somewhere, which only the whole base run can tell.

A test that passed with the patch and whose base outcome nobody needed (and no cache held) is
``passed-with-patch``: it counts as passed with the patch, never as "passed on both". Every other
test goes through ``testselect.classify`` as before, so both paths give one category per test.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from patchkit.testrun.testselect import Comparison, Outcome, compare, module_of

ON_PATCH_ONLY = "passed-with-patch"  # passed with the patch; the base was not needed


def file_of_test(test_id: str) -> str:
    """The file a JUnit test id (or a collected module's id) lies in: 'tests/x/test_y.py'."""
    return module_of(test_id).replace(".", "/") + ".py"


@dataclass
class Demand:
    """What the base side must run: whole files, and single tests (JUnit ids) in other files."""

    files: list[str] = field(default_factory=list)  # run in full: modules that broke at collection
    changed: list[str] = field(
        default_factory=list
    )  # collected on the base: its tests gone with the patch run
    ids: list[str] = field(default_factory=list)  # did not pass with the patch
    why: dict[str, int] = field(default_factory=dict)  # reason -> how many tests or files

    @property
    def empty(self) -> bool:
        return not self.files and not self.ids


def base_demand(patched: dict[str, Outcome], whole: set[str]) -> Demand:
    """What the base must run given the patched outcomes; ``whole``: test files the patch changes
    or deletes (relative paths)."""
    files = sorted({file_of_test(t) for t, o in patched.items() if o.status == "error" and "::" not in t})
    ids = sorted(t for t, o in patched.items() if o.status != "passed" and file_of_test(t) not in files)
    changed = sorted(set(whole) - set(files))
    why = {"failure": len(ids), "deleted-or-changed": len(changed), "collection": len(files)}
    return Demand(files=files, ids=ids, changed=changed, why={k: v for k, v in why.items() if v})


def gone(collected: list[str], patched: dict[str, Outcome]) -> list[str]:
    """Tests the base collects in a changed test file that the patched run does not have."""
    return sorted(t for t in collected if t not in patched)


def demanded(test_id: str, demand: Demand) -> bool:
    return test_id in set(demand.ids) or file_of_test(test_id) in set(demand.files)


def needs_rest(base: dict[str, Outcome], patched: dict[str, Outcome], known: set[str]) -> bool:
    """A test the base lacks fails with the patch with an environment cause the base part that
    ran did not hit: only the whole base run can say whether the environment is to blame."""
    causes = {o.cause for o in base.values() if o.cause}
    return any(
        o.status in ("failed", "error") and o.cause and o.cause not in causes and t not in base
        for t, o in patched.items()
        if t in known
    )


def compare_on_demand(base: dict[str, Outcome], patched: dict[str, Outcome], known: set[str]) -> Comparison:
    """``compare`` over the tests whose base outcome is known (ran, was demanded, or was cached);
    the others passed with the patch and are ``passed-with-patch``."""
    mine = {t: o for t, o in patched.items() if t in known or t in base}
    result = compare(base, mine)
    for test_id in sorted(set(patched) - set(mine)):
        result.add(ON_PATCH_ONLY, test_id)
        result.patch_counts[patched[test_id].status] += 1  # its teardown is not "passed on both"'s
    return result


def saved_seconds(patched: dict[str, Outcome], known: set[str], base: dict[str, Outcome]) -> float:
    """Estimate of the base-side time not spent: the patched run's recorded durations of the tests
    whose base side did not run (neither needed nor cached)."""
    return round(sum(o.seconds for t, o in patched.items() if t not in known and t not in base), 3)
