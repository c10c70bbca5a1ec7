"""The imports gate: every module the series touched so far still imports after each patch."""

from __future__ import annotations

import json
import sys

import pytest
from fixtures.audit.builder import fake_base, file_diff, patch_text, write_series
from typer.testing import CliRunner

from patchkit.cli import app


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))


def _audit(tmp_path, patches: dict[str, str], *extra: str):
    base = fake_base(tmp_path / "base")
    series = write_series(tmp_path / "series", patches)
    out = tmp_path / "a.json"
    args = ["audit", str(series), "--base", str(base), "--gates", "imports", "--json", str(out), *extra]
    result = CliRunner().invoke(app, args)
    data = json.loads(out.read_text())
    return result, {p["patch"]: p["gates"][0] if isinstance(p["gates"], list) else p["gates"]["imports"]
                    for p in data["patches"]}  # fmt: skip


def test_an_import_of_a_name_defined_nowhere_fails_naming_module_and_name(tmp_path) -> None:
    good = file_diff("vllm/helper.py", None, "VALUE = 1\n")
    bad = file_diff("vllm/user.py", None, "from vllm.helper import GHOST\n\nX = GHOST\n")
    result, gates = _audit(tmp_path, {"0001-helper.patch": patch_text(good),
                                      "0002-user.patch": patch_text(bad)})  # fmt: skip
    assert result.exit_code == 1, result.output
    # no interpreter given: the static half ran, the real import did not, so never "passed"
    assert gates["0001-helper.patch"]["status"] == "could-not-run"
    assert "no real import" in gates["0001-helper.patch"]["summary"]
    failed = gates["0002-user.patch"]
    assert failed["status"] == "failed"
    assert "vllm/user.py:1" in failed["summary"] and "GHOST" in failed["summary"]
    assert "vllm.helper" in failed["summary"]
    [problem] = failed["details"]["problems"]
    assert (problem["name"], problem["target"]) == ("GHOST", "vllm.helper")


def test_a_real_import_is_compared_with_the_base(tmp_path) -> None:
    # the static check cannot see this one (a runtime error); the real import does, and only the
    # module the patch broke is blamed
    broken = file_diff("vllm/boom.py", None, "raise RuntimeError('boom at import')\n")
    result, gates = _audit(tmp_path, {"0001-boom.patch": patch_text(broken)}, "--python", sys.executable)
    gate = gates["0001-boom.patch"]
    assert gate["status"] == "failed", gate
    assert "vllm.boom" in gate["summary"] and "boom at import" in gate["summary"]
    assert gate["details"]["real_import"]["modules"]["vllm.boom"]["status"] == "failed"


def test_an_import_of_a_module_a_later_patch_adds_fails_and_the_real_import_confirms(tmp_path) -> None:
    # the shape of a split that put a use before its module: patch 1 imports what patch 2 creates
    user = file_diff("vllm/user.py", None, "from vllm.ghost_helpers import GHOST_BLOCKS\n")
    module = file_diff("vllm/ghost_helpers.py", None, "GHOST_BLOCKS = 0\n")
    series = {"0001-user.patch": patch_text(user), "0002-module.patch": patch_text(module)}
    result, gates = _audit(tmp_path, series, "--python", sys.executable)
    assert result.exit_code == 1, result.output
    failed = gates["0001-user.patch"]
    assert failed["status"] == "failed"
    assert failed["summary"].startswith("1 import problem(s) added; first at vllm/user.py:1: module ")
    assert "vllm.ghost_helpers does not exist" in failed["summary"]
    confirmed = "the real import fails too: ModuleNotFoundError: No module named 'vllm.ghost_helpers'"
    assert confirmed in failed["summary"]
    assert gates["0002-module.patch"]["status"] == "passed"


def test_without_an_interpreter_the_gate_could_not_run_and_the_patch_is_incomplete(tmp_path) -> None:
    good = file_diff("vllm/helper.py", None, "VALUE = 1\n")
    result, gates = _audit(tmp_path, {"0001-helper.patch": patch_text(good)})
    gate = gates["0001-helper.patch"]
    assert gate["status"] == "could-not-run", gate  # was: passed ("no real import")
    assert "no interpreter given" in gate["summary"] and result.exit_code == 3
    assert [e["tool"] for e in gate["evidence"]] == [gate["evidence"][0]["tool"]]  # the static half only


def test_a_real_import_that_times_out_could_not_run(tmp_path, monkeypatch) -> None:
    from patchkit.audit.gates import imports

    monkeypatch.setattr(imports, "IMPORT_TIMEOUT", 3.0)
    slow = file_diff("vllm/slow.py", None, "import time\n\ntime.sleep(30)\n")
    result, gates = _audit(tmp_path, {"0001-slow.patch": patch_text(slow)}, "--python", sys.executable)
    gate = gates["0001-slow.patch"]
    assert gate["status"] == "could-not-run", gate  # was: passed (the module counted as "could not run")
    assert "vllm.slow" in gate["summary"] and "timed out after 3 s" in gate["summary"]
    assert result.exit_code == 3


def test_a_passed_imports_gate_names_the_interpreter_that_imported(tmp_path) -> None:
    good = file_diff("vllm/helper.py", None, "VALUE = 1\n")
    result, gates = _audit(tmp_path, {"0001-helper.patch": patch_text(good)}, "--python", sys.executable)
    gate = gates["0001-helper.patch"]
    assert gate["status"] == "passed" and result.exit_code == 0, gate
    python = next(e for e in gate["evidence"] if e["tool"] == "python")
    assert python["counts"]["imported"] == 1 and python["command"][0] == sys.executable


def test_every_import_failing_on_the_base_too_is_no_witness(tmp_path) -> None:
    """A package that cannot be imported here at all (its __init__ needs what is missing): the
    patch is not blamed, and nothing shows that it imports either."""
    base_init = "import a_package_this_host_lacks\n"
    change = file_diff(
        "vllm/calc.py", "def add(a, b):\n    return a + b\n", "def add(a, b):\n    return b + a\n"
    )
    base = fake_base(tmp_path / "base")
    (base / "vllm" / "__init__.py").write_text(base_init)
    (base / "vllm" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    series = write_series(tmp_path / "series", {"0001-calc.patch": patch_text(change)})
    out = tmp_path / "a.json"
    args = ["audit", str(series), "--base", str(base), "--gates", "imports", "--json", str(out),
            "--python", sys.executable]  # fmt: skip
    result = CliRunner().invoke(app, args)
    gate = json.loads(out.read_text())["patches"][0]["gates"][0]
    assert gate["status"] == "could-not-run", gate
    assert (
        "fail to import on the base too" in gate["summary"] and "a_package_this_host_lacks" in gate["summary"]
    )
    assert result.exit_code == 3


def test_a_patch_that_removes_what_an_untouched_module_imports_fails_and_the_real_import_confirms(
    tmp_path,
) -> None:
    # the shape of a partial pick of a release: a helper goes, its untouched importer stays
    base = fake_base(tmp_path / "base")
    (base / "vllm" / "users.py").write_text("from vllm.calc import scale\n\nDOUBLE = scale(2)\n")
    calc = (base / "vllm" / "calc.py").read_text()
    without = calc.replace("def scale(x):\n    return x * 2\n", "")
    assert without != calc
    series = write_series(
        tmp_path / "series", {"0001-calc.patch": patch_text(file_diff("vllm/calc.py", calc, without))}
    )
    out = tmp_path / "a.json"
    args = ["audit", str(series), "--base", str(base), "--gates", "imports", "--json", str(out),
            "--python", sys.executable]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    [patch] = json.loads(out.read_text())["patches"]
    gate = patch["gates"][0] if isinstance(patch["gates"], list) else patch["gates"]["imports"]
    assert gate["status"] == "failed", gate
    # the fake tree's own tests/test_calc.py (no __init__.py: searched all the same) imports it too
    assert gate["details"]["static"]["dependents"] == ["tests/test_calc.py", "vllm/users.py"]
    found = {(q["file"], q["name"], q["target"]) for q in gate["details"]["problems"]}
    assert found == {("vllm/users.py", "scale", "vllm.calc"), ("tests/test_calc.py", "scale", "vllm.calc")}
    # the real interpreter agrees: the untouched module no longer imports
    assert gate["details"]["real_import"]["modules"]["vllm.users"]["status"] == "failed"
    assert "cannot import name 'scale'" in gate["summary"]
