"""A series carries its own pin and overlays (split.json, its dir); a project's patchkit.toml speaks
only for the project's own series dir ([series].dir), wherever the command runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures.audit.builder import FAKE_TREE, file_diff, patch_text, write_series
from typer.testing import CliRunner

from patchkit.cli import app
from patchkit.commands.apply import series_version
from patchkit.project import Project

CALC = (FAKE_TREE / "vllm" / "calc.py").read_text()
TOML = """[target]
name = "vllm"
source = "index"
version = "0.33.0"
sha256 = "f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112"

[series]
dir = "patches"
"""


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    root = tmp_path / "project"
    patch = patch_text(file_diff("vllm/calc.py", CALC, CALC.replace("a + b", "b + a")))
    write_series(root / "patches", {"0001-calc.patch": patch})
    (root / "overlays").mkdir()
    (root / "patchkit.toml").write_text(TOML)
    monkeypatch.chdir(root)
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    return root


def test_the_projects_pin_and_overlays_are_only_for_its_own_series(project, tmp_path):
    foreign = write_series(
        tmp_path / "foreign", {"0001-x.patch": patch_text(file_diff("x.py", None, "X = 1\n"))}
    )
    here = Project(project)
    assert series_version(here, project / "patches") == ("0.33.0", str(project / "patchkit.toml"))
    assert here.overlay_root(project / "patches") == project
    assert series_version(here, foreign) == (None, "")  # not "the pinned 0.33.0" of the project around it
    assert here.overlay_root(foreign) is None  # the project's overlays/ are not added to it


def test_audit_of_a_foreign_series_does_not_take_the_projects_pin(project, tmp_path):
    foreign = write_series(
        tmp_path / "foreign", {"0001-x.patch": patch_text(file_diff("x.py", None, "X = 1\n"))}
    )
    result = CliRunner().invoke(
        app, ["audit", str(foreign), "--gates", "apply", "--json", str(tmp_path / "a.json")]
    )
    assert result.exit_code == 2
    assert "the series is not this project's own [series].dir" in result.output
