"""``patchkit apply`` starts without click for a plain command line (``commands/quick.py``): its
table of options is click's own view of the command, every command line it takes is parsed as click
parses it, it leaves every other one to click, and the command ends the same way on both paths."""

from __future__ import annotations

import inspect
import json
import os
import random
import shutil
import subprocess
import sys
import typing
from pathlib import Path

import click
import pytest
import typer
from typer.testing import CliRunner

from patchkit.cli import app
from patchkit.commands import apply as apply_command
from patchkit.commands import quick
from patchkit.console import verbosity

FIXTURES = Path(__file__).parent / "fixtures" / "apply"
ROOT = Path(__file__).resolve().parents[1]
_RUN = inspect.signature(apply_command.run)  # before any test replaces it


def _click_apply() -> click.Command:
    return typer.main.get_command(app).commands["apply"]  # adopted: -q/-v added, as at run time


def _cli_to_run() -> dict[str, str]:
    """cli.apply_'s parameters -> commands.apply.run's, as cli.py passes them (positionally)."""
    cli_names = list(inspect.signature(_click_apply().callback).parameters)
    run_names = list(inspect.signature(apply_command.run).parameters)
    assert len(cli_names) == len(run_names)
    return dict(zip(cli_names, run_names))


def _kind(command: click.Command, name: str) -> type:
    """The type typer converts the option's value to: its annotation, Optional and Annotated peeled."""
    annotation = typing.get_args(inspect.signature(command.callback).parameters[name].annotation)[0]
    kinds = [a for a in typing.get_args(annotation) if a is not type(None)] or [annotation]
    (kind,) = kinds
    return kind


def test_the_table_is_clicks_view_of_apply() -> None:
    command, names = _click_apply(), _cli_to_run()
    flags, values, counts, defaults, choices = {}, {}, {}, {}, None
    for param in command.params:
        if isinstance(param, click.Argument):
            defaults[names[param.name]] = param.default
            continue
        (long,) = [o for o in param.opts if o.startswith("--")]
        if long == "--color":  # every command's (conventions); the quick path leaves it to click
            continue
        if param.count:
            for opt in param.opts:
                counts[opt] = -1 if "quiet" in long else +1
            continue
        defaults[names[param.name]] = param.default
        if param.is_flag:
            flags[long] = names[param.name]
        else:
            values[long] = (names[param.name], _kind(command, param.name))
            if isinstance(param.type, click.Choice):
                choices = tuple(param.type.choices)
    assert flags == quick.FLAGS
    assert values == quick.VALUES
    assert counts == quick.COUNTS
    assert defaults == quick.DEFAULTS
    assert choices == quick.TARGETS


_TOKENS = [
    ["--check"], ["--reverse"], ["--recover"], ["--force"], ["--strict-index"], ["-q"], ["-v"], ["--quiet"],
    ["--verbose"], ["-vv"], ["-qv"], ["--target", "checkout"], ["--target", "site-packages"],
    ["--target", "bogus"], ["--path", "tree"], ["--path", "-x"], ["--path="], ["--path=tree"],
    ["--python", "python3"], ["--site-packages", "sp"], ["--json", "out.json"], ["--json", "-"],
    ["--lock-timeout", "5"], ["--lock-timeout", "1e3"], ["--lock-timeout", "x"], ["--lock-timeout", " 7 "],
    ["series"], ["other"], ["--"], ["-h"], ["--help"], ["--chec"], ["--unknown"], ["--path"], [""],
    ["--color", "never"],
]  # fmt: skip


def _via_click(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[dict, int] | None:
    """What click hands to commands.apply.run for this command line (None: click refused it)."""
    seen: list = []

    def record(*args):
        seen.append((dict(_RUN.bind(*args).arguments), verbosity()))
        return 0

    monkeypatch.setattr(apply_command, "run", record)
    result = CliRunner().invoke(app, argv)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return seen[0] if seen and result.exit_code == 0 else None


def test_every_line_quick_takes_click_parses_alike_and_the_rest_go_to_click(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(36)
    lines = [["apply", "series", "--check"], ["apply", "--check"], ["apply", "series", "--path", "t", "-q"]]
    lines += [["apply", *t] for t in _TOKENS]
    for _ in range(300):
        line = ["apply"]
        for _ in range(rng.randint(0, 5)):
            line += rng.choice(_TOKENS)
        lines.append(line)
    lines += [["status", "--check"], ["-q", "apply", "--check"], []]
    taken = 0
    for argv in lines:
        fast = quick.parse(argv)
        if fast is None:
            continue
        taken += 1
        assert _via_click(argv, monkeypatch) == fast, argv  # the same call, the same verbosity
    assert taken >= 100  # most plain lines take the quick path (it is not a path nobody takes)
    left = (["apply", "--check", "-h"], ["apply", "--json", "-"], ["apply", "--path=t"], ["apply", "-vv"],
            ["apply", "--target", "bogus"], ["apply", "a", "b"], ["apply", "--check", "--check"],
            ["-q", "apply"], ["apply", "--lock-timeout", "x"])  # fmt: skip
    for argv in left:
        assert quick.parse(argv) is None, argv


def _run(argv: list[str], cwd: Path, typed: bool) -> subprocess.CompletedProcess:
    """The ``patchkit`` command as installed (entry.main), or straight through typer (cli.main)."""
    entry = "patchkit.cli" if typed else "patchkit.entry"
    code = f"import sys; sys.argv[0] = 'patchkit'; from {entry} import main; main()"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-X", "importtime", "-c", code, *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def _split(stderr: str) -> tuple[str, set[str]]:
    lines = stderr.splitlines()
    modules = {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:")}
    return "\n".join(line for line in lines if not line.startswith("import time:")), modules


def test_the_command_ends_alike_on_both_paths_and_the_quick_one_loads_no_click(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(FIXTURES / "base", tree)
    series = tmp_path / "series"
    shutil.copytree(FIXTURES / "series", series)
    mismatched = tmp_path / "mismatched"
    shutil.copytree(tree, mismatched)
    (mismatched / "vllm" / "pool.py").write_text("changed by someone\n")
    cases = [
        (["apply", str(series), "--path", str(tree), "--check"], 0),
        (["apply", str(series), "--path", str(tree), "--check", "-v", "--json", "ok.json"], 0),
        (["apply", str(series), "--path", str(mismatched), "--check", "--json", "bad.json"], 1),
        (["apply", str(tmp_path / "missing"), "--path", str(tree), "--check", "--json", "gone.json"], 2),
        (["apply", str(series), "--path", str(tmp_path / "nowhere"), "--check"], 2),
    ]
    for argv, code in cases:
        assert quick.parse(argv) is not None, argv
        outs = []
        for typed in (False, True):
            proc = _run(argv, tmp_path, typed)
            text, modules = _split(proc.stderr)
            assert proc.returncode == code, (argv, typed, proc.stdout, text)
            assert ("click" in modules) is typed  # the quick path never loads click (nor typer)
            record = next((tmp_path / a for a in argv if a.endswith(".json")), None)
            outs.append((proc.stdout, text, json.loads(record.read_text()) if record else None))
        assert outs[0] == outs[1], argv
    assert json.loads((tmp_path / "bad.json").read_text())["exit_code"] == 1
    assert json.loads((tmp_path / "ok.json").read_text())["action"] == "check"
    assert (tree / ".patchkit").exists() is False  # --check wrote nothing, on either path
