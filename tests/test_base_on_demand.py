"""Base on demand (issue 28): the patched side first, the base only where it can change a test's
category; the same classification table as running both sides in full."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from fixtures.audit.builder import FAKE_TREE, fake_base, file_diff, patch_text, write_series

from patchkit import timing
from patchkit.audit.engine import AuditOptions, run_audit
from patchkit.audit.gates.tests import TestSettings
from patchkit.base.pin import tree_hash
from patchkit.base.tree import BaseTree
from patchkit.report.words import fill_words
from patchkit.split.rules import load_rules
from patchkit.testrun.basedemand import (
    ON_PATCH_ONLY,
    base_demand,
    compare_on_demand,
    demanded,
    file_of_test,
    gone,
    needs_rest,
)
from patchkit.testrun.testselect import FAILING, PASSED_WITH_PATCH, Outcome, compare
from patchkit.values import Pin

SIGN = "Signed-off-by: Ada Dev <ada@example.org>"
STATUSES = ("passed", "skipped", "failed", "error", "absent")
CAUSES = (None, None, "no-accelerator", "model-hub-unreachable")


def _outcome(status: str, rng: random.Random) -> Outcome | None:
    if status == "absent":
        return None
    cause = rng.choice(CAUSES) if status != "passed" else None
    return Outcome(status, f"text {status} {cause}", cause, seconds=rng.uniform(0.1, 2.0))


def generated(seed: int):
    """A selection of 2-4 modules; each test a (base, patched) outcome pair. A test vanishes with
    the patch only from a module the patch changes (``whole``) or one that broke at collection."""
    rng = random.Random(seed)
    base: dict[str, Outcome] = {}
    patched: dict[str, Outcome] = {}
    whole: set[str] = set()
    for m in range(rng.randint(2, 4)):
        module = f"tests.m{m}.test_x{m}"
        changed = rng.random() < 0.3
        if changed:
            whole.add(module.replace(".", "/") + ".py")
        broken = not changed and rng.random() < 0.1
        if broken:  # collection error with the patch: one module-level error, its tests gone
            patched[module] = Outcome(
                "error", "ERROR collecting", "collection-error" if rng.random() < 0.5 else None
            )
        for t in range(rng.randint(1, 5)):
            test_id = f"{module}::test_{t}"
            b_status = rng.choice(STATUSES)
            p_status = "absent" if broken else rng.choice(STATUSES)
            if p_status == "absent" and not (changed or broken):
                p_status = rng.choice(STATUSES[:4])
            if (b := _outcome(b_status, rng)) is not None:
                base[test_id] = b
            if (p := _outcome(p_status, rng)) is not None:
                patched[test_id] = p
    return base, patched, whole


def on_demand(base, patched, whole):
    """The new path, with ``base`` standing for what the base side would report when run."""
    demand = base_demand(patched, whole)
    collected = [t for t in base if "::" in t and file_of_test(t) in demand.changed]  # the base's collection
    demand.ids = sorted(set(demand.ids) | set(gone(collected, patched)))
    ran = {t: o for t, o in base.items() if demanded(t, demand)}
    known = {t for t in patched if demanded(t, demand)}
    if needs_rest(ran, patched, known):
        ran, known = dict(base), set(patched) | set(base)
    return compare_on_demand(ran, patched, known), ran


def categories(cmp):
    return {t: c for c, ids in cmp.rows.items() for t in ids}


def test_old_and_new_paths_classify_generated_outcome_pairs_identically():
    pairs = runs_needing_base = 0
    for seed in range(120):
        base, patched, whole = generated(seed)
        old, (new, ran) = compare(base, patched), on_demand(base, patched, whole)
        before, after = categories(old), categories(new)
        assert set(before) == set(after), seed
        for test_id, category in before.items():
            if after[test_id] == ON_PATCH_ONLY:  # passed with the patch, base not needed
                assert category in PASSED_WITH_PATCH and patched[test_id].status == "passed", (seed, test_id)
            else:
                assert after[test_id] == category, (seed, test_id, category, after[test_id])
        assert old.failing == new.failing and old.passed_with_patch == new.passed_with_patch, seed
        assert old.count("still-failing") == new.count("still-failing"), seed
        assert old.count("could-not-run") == new.count("could-not-run") and old.causes == new.causes, seed
        for category in ("new-passed", "passed"):  # claimed only where the base side ran
            assert all(t in ran or t not in base for t in new.rows.get(category, [])), seed
        pairs += len(before)
        runs_needing_base += len(ran) < len(base)
    assert pairs >= 200 and runs_needing_base > 20  # the base side was really cut in most runs


def test_the_base_runs_only_what_did_not_pass_plus_changed_files():
    patched = {
        "tests.a.test_x::test_ok": Outcome("passed"),
        "tests.a.test_x::test_bad": Outcome("failed", "boom"),
        "tests.a.test_x::test_skip": Outcome("skipped", "later"),
        "tests.b.test_y": Outcome("error", "ERROR collecting"),
        "tests.c.test_z::test_ok": Outcome("passed"),
    }
    demand = base_demand(patched, {"tests/c/test_z.py"})
    assert demand.ids == ["tests.a.test_x::test_bad", "tests.a.test_x::test_skip"]
    assert demand.files == ["tests/b/test_y.py"] and demand.changed == ["tests/c/test_z.py"]
    assert demand.why == {"failure": 2, "deleted-or-changed": 1, "collection": 1}


# --------------------------------------------------------------------------- the gate, end to end

CALC = (FAKE_TREE / "vllm" / "calc.py").read_text()
TEST_CALC = (FAKE_TREE / "tests" / "test_calc.py").read_text()


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))


def _audit(tmp_path: Path, diff: str, use_cache: bool = True):
    root = tmp_path / "base"
    if not root.exists():
        fake_base(root)
    series = write_series(tmp_path / "series", {"0001-x.patch": patch_text(diff, trailers=SIGN)})
    pin = Pin(source="path", path=str(root), tree_hash=tree_hash(root))
    settings = TestSettings(python=sys.executable, base_root=root, base_hash=pin.tree_hash,
                            test_timeout=120, use_cache=use_cache)  # fmt: skip
    options = AuditOptions(gates=["tests"], use_cache=False, settings={"tests": settings})
    timing.reset()
    result = fill_words(
        run_audit(series, BaseTree(root), pin, load_rules(FAKE_TREE / "domains.toml"), options)
    )
    return result.patches[0].gates[0]


def test_a_regression_runs_the_base_for_the_failing_test_only(tmp_path):
    gate = _audit(tmp_path, file_diff("vllm/calc.py", CALC, CALC.replace("x * 2", "x * 3")))
    assert gate.status == "failed" and gate.details["tests"]["regressed"] == ["tests.test_calc::test_scale"]
    stats = gate.details["base_on_demand"]
    assert stats["run"] == 1 and stats["for-failure"] == 1 and stats["not-needed"] == 1  # test_add: not run
    assert gate.details["counts"] == {"regressed": 1, ON_PATCH_ONLY: 1}
    assert (
        "1 passed with the patch (base not needed)" in gate.summary and "passed on both" not in gate.summary
    )
    [stage] = [s for s in timing.stages() if s.name == "tests.base-on-demand"]
    assert "base 1 run (for a failure 1" in stage.detail and "1 not needed" in stage.detail
    assert [e.tool for e in gate.evidence] == ["pytest (base)", "pytest (patched)"]


def test_a_passing_patch_never_runs_the_base_and_claims_no_passed_on_both(tmp_path):
    gate = _audit(tmp_path, file_diff("vllm/calc.py", CALC, CALC.replace("import os", "import os  # env")))
    assert gate.status == "passed" and gate.details["counts"] == {ON_PATCH_ONLY: 2}
    assert not [s for s in timing.stages() if s.name == "tests.pytest.base"]
    assert [e.tool for e in gate.evidence] == ["pytest (patched)"]
    assert gate.details["base_on_demand"]["saved_seconds"] >= 0.0


def test_a_cached_base_outcome_is_used_instead_of_running_it(tmp_path):
    diff = file_diff("vllm/calc.py", CALC, CALC.replace("x * 2", "x * 3"))
    first = _audit(tmp_path, diff)
    second = _audit(tmp_path, diff)  # the gate result is not cached (use_cache False), the base is
    assert first.details["base_on_demand"]["run"] == 1 and second.details["base_on_demand"]["run"] == 0
    assert second.details["base_on_demand"]["cached"] == 1
    assert not [s for s in timing.stages() if s.name == "tests.pytest.base"]
    assert second.details["tests"] == first.details["tests"]


def test_a_changed_test_file_is_collected_on_the_base_and_only_its_gone_tests_run(tmp_path):
    kept = TEST_CALC[: TEST_CALC.index("\n\ndef test_scale")] + "\n"
    gate = _audit(tmp_path, file_diff("tests/test_calc.py", TEST_CALC, kept))
    assert gate.details["tests"]["removed"] == ["tests.test_calc::test_scale"]
    assert gate.details["counts"] == {"removed": 1, ON_PATCH_ONLY: 1}  # test_add: not run on the base
    assert gate.details["base_on_demand"]["deleted-or-changed"] == 1
    assert gate.details["base_on_demand"]["run"] == 1


def test_a_changed_test_files_gone_tests_need_no_pytest_process_of_their_own(tmp_path, monkeypatch):
    """Issue 28: the base's tests gone with a changed test file are chosen inside the one base run;
    no `pytest --collect-only` first (each pytest process pays vLLM's import)."""
    import subprocess

    collections, real = [], subprocess.run

    def counting(args, *rest, **kwargs):
        if "--collect-only" in args:
            collections.append(args)
        return real(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "run", counting)
    kept = TEST_CALC[: TEST_CALC.index("\n\ndef test_scale")] + "\n"
    gate = _audit(tmp_path, file_diff("tests/test_calc.py", TEST_CALC, kept) + file_diff(
        "vllm/calc.py", CALC, CALC.replace("a + b", "a - b")))  # fmt: skip
    assert gate.details["tests"]["removed"] == ["tests.test_calc::test_scale"]
    assert gate.details["tests"]["regressed"] == ["tests.test_calc::test_add"]  # and a failure's base run
    assert gate.details["base_on_demand"]["run"] == 2
    assert len([s for s in timing.stages() if s.name == "tests.pytest.base"]) == 1  # both in one run
    assert collections == []


def test_categories_where_the_patch_passes_need_no_failing_test_on_the_base():
    patched = {"tests.t.test_a::test_1": Outcome("passed"), "tests.t.test_a::test_2": Outcome("failed")}
    base = {"tests.t.test_a::test_2": Outcome("passed")}
    cmp = compare_on_demand(base, patched, {"tests.t.test_a::test_2"})
    assert cmp.rows == {"regressed": ["tests.t.test_a::test_2"], ON_PATCH_ONLY: ["tests.t.test_a::test_1"]}
    assert cmp.failing == 1 and set(FAILING) == {"regressed", "new-failed"}


def test_the_two_sided_reference_run_runs_the_base_in_full_and_agrees_with_base_on_demand(
    tmp_path, monkeypatch
):
    """PATCHKIT_BASE_SIDE=full is the run base on demand is compared with: the base runs every
    selected test (passed on both, not passed-with-patch) and the failing categories are the same."""
    regress = file_diff("vllm/calc.py", CALC, CALC.replace("x * 2", "x * 3"))
    on_demand = _audit(tmp_path / "demand", regress)
    monkeypatch.setenv("PATCHKIT_BASE_SIDE", "full")
    timing.reset()
    full = _audit(tmp_path / "full", regress)
    assert [s for s in timing.stages() if s.name == "tests.pytest.base"]  # the base ran
    assert full.details["two_sided"] is True and "two_sided" not in on_demand.details
    assert full.details["base_on_demand"] == {"full": len(full.details["selection"])}
    assert full.status == on_demand.status == "failed"
    failing = {k: v for k, v in on_demand.details["tests"].items() if k != ON_PATCH_ONLY}
    assert {k: v for k, v in full.details["tests"].items() if k in failing} == failing  # same regressions
    assert full.details["counts"].get(ON_PATCH_ONLY, 0) == 0  # both sides ran: none is "with the patch only"
    assert full.details["counts"]["passed"] == on_demand.details["counts"][ON_PATCH_ONLY]


def test_a_patched_run_is_the_base_side_of_the_patch_that_needs_it(tmp_path):
    """0002 needs 0001, so its base is 0001's patched tree: 0002's base side takes test_scale's
    outcome from 0001's patched run of that same tree, and runs no base of its own."""
    from fixtures.audit.builder import audit_fake

    one = CALC.replace("x * 2", "x * 3")  # breaks test_scale on the tree 0002 starts from
    two = one.replace("x * 3", "x * 3  # three")  # needs 0001: its context is 0001's line
    series = {"0001-x.patch": patch_text(file_diff("vllm/calc.py", CALC, one), trailers=SIGN),
              "0002-y.patch": patch_text(file_diff("vllm/calc.py", one, two), trailers=SIGN)}  # fmt: skip
    result = audit_fake(tmp_path, series, "upstream")
    first, second = (pa.gates[-1] for pa in result.patches)
    assert result.patches[1].gates[0].details["needs"] == ["0001-x.patch"]
    assert first.details["tests"]["regressed"] == ["tests.test_calc::test_scale"]
    assert first.details["base_on_demand"]["run"] == 1  # the base (no patch) of test_scale, run
    stats = second.details["base_on_demand"]
    assert stats["run"] == 0 and stats["shared_paths"] == {"patched run of 0001-x.patch": 1}
    # checked by hand: test_scale fails on 0001's tree and with 0002, so it is still failing there
    assert second.details["tests"]["still-failing"] == ["tests.test_calc::test_scale"]
    assert second.status == "passed" and not second.details["tests"].get("regressed")
    bases = [s for s in timing.stages() if s.name == "tests.pytest.base"]
    assert [s.detail.split(":")[0] for s in bases] == ["0001-x.patch"]  # 0002 ran no base
    [told] = [s.detail for s in timing.stages() if s.name == "tests.base-on-demand" and "0002" in s.detail]
    assert "whole path(s) 1 from the patched run of 0001-x.patch" in told
    [base] = [e for e in second.evidence if e.tool == "pytest (base)"]  # the outcome it classified by
    assert "1 failed" in base.outcome and "from the patched run of 0001-x.patch" in base.outcome


def test_a_patch_that_provides_anothers_base_starts_first(monkeypatch):
    from types import SimpleNamespace

    from patchkit.audit import shardplan
    from patchkit.audit.shardplan import providers_first

    monkeypatch.setattr(shardplan, "applies", lambda base, patches: None)  # 0001, 0002 apply alone
    # the needs as declared (what audit.needs adds is tested with real trees in test_working_needs)
    monkeypatch.setattr(
        shardplan, "patch_needs", lambda base, patch, earlier, alone: (patch.declared_needs, "")
    )

    a, b, c = (SimpleNamespace(name=n, index=i, declared_needs=d) for i, (n, d) in
               enumerate([("0001", []), ("0002", []), ("0003", ["0001"])]))  # fmt: skip
    assert [p.name for p in providers_first([c, b, a], [a, b, c], None)] == ["0001", "0003", "0002"]
    assert [p.name for p in providers_first([b, a, c], [a, b, c], None)] == ["0002", "0001", "0003"]
    # two jobs start at once: 0003 does not start beside 0001, whose patched run is its base
    assert [p.name for p in providers_first([c, b, a], [a, b, c], None, 2)] == ["0001", "0002", "0003"]
    assert [p.name for p in providers_first([c, a], [a, b, c], None, 2)] == ["0001", "0003"]  # none else


def test_a_chain_of_needs_shares_each_base_with_the_patch_before(tmp_path):
    """The class, not the one pair: 0003 needs 0002, which needs 0001; so 0003's base (base + 0001 +
    0002) is 0002's patched tree and 0002's is 0001's. Neither runs a base of its own."""
    from fixtures.audit.builder import audit_fake

    one = CALC.replace("x * 2", "x * 3")
    two = one.replace("x * 3", "x * 3  # three")
    three = two.replace("# three", "# three, on purpose")
    series = {"0001-x.patch": patch_text(file_diff("vllm/calc.py", CALC, one), trailers=SIGN),
              "0002-y.patch": patch_text(file_diff("vllm/calc.py", one, two), trailers=SIGN),
              "0003-z.patch": patch_text(file_diff("vllm/calc.py", two, three), trailers=SIGN)}  # fmt: skip
    result = audit_fake(tmp_path, series, "upstream")
    gates = [pa.gates[-1] for pa in result.patches]
    assert result.patches[2].gates[0].details["needs"] == ["0001-x.patch", "0002-y.patch"]
    for gate, provider in zip(gates[1:], ("0001-x.patch", "0002-y.patch")):
        stats = gate.details["base_on_demand"]
        assert stats["run"] == 0 and stats["shared_paths"] == {f"patched run of {provider}": 1}
        assert gate.details["tests"]["still-failing"] == ["tests.test_calc::test_scale"]  # by hand
    bases = [s for s in timing.stages() if s.name == "tests.pytest.base"]
    assert [s.detail.split(":")[0] for s in bases] == ["0001-x.patch"]
