"""``--select affected`` end to end on a small fake base: the tests that ran the changed function
on the base run, the others are left out and the record says how many and why; a missing map is
said and built, one that cannot be built gives the full selection, never fewer tests silently; the
default (upstream CI's selection) runs every test, affected first once a map is cached. And the
tests gate's cache key: an edit of one patch re-runs the tests of the patches that need it only."""

import json

import coverage  # noqa: E402,F401 - the map is recorded by coverage in the interpreter the tests run with ([test] extra)
import pytest
from fixtures.audit.builder import FAKE_TREE, audit_fake, fake_base, file_diff, patch_text, write_series
from typer.testing import CliRunner

from patchkit import config, timing
from patchkit.cli import app
from patchkit.errors import UserError
from patchkit.testrun import covermap

CALC = (FAKE_TREE / "vllm" / "calc.py").read_text()
SIGN = "Signed-off-by: Ada Dev <ada@example.org>"


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))


def calc_patch(old: str, new: str) -> str:
    return patch_text(file_diff("vllm/calc.py", CALC, CALC.replace(old, new)), trailers=SIGN)


audit = audit_fake


def gate_of(result, index=0):
    return next(g for g in result.patches[index].gates if g.gate == "tests")


def stage_names() -> list[str]:
    return [s.name for s in timing.stages()]


def test_select_affected_runs_fewer_tests_and_says_how_many_it_left_out(tmp_path):
    first = gate_of(audit(tmp_path, {"0001-calc.patch": calc_patch("x * 2", "x * 3")}, "affected"))
    groups = first.details["groups"]
    assert groups["map"] == "built" and "tests.covermap" in stage_names()  # it was missing: said and built
    assert "coverage map was missing for 1 selected path(s)" in first.summary
    assert groups["first"] == 1 and groups["left_out"] == 1 and groups["why"] == {"function": 1}
    assert first.status == "failed" and first.details["tests"]["regressed"] == ["tests.test_calc::test_scale"]
    assert (
        "1 left out by `--select affected`" in first.summary
        and "1 executed a changed function" in first.summary
    )

    # a map is cached now: another change of the same base uses it and builds nothing
    again = gate_of(audit(tmp_path, {"0001-calc.patch": calc_patch("a + b", "a - b")}, "affected", "s2"))
    assert again.details["groups"]["map"] == "cached" and "tests.covermap" not in stage_names()
    assert again.details["groups"]["left_out"] == 1 and again.details["tests"]["regressed"] == [
        "tests.test_calc::test_add"
    ]
    record = {s.name: s.detail for s in timing.stages()}
    assert "affected first: 1 test(s) (function 1); left out 1; map cached" in record["tests.affected"]


def test_the_default_runs_the_whole_selection_affected_first_once_a_map_is_cached(tmp_path):
    plain = gate_of(audit(tmp_path, {"0001-calc.patch": calc_patch("x * 2", "x * 3")}, "upstream"))
    assert "groups" not in plain.details and "tests.covermap" not in stage_names()  # never builds a map
    audit(tmp_path, {"0001-calc.patch": calc_patch("a + b", "b + a")}, "affected", "s2")  # builds it
    grouped = gate_of(audit(tmp_path, {"0001-calc.patch": calc_patch("x * 2", "x * 5")}, "upstream", "s3"))
    assert grouped.details["groups"] == {**grouped.details["groups"], "first": 1, "rest": 1, "left_out": 0}
    assert grouped.details["counts"] == plain.details["counts"] and grouped.status == plain.status == "failed"
    assert not grouped.cached and grouped.details["tests"]["regressed"] == ["tests.test_calc::test_scale"]
    assert "left out" not in grouped.summary
    assert {"tests.pytest.patch", "tests.pytest.patch-rest"} <= set(stage_names())


def test_a_map_that_cannot_be_built_gives_the_full_selection_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(covermap, "DUMP", "raise SystemExit('no coverage data here')")
    gate = gate_of(audit(tmp_path, {"0001-calc.patch": calc_patch("x * 2", "x * 3")}, "affected"))
    assert gate.details["groups"]["map"] == "failed" and gate.details["groups"]["first"] == 2
    assert "could not be built" in gate.summary and "so the full selection ran" in gate.summary
    assert "left out" not in gate.summary and sum(gate.details["patched"].values()) == 2


def test_select_is_an_option_and_a_setting(tmp_path):
    (tmp_path / "patchkit.toml").write_text('[audit]\nselect = "affected"\n')
    assert config.load_config(tmp_path / "patchkit.toml").audit.select == "affected"
    assert config.AuditConfig().select == "upstream"  # upstream CI's selection stays the default
    root = fake_base(tmp_path / "base")
    series = write_series(tmp_path / "series", {"0001-calc.patch": calc_patch("x * 2", "x * 3")})
    out = CliRunner().invoke(
        app, ["audit", str(series), "--base", str(root), "--select", "some", "--json", "-"]
    )
    assert out.exit_code == 2 and "Invalid value for '--select'" in out.output  # a choice, as --lang
    assert "'some' is not one of 'upstream', 'affected'" in out.output
    (tmp_path / "patchkit.toml").write_text('[audit]\nselect = "some"\n')  # the setting: refused at load
    with pytest.raises(UserError, match="audit.select: 'some' is not one of upstream, affected"):
        config.load_config(tmp_path / "patchkit.toml")


def test_an_edit_of_one_patch_reruns_the_tests_of_the_patches_that_need_it_only(tmp_path):
    hub = patch_text(file_diff("vllm/hub.py", None, "NAME = 'hub'\n"), subject="hub", trailers=SIGN)
    audit(tmp_path, {"0001-calc.patch": calc_patch("x * 2", "x * 3"), "0002-hub.patch": hub}, "upstream")
    edited = audit(tmp_path, {"0001-calc.patch": calc_patch("x * 2", "x * 4"), "0002-hub.patch": hub},
                   "upstream", "edited")  # fmt: skip
    assert not gate_of(edited, 0).cached  # the edited patch runs again
    assert gate_of(edited, 1).cached  # 0002 needs nothing of 0001: its tests gate comes from the cache
    assert json.dumps(gate_of(edited, 1).details["selection"]) == '["tests/test_hub.py"]'
