"""``--select affected`` across revisions (``testrun/carry``): after an edit of one line of a patch,
the tests that executed none of the edited code keep the outcome a recorded run (under coverage)
gave them on the previous revision; the others run. A later patch's base side (base + the edited
patch) carries the same way. Every carried count is said, and the verdicts and counts equal those
of a run that carries nothing."""

import coverage  # noqa: F401 - the runs are recorded by coverage in the test interpreter ([test] extra)
import pytest
from fixtures.audit.builder import FAKE_TREE, audit_fake, file_diff, patch_text

from patchkit import timing
from patchkit.testrun import carry

CALC = (FAKE_TREE / "vllm" / "calc.py").read_text()
SIGN = "Signed-off-by: Ada Dev <ada@example.org>"


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))


def limited(factor: int, limit: int = 10) -> str:
    """calc.py with a module-level change (every test that imports it is affected on the base) and
    one line of ``scale`` that an edit changes."""
    return CALC.replace("return x * 2", f"return min(x * {factor}, LIMIT)") + f"\n\nLIMIT = {limit}\n"


audit = audit_fake


def gate_of(result, index=0):
    return next(g for g in result.patches[index].gates if g.gate == "tests")


def calc_patch(text: str, before: str = CALC, subject: str = "calc") -> str:
    return patch_text(file_diff("vllm/calc.py", before, text), subject=subject, trailers=SIGN)


def test_an_edit_of_one_line_reruns_only_the_tests_that_executed_it(tmp_path):
    first = gate_of(audit(tmp_path, {"0001-calc.patch": calc_patch(limited(2))}, "affected", "r1"))
    assert first.status == "passed" and first.details["groups"]["first"] == 2  # module-level: both ran
    assert "carried" not in first.details["groups"]  # nothing recorded yet

    edited = gate_of(audit(tmp_path, {"0001-calc.patch": calc_patch(limited(3))}, "affected", "r2"))
    groups = edited.details["groups"]
    assert groups["carried"] == 1 and groups["first"] == 1 and groups["left_out"] == 0
    assert groups["carried_from"]["tests/test_calc.py"]["changed"] == ["vllm/calc.py"]
    assert edited.status == "failed"
    assert edited.details["tests"]["regressed"] == ["tests.test_calc::test_scale"]
    assert "1 outcome(s) carried from a recorded run" in edited.summary
    assert any(e.tool.startswith("coverage.py") and e.counts == {"patched": 1} for e in edited.evidence)
    record = {s.name: s.detail for s in timing.stages()}
    assert "carried 1 from a recorded run" in record["tests.affected"]

    # a module-level edit: both executed it, nothing is carried
    module = gate_of(audit(tmp_path, {"0001-calc.patch": calc_patch(limited(3, 11))}, "affected", "r3"))
    assert "carried" not in module.details["groups"] and module.details["groups"]["first"] == 2

    # the same revisions with nothing carried (upstream's whole selection, a new cache): same verdict
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    full = gate_of(audit(fresh, {"0001-calc.patch": calc_patch(limited(3))}, "upstream", "r2"))
    assert full.details["counts"] == edited.details["counts"] and full.status == edited.status


def test_a_later_patchs_base_side_carries_from_the_edited_patchs_recorded_run(tmp_path):
    def series(factor: int) -> dict[str, str]:
        one = limited(factor)
        # 0002 needs 0001 (a hunk next to LIMIT) and breaks add: test_add's base side (base + 0001) runs
        two = one.replace("return a + b", "return a + b + OFFSET")
        two = two.replace("LIMIT = 10\n", "LIMIT = 10\nOFFSET = 1\n")
        return {"0001-calc.patch": calc_patch(one),
                "0002-add.patch": calc_patch(two, before=one, subject="add")}  # fmt: skip

    audit(tmp_path, series(2), "affected", "r1")
    edited = audit(tmp_path, series(3), "affected", "r2")  # one line of 0001 edited
    later = gate_of(edited, 1)
    demand = later.details["base_on_demand"]
    assert demand["carried"] >= 1 and "tests/test_calc.py" in demand["carried_from"]
    assert "base outcome(s) carried from a recorded run" in later.summary
    assert later.details["tests"]["regressed"] == ["tests.test_calc::test_add"]  # passed on base + 0001
    assert any(e.tool.startswith("coverage.py") and "base" in e.counts for e in later.evidence)

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    full = audit(fresh, series(3), "upstream", "r2")
    for index in (0, 1):
        assert gate_of(full, index).details["counts"] == gate_of(edited, index).details["counts"]
        assert full.patches[index].verdict == edited.patches[index].verdict


def test_a_test_whose_coverage_was_lost_is_never_carried():
    value = {"tests": ["t::a", "t::b"], "files": {"vllm/calc.py": {"add": [0]}}}
    assert carry.measured_only(value) == {"tests": ["t::a"], "files": {"vllm/calc.py": {"add": [0]}}}
    merged = carry.merge({"tests": ["t::b"], "files": {"x.py": {"f": [0]}}}, value)
    assert merged["tests"] == ["t::b", "t::a"] and merged["files"]["vllm/calc.py"] == {"add": [1]}


def test_the_changes_between_two_trees_are_those_of_the_older_trees_scopes():
    base = {"vllm/calc.py": CALC.encode()}
    old = {"vllm/calc.py": limited(2).encode()}
    new = {"vllm/calc.py": limited(3).encode(), "vllm/data.json": b"{}"}
    delta = carry.between(base.get, old, new)
    assert delta == {"vllm/calc.py": {"scale"}, "vllm/data.json": {"<everything>"}}
    assert carry.between(base.get, old, old) == {}
