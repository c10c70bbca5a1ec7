"""The tests gate's classification (issue 25, item 4): the table in docs/guarantees.md, row by row,
against ``testselect.classify``; then each shape of the issue on real pytest runs of a small tree."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from fixtures.audit.builder import FAKE_TREE, fake_base, file_diff, patch_text, write_series

from patchkit.audit.engine import AuditOptions, run_audit
from patchkit.audit.gates.tests import TestSettings
from patchkit.base.pin import tree_hash
from patchkit.base.tree import BaseTree
from patchkit.report.markdown import render_markdown
from patchkit.report.words import fill_words
from patchkit.split.rules import load_rules
from patchkit.testrun.testselect import Outcome, classify, compare
from patchkit.values import Pin

GUARANTEES = Path(__file__).parent.parent / "docs" / "guarantees.md"
SIGN = "Signed-off-by: Ada Dev <ada@example.org>"
CALC = (FAKE_TREE / "vllm" / "calc.py").read_text()
TEST_CALC = (FAKE_TREE / "tests" / "test_calc.py").read_text()
CAUSES = {"X": "no-accelerator", "Y": "timeout"}


def documented_rows() -> list[tuple[str, str, str]]:
    """(base, with the patch, category) of each row of the classification table."""
    text = GUARANTEES.read_text("utf-8")
    section = text[text.index("### The tests gate's classification") :]
    section = section[: section.index("\n### ", 10)]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[2].startswith("`"):
            rows.append((cells[0], cells[1], cells[2].strip("`")))
    return rows


def outcomes(cell: str) -> list[Outcome]:
    """The outcomes a table cell names: ``failed / error`` is both; ``cause X`` an environment cause."""
    cause = next((CAUSES[m] for m in re.findall(r"cause ([XY])", cell)), None)
    head = cell.split(",")[0].strip()
    statuses = ["failed", "error"] if head == "failed / error" else [head]
    assert set(statuses) <= {"passed", "skipped", "failed", "error", "timeout", "absent", "flaky"}, cell
    return [Outcome(status, cause=cause) for status in statuses]


def test_the_table_covers_every_pair_of_outcomes():
    rows = documented_rows()
    assert len(rows) == 26
    plain = {(b, p) for b, p, _ in rows if "cause" not in b + p}
    kinds = ("passed", "skipped", "failed / error", "absent")
    assert {
        (b, p) for b in kinds for p in (*kinds[:3], "timeout", "absent") if (b, p) != ("absent", "absent")
    } <= plain


@pytest.mark.parametrize(("base", "patched", "category"), documented_rows())
def test_documented_row(base: str, patched: str, category: str):
    for b in outcomes(base):
        for p in outcomes(patched):
            assert classify(b, p) == category, (b, p)


def test_compare_gives_a_new_test_the_base_runs_cause_and_missing_tests_their_modules_error():
    base = {"tests.t::gpu": Outcome("error", cause="no-accelerator"), "tests.t::a": Outcome("skipped")}
    patched = {"tests.t::new": Outcome("error", cause="no-accelerator"),
               "tests.u::new": Outcome("error", cause="missing-package"),
               "tests.t": Outcome("error", "ImportError: cannot import name 'x'")}  # fmt: skip
    cmp = compare(base, patched)
    assert cmp.rows["could-not-run"] == ["tests.t::new"]  # the base hit no-accelerator (in tests.t::gpu)
    assert cmp.rows["still-failing"] == ["tests.t::gpu"]  # gone with its module's collection error
    assert "tests.u::new" in cmp.rows["new-failed"]  # the base never hit missing-package
    assert "tests.t::a" in cmp.rows["regressed"]  # skipped on the base, its module broke with the patch
    hung = compare({"tests.t::a": Outcome("passed"), "tests.t::b": Outcome("failed")}, None)
    assert hung.rows == {"regressed": ["tests.t::a", "tests.t::b"]}


# --------------------------------------------------------------------------- real pytest runs


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))


def _gate(tmp_path: Path, diff: str, base_files: dict[str, str] | None = None, **settings):
    """The tests gate of a one-patch series on the fake tree (plus ``base_files`` in its base)."""
    root = fake_base(tmp_path / "base")
    for path, text in (base_files or {}).items():
        (root / path).write_text(text)
    series = write_series(tmp_path / "series", {"0001-x.patch": patch_text(diff, trailers=SIGN)})
    pin = Pin(source="path", path=str(root), tree_hash=tree_hash(root))
    settings = {"test_timeout": 120, **settings}
    tests = TestSettings(
        python=sys.executable, base_root=root, base_hash=pin.tree_hash, use_cache=False, **settings
    )
    options = AuditOptions(gates=["tests"], use_cache=False, settings={"tests": tests})
    result = fill_words(
        run_audit(series, BaseTree(root), pin, load_rules(FAKE_TREE / "domains.toml"), options)
    )
    return result.patches[0].gates[0], result


SKIPPED_TEST = "import pytest\n\n\n@pytest.mark.skip(reason='later')\ndef test_later():\n    assert 1 == 2\n"


def test_skipped_on_the_base_failing_with_the_patch_is_regressed(tmp_path):
    unskipped = SKIPPED_TEST.replace("@pytest.mark.skip(reason='later')\n", "")
    gate, result = _gate(tmp_path, file_diff("tests/test_later.py", SKIPPED_TEST, unskipped),
                         {"tests/test_later.py": SKIPPED_TEST})  # fmt: skip
    assert gate.status == "failed", gate.summary  # was: "skipped", the gate passed
    assert gate.details["tests"]["regressed"] == ["tests.test_later::test_later"]
    assert result.patches[0].verdict == "needs-work"


def test_passed_on_the_base_skipped_with_the_patch_is_never_passed(tmp_path):
    skipped = TEST_CALC.replace("def test_", "@pytest.mark.skip(reason='x')\ndef test_")
    gate, _ = _gate(tmp_path, file_diff("tests/test_calc.py", TEST_CALC, "import pytest\n" + skipped))
    assert gate.details["counts"] == {"newly-skipped": 2}
    assert gate.status == "could-not-run" and "no selected test passed with the patch" in gate.summary


@pytest.mark.parametrize("error", ["assert 'CUDA' == 'cpu'", "raise ConnectionError('refused')"])
def test_a_new_failing_test_whose_text_looks_like_the_environment_fails(tmp_path, error):
    new = f"def test_new():\n    {error}\n"
    gate, _ = _gate(tmp_path, file_diff("tests/test_new.py", None, new))
    assert gate.status == "failed", gate.summary  # was: could-not-run (any "CUDA" / "ConnectionError")
    assert gate.details["tests"]["new-failed"] == ["tests.test_new::test_new"]


def test_a_new_test_hitting_the_cause_the_base_hit_is_the_environment(tmp_path):
    new = "def test_more():\n    raise RuntimeError('Cannot access accelerator device when none is there.')\n"
    diff = file_diff("vllm/hub.py", None, "NAME = 'hub'\n") + file_diff("tests/test_hub_more.py", None, new)
    gate, _ = _gate(tmp_path, diff)  # tests/test_hub.py on the base: no accelerator, no hub
    assert "tests.test_hub_more::test_more" in gate.details["tests"]["could-not-run"]
    assert gate.status == "could-not-run"


LOOP = "import time\nwhile True:\n    time.sleep(0.05)\n"


@pytest.mark.parametrize("where", ["in a test", "at collection"])
def test_a_patched_run_that_hangs_where_the_base_finished_is_regressed(tmp_path, where):
    if where == "in a test":
        diff = file_diff("vllm/calc.py", CALC, CALC.replace("return x * 2", "while True:\n        pass"))
    else:
        diff = file_diff("tests/test_calc.py", TEST_CALC, LOOP + TEST_CALC)
    gate, _ = _gate(tmp_path, diff, test_timeout=20, per_test_timeout=600)
    assert gate.status == "failed", gate.summary  # was: could-not-run ("patched run: timeout")
    assert "did not finish in 20 s where the base finished" in gate.summary
    assert sorted(gate.details["tests"]["regressed"]) == [
        "tests.test_calc::test_add",
        "tests.test_calc::test_scale",
    ]


def test_only_still_failing_tests_is_never_passed(tmp_path):
    broken = "def test_broken():\n    assert 1 == 2\n"
    gate, _ = _gate(tmp_path, file_diff("tests/test_broken.py", broken, "# still\n" + broken),
                    {"tests/test_broken.py": broken})  # fmt: skip
    assert gate.details["counts"] == {"still-failing": 1}
    assert gate.status == "could-not-run", gate.summary  # was: passed


def test_a_test_the_patch_deletes_that_passed_on_the_base_is_a_finding(tmp_path):
    kept = TEST_CALC[: TEST_CALC.index("\n\ndef test_scale")] + "\n"
    gate, result = _gate(tmp_path, file_diff("tests/test_calc.py", TEST_CALC, kept))
    assert gate.details["tests"]["removed"] == ["tests.test_calc::test_scale"]
    assert "1 removed (passed on the base)" in gate.summary
    [finding] = [f for f in result.patches[0].guide["findings"] if f["kind"] == "test-removed"]
    assert (
        finding["file"] == "tests/test_calc.py" and "tests.test_calc::test_scale" in finding["message"]["en"]
    )
    assert "tests.test_calc::test_scale" in render_markdown(result, "en")


def test_a_deleted_test_file_is_run_on_the_base_and_its_tests_are_findings(tmp_path):
    gate, result = _gate(tmp_path, file_diff("tests/test_calc.py", TEST_CALC, None))
    assert sorted(gate.details["tests"]["removed"]) == [
        "tests.test_calc::test_add",
        "tests.test_calc::test_scale",
    ]
    assert sum(f["kind"] == "test-removed" for f in result.patches[0].guide["findings"]) == 2


# pytest's own crash (INTERNALERROR): a conftest hook that raises ends the run; JUnit then holds one
# "pytest::internal" case and nothing for the tests after it. Seen in a real audit of the own series.
CRASH_HOOK = """\
from pathlib import Path

MARK = Path({mark!r})


def pytest_runtest_logreport(report):
    if report.when == "call" and ({always} or not MARK.exists()):
        MARK.write_text("crashed")
        raise RuntimeError("conftest hook crashed")
"""


def _crash_hook(tmp_path: Path, always: bool) -> str:
    return CRASH_HOOK.format(mark=str(tmp_path / "crashed-once"), always=always)


def test_a_pytest_crash_is_run_once_more_and_never_a_test_of_the_patch(tmp_path):
    new = CALC + "\n\ndef half(x):\n    return x / 2\n"
    gate, result = _gate(tmp_path, file_diff("vllm/calc.py", CALC, new),
                         {"tests/conftest.py": _crash_hook(tmp_path, always=False)})  # fmt: skip
    assert (tmp_path / "crashed-once").exists()  # the hook did crash the first run
    assert gate.status == "passed", gate.summary  # was: failed, new-failed ["pytest::internal"]
    assert not any("pytest::internal" in ids for ids in gate.details["tests"].values())
    assert result.patches[0].verdict == "ready"


def test_a_crash_that_recurs_on_both_sides_could_not_run_and_says_so(tmp_path):
    new = CALC + "\n\ndef half(x):\n    return x / 2\n"
    gate, result = _gate(tmp_path, file_diff("vllm/calc.py", CALC, new),
                         {"tests/conftest.py": _crash_hook(tmp_path, always=True)})  # fmt: skip
    assert gate.status == "could-not-run", gate.summary
    assert "INTERNALERROR" in gate.summary and "2 runs in a row" in gate.summary
    assert result.patches[0].verdict != "ready"


def test_a_patch_that_makes_pytest_crash_fails_with_pytests_reason(tmp_path):
    new = CALC + "\n\ndef half(x):\n    return x / 2\n"
    hook = file_diff("tests/conftest.py", None, _crash_hook(tmp_path, always=True))
    gate, result = _gate(tmp_path, file_diff("vllm/calc.py", CALC, new) + hook)
    assert gate.status == "failed", gate.summary  # the base reports; with the patch pytest cannot
    assert "INTERNALERROR" in gate.summary and "conftest hook crashed" in gate.summary
    assert result.patches[0].verdict == "needs-work"
