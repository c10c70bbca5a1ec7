"""A failure with the patch is run once more before it fails the gate (``testrun/confirm.py``): one
that passes when run again is ``flaky`` — a finding, never a failure nor a pass; one that fails
again stays ``regressed``. Real pytest runs of a small tree of ours, through the audit engine."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.audit.builder import file_diff
from test_tests_classification import TEST_CALC, _cache, _gate  # noqa: F401 - the shared harness

from patchkit.testrun import confirm
from patchkit.testrun.testselect import Outcome, classify, excerpt


def _flaky_once(marker: Path, body: str) -> str:
    """A test body that fails on its first run (it leaves ``marker``) and passes afterwards."""
    return (
        f"    import pathlib\n    m = pathlib.Path({str(marker)!r})\n"
        "    if not m.exists():\n        m.write_text('ran')\n"
        f"        raise AssertionError('first run only')\n{body}"
    )


def test_a_test_that_fails_then_passes_when_run_again_is_flaky_not_regressed(tmp_path):
    marker = tmp_path / "ran-once"
    flaky = TEST_CALC.replace("def test_add():\n", "def test_add():\n" + _flaky_once(marker, ""))
    assert flaky != TEST_CALC
    gate, result = _gate(tmp_path, file_diff("tests/test_calc.py", TEST_CALC, flaky))
    assert marker.exists()  # the first run did fail
    assert gate.details["tests"].get("flaky") == ["tests.test_calc::test_add"], gate.details["tests"]
    assert "regressed" not in gate.details["tests"]
    assert gate.details["confirmed"] == {"retried": 1, "flaky": 1, "retry_report": True}
    assert gate.status == "passed", gate.summary  # test_scale passed with the patch
    assert "1 flaky (failed with the patch, then passed when run again)" in gate.summary
    assert "first run only" in gate.details["messages"]["tests.test_calc::test_add"]
    kinds = [f["kind"] for f in result.patches[0].guide["findings"]]
    assert "test-flaky" in kinds  # the reviewer guide names it


def test_a_failure_that_fails_again_stays_regressed(tmp_path):
    broken = TEST_CALC.replace("def test_add():\n", "def test_add():\n    assert 1 == 2\n")
    gate, result = _gate(tmp_path, file_diff("tests/test_calc.py", TEST_CALC, broken))
    assert gate.details["tests"]["regressed"] == ["tests.test_calc::test_add"]
    assert gate.details["confirmed"] == {"retried": 1, "flaky": 0, "retry_report": True}
    assert gate.status == "failed" and result.patches[0].verdict == "needs-work"


def _fake_run_side(results: dict[str, str] | None):
    calls = []

    def run_side(settings, overlay, paths, env_info, work, label, who, progress, only):  # noqa: ANN001
        calls.append((label, paths, only))
        if results is None:
            return object()  # a NoReport-like: not a dict
        return {t: Outcome(s) for t, s in results.items()}

    return run_side, calls


def test_only_failures_are_run_again_and_a_retry_without_a_report_keeps_the_first_outcome(tmp_path):
    base = {"tests.t::a": Outcome("passed"), "tests.t::b": Outcome("passed"), "tests.t::c": Outcome("failed")}
    patched = {"tests.t::a": Outcome("failed", "E boom"), "tests.t::b": Outcome("passed"),
               "tests.t::c": Outcome("failed"), "tests.t::d": Outcome("error")}  # fmt: skip
    run_side, calls = _fake_run_side({"tests.t::a": "passed", "tests.t::d": "failed"})
    out, info = confirm.confirm_failures(
        None, None, base, patched, set(patched), {}, tmp_path, "p", print, run_side
    )
    assert calls == [("patch-retry", ["tests/t.py"], (["tests.t::a", "tests.t::d"], []))]  # c: still-failing
    assert out["tests.t::a"].status == "flaky" and out["tests.t::a"].text == "E boom"
    assert out["tests.t::d"].status == "error" and info == {"retried": 2, "flaky": 1, "retry_report": True}
    run_side, _ = _fake_run_side(None)
    out, info = confirm.confirm_failures(
        None, None, base, patched, set(patched), {}, tmp_path, "p", print, run_side
    )
    assert out == patched and info["retry_report"] is False


def test_many_failures_are_not_run_again(tmp_path):
    ids = [f"tests.t::x{i}" for i in range(confirm.MAX_RETRIED + 1)]
    base = {t: Outcome("passed") for t in ids}
    patched = {t: Outcome("failed") for t in ids}
    run_side, calls = _fake_run_side({})
    out, info = confirm.confirm_failures(
        None, None, base, patched, set(ids), {}, tmp_path, "p", print, run_side
    )
    assert (
        calls == [] and out == patched and info == {"retried": 0, "not_retried": len(ids), "why": "too-many"}
    )


@pytest.mark.parametrize("base", ["passed", "skipped", "failed", "absent"])
def test_flaky_is_its_own_category_whatever_the_base_did(base):
    assert classify(Outcome(base), Outcome("flaky")) == "flaky"


def test_a_long_failure_text_keeps_its_error_line():
    text = "def test():\n" + "    x = 1\n" * 400 + "E   RuntimeError: the real cause\n"
    kept = excerpt(text)
    assert len(kept) <= 1500 and kept.startswith("def test():") and "E   RuntimeError: the real cause" in kept
    assert excerpt("short") == "short"
