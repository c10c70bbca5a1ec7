"""``patchkit apply`` has one command-line parser, the Typer app's (click), and stays quick: the
console script builds only the verb it runs (the hand parser ``commands/quick.py`` is gone), parses
every line as the whole app does, loads only what ``apply`` needs, ends every case alike, and reads
no project config for a series that is not the project's."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from patchkit.cli import app
from patchkit.cli.root import parse_and_run
from patchkit.commands import apply as apply_command
from patchkit.ui.console import set_verbosity, verbosity

FIXTURES = Path(__file__).parent / "fixtures" / "apply"
ROOT = Path(__file__).resolve().parents[1]
_RUN = apply_command.run  # before any test replaces it


def _tree_and_series(tmp_path: Path) -> tuple[Path, Path]:
    tree, series = tmp_path / "tree", tmp_path / "series"
    shutil.copytree(FIXTURES / "base", tree)
    shutil.copytree(FIXTURES / "series", series)
    return tree, series


def _run(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """The installed ``patchkit`` command (``entry.main``) in a new process, with its import trace."""
    code = "import sys; sys.argv[0] = 'patchkit'; from patchkit.entry import main; main()"
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-X", "importtime", "-c", code, *argv], cwd=cwd, env=environ,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def _split(stderr: str) -> tuple[str, set[str]]:
    lines = stderr.splitlines()
    modules = {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:")}
    return "\n".join(line for line in lines if not line.startswith("import time:")), modules


def test_there_is_no_second_parser() -> None:
    assert importlib.util.find_spec("patchkit.commands.quick") is None


_TOKENS = [
    ["--check"], ["--reverse"], ["--recover"], ["--force"], ["--strict-index"], ["-q"], ["-v"], ["--quiet"],
    ["--verbose"], ["-vv"], ["-qv"], ["--target", "checkout"], ["--target", "site-packages"],
    ["--target", "bogus"], ["--path", "tree"], ["--path=tree"], ["--python", "python3"],
    ["--site-packages", "sp"], ["--json", "out.json"], ["--lock-timeout", "5"], ["--lock-timeout", "1e3"],
    ["--lock-timeout", "x"], ["series"], ["other"], ["--chec"], ["--unknown"], ["--path"], ["--"],
]  # fmt: skip


def _options_via(argv: list[str], lazy: bool, monkeypatch: pytest.MonkeyPatch) -> tuple:
    """(exit code, the Options commands.apply.run was given or None, the verbosity it ran with)."""
    seen: list = []

    def record(project, options):
        seen.append((options, verbosity()))
        return 0

    monkeypatch.setattr(apply_command, "run", record)
    set_verbosity(0)
    if lazy:  # what main() runs: only the named verb built
        try:
            code = parse_and_run(argv)
        except SystemExit as exc:  # --help and friends
            code = exc.code
    else:  # the whole app, as in-process callers hold it
        code = CliRunner().invoke(app, argv).exit_code
    set_verbosity(0)
    return code, *(seen[0] if seen else (None, None))


def test_building_only_the_verb_parses_every_line_as_the_whole_app(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)  # a refused line still writes its --json record
    rng = random.Random(43)
    lines = [["apply", "series", "--check"], ["apply", "--check"], ["-q", "apply", "--check"]]
    lines += [["apply", *t] for t in _TOKENS]
    for _ in range(120):
        line = ["apply"]
        for _ in range(rng.randint(0, 5)):
            line += rng.choice(_TOKENS)
        lines.append(line)
    ran = 0
    for argv in lines:
        lazy, whole = _options_via(argv, True, monkeypatch), _options_via(argv, False, monkeypatch)
        assert lazy == whole, argv
        ran += lazy[1] is not None
    capsys.readouterr()
    assert 40 <= ran < len(lines)  # most lines run, the bad ones are refused by click alike


def test_the_command_ends_alike_and_loads_only_what_apply_needs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # the in-process runs write their --json records here too
    tree, series = _tree_and_series(tmp_path)
    mismatched = tmp_path / "mismatched"
    shutil.copytree(tree, mismatched)
    (mismatched / "vllm" / "pool.py").write_text("changed by someone\n")
    cases = [
        (["apply", str(series), "--path", str(tree), "--check"], 0),
        (["apply", str(series), "--path", str(tree), "--check", "-v", "--json", "ok.json"], 0),
        (["apply", str(series), "--path", str(mismatched), "--check", "--json", "bad.json"], 1),
        (["apply", str(tmp_path / "missing"), "--path", str(tree), "--check", "--json", "gone.json"], 2),
        (["apply", str(series), "--path", str(tmp_path / "nowhere"), "--check"], 2),
        (["apply", str(series), "--target", "bogus"], 2),  # click's own refusal
    ]
    other_verbs = {"patchkit.cli.series", "patchkit.cli.setup", "patchkit.cli.audit", "patchkit.cli.edit",
                   "patchkit.cli.ci"}  # fmt: skip
    heavy = (
        "patchkit.audit",
        "patchkit.report",
        "patchkit.split",
        "patchkit.base",
        "rich",
        "jinja2",
        "tomllib",
    )
    for argv, code in cases:
        proc = _run(argv, tmp_path)
        text, modules = _split(proc.stderr)
        assert proc.returncode == code, (argv, proc.stdout, text)
        assert "click" in modules and "patchkit.cli.target" in modules  # click parses it, through typer
        assert not modules & other_verbs, modules & other_verbs  # only apply's wiring was built
        assert not [m for m in modules if m.startswith(heavy)], argv
        in_process = CliRunner().invoke(app, argv)
        assert in_process.exit_code == code, argv
    assert json.loads((tmp_path / "bad.json").read_text())["exit_code"] == 1
    assert json.loads((tmp_path / "gone.json").read_text())["exit_code"] == 2
    assert json.loads((tmp_path / "ok.json").read_text())["action"] == "check"
    assert (tree / ".patchkit").exists() is False  # --check wrote nothing


@pytest.mark.parametrize(
    "config",
    ["[target\nsource = 3\n", '[target]\nsource = "index"\nversion = "0.33.0"\n', "[nonsense]\nx = 1\n"],
)
def test_a_series_that_is_not_the_projects_reads_no_project_config(tmp_path: Path, config: str) -> None:
    """Run from a project whose patchkit.toml is broken (TOML, an incomplete pin, an unknown table):
    checking some other series must neither read nor judge it (it once exited 2, and loaded the
    download code to validate the pin)."""
    tree, series = _tree_and_series(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    (project / "patchkit.toml").write_text(config)
    proc = _run(["apply", str(series), "--path", str(tree), "--check"], project)
    text, modules = _split(proc.stderr)
    assert proc.returncode == 0, text
    assert "nothing written" in proc.stdout
    assert "tomllib" not in modules and "patchkit.base.pin" not in modules  # not read, not validated
    own = _run(["apply", "--path", str(tree), "--check"], project)  # the project's own series: read
    assert own.returncode == 2 and str(project / "patchkit.toml") in _split(own.stderr)[0]
