"""``patchkit split`` reads the project's ``[series] replays`` and ``[series] rules`` when none are
named, as ``audit`` and ``ci buildkite`` read those rules: a split and its audit name the same
domains (the rules were once read by audit only, and the replays by nothing)."""

from __future__ import annotations

import json
import subprocess

from typer.testing import CliRunner

from patchkit.cli import app

RULES = (
    "[[domain]]\nname = \"early\"\n  [[domain.match]]\n  paths = ['pkg/**']\n  patterns = ['USE']\n\n"
    "[[domain]]\nname = \"late\"\npaths = ['pkg/**']\n"
)


def _project(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    (tmp_path / "gitconfig").write_text("[user]\n\tname = Ursula User\n\temail = ursula@x\n")
    lines = [f"V{i} = {i}\n" for i in range(30)]
    final = list(lines)
    final[3] = "V3 = 300  # USE\n"
    final[25] = "V25 = 250\n"
    for side, text in (("a", lines), ("b", final)):
        (tmp_path / side / "pkg").mkdir(parents=True)
        (tmp_path / side / "pkg" / "__init__.py").write_text("")
        (tmp_path / side / "pkg" / "m.py").write_text("".join(text))
    diff = subprocess.run(["git", "diff", "--no-index", "a", "b"], cwd=tmp_path, capture_output=True).stdout
    (tmp_path / "replays").mkdir()
    (tmp_path / "replays" / "r.diff").write_bytes(diff.replace(b"a/a/", b"a/").replace(b"b/b/", b"b/"))
    (tmp_path / "rules.toml").write_text(RULES)
    monkeypatch.chdir(tmp_path)


def _domains(series):
    return [p["domain"] for p in json.loads((series / "split.json").read_text())["patches"]]


def test_split_without_arguments_takes_the_projects_replays_and_rules(tmp_path, monkeypatch):
    _project(tmp_path, monkeypatch)
    (tmp_path / "patchkit.toml").write_text('[series]\nreplays = ["replays/r.diff"]\nrules = "rules.toml"\n')
    args = ["split", "--base", "a", "--author", "Ada Dev <ada@x>"]
    result = CliRunner().invoke(app, [*args, "--out", "s1"])
    assert result.exit_code == 0, result.output
    assert _domains(tmp_path / "s1") == ["early", "late"]
    # named on the command line, they win over the project's
    (tmp_path / "other.toml").write_text(RULES.replace('"early"', '"first"').replace('"late"', '"second"'))
    result = CliRunner().invoke(app, [*args, "replays/r.diff", "--rules", "other.toml", "--out", "s2"])
    assert result.exit_code == 0, result.output
    assert _domains(tmp_path / "s2") == ["first", "second"]


def test_split_with_no_replay_anywhere_says_where_to_name_one(tmp_path, monkeypatch):
    _project(tmp_path, monkeypatch)
    (tmp_path / "patchkit.toml").write_text('[series]\nrules = "rules.toml"\n')
    result = CliRunner().invoke(app, ["split", "--base", "a", "--out", "s"])
    assert result.exit_code == 2, result.output
    assert "no replay to split" in result.output and "[series] replays" in result.output
    assert not (tmp_path / "s").exists()
