"""The command line behaves like the tools around it: --version, choices refused alike everywhere,
--json even on failure, output flags that replace the defaults, argument help, one flag style,
NO_COLOR and non-TTY output without colour."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import typer.main
from fixtures.audit.builder import FAKE_TREE, fake_base, file_diff, patch_text, write_series
from typer.testing import CliRunner

from patchkit import cli
from patchkit.audit.gates.registry import GATES
from patchkit.choices import GATE_NAMES
from patchkit.cli import app
from patchkit.commands.apply import TARGETS
from patchkit.config import KNOWN_GATES
from patchkit.report.i18n import LANGS

CALC = (FAKE_TREE / "vllm" / "calc.py").read_text()
runner = CliRunner()


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))


def _series(tmp_path):
    base = fake_base(tmp_path / "base")
    calc = file_diff("vllm/calc.py", CALC, CALC.replace("a + b", "b + a"))
    signed = patch_text(calc, trailers="Signed-off-by: Ada Dev <ada@example.org>")
    return base, write_series(tmp_path / "series", {"0001-calc.patch": signed})


def test_version():
    from importlib.metadata import version

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"patchkit {version('vllm-patchkit')}"


def test_the_cli_choices_are_the_registrys_the_catalogues_and_applys():
    assert cli.GATE_NAMES == GATE_NAMES == GATES and set(KNOWN_GATES) <= set(GATES)
    assert cli.LANGS == LANGS and cli.TARGETS == TARGETS


@pytest.mark.parametrize(
    "args, option",
    [
        (["apply", "--target", "docker"], "--target"),
        (["status", "--target", "docker"], "--target"),
        (["audit", "--lang", "fr"], "--lang"),
        (["report", "x.json", "--lang", "fr"], "--lang"),
        (["audit", "--gates", "apply,frob"], "--gates"),
        (["audit", "--optional-gates", "frob"], "--optional-gates"),
        # a series that is not there: where the option is let through, the command fails at once
        (["audit", "/nonexistent-series", "--gates", ""], "--gates"),
        (["audit", "/nonexistent-series", "--select", "bogus"], "--select"),
        (["audit", "/nonexistent-series", "--jobs", "0"], "--jobs"),
    ],
)
def test_choices_are_refused_alike_in_every_command(args, option):
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert f"Invalid value for '{option}'" in result.output


def test_an_empty_optional_gates_accepts_none_over_the_configs(tmp_path):
    # '' was refused like an unknown gate, so a config's [audit] optional could not be turned off
    from patchkit.commands.audit import _optional
    from patchkit.config import load_config

    (tmp_path / "patchkit.toml").write_text('[audit]\noptional = ["tests"]\n')
    config = load_config(tmp_path / "patchkit.toml")
    assert _optional(None, config) == ["tests"] and _optional("", config) == []
    result = runner.invoke(
        app, ["audit", str(tmp_path / "nowhere"), "--optional-gates", "", "--base", str(tmp_path)]
    )
    assert result.exit_code == 2 and "not a series directory" in result.output  # past the option's check


def test_json_is_written_on_failure_too(tmp_path):
    out = tmp_path / "deep" / "apply.json"
    result = runner.invoke(app, ["apply", str(tmp_path), "--target", "checkout", "--json", str(out)])
    assert result.exit_code == 2
    record = json.loads(out.read_text())
    assert record["ok"] is False and record["exit_code"] == 2
    assert record["error"].startswith("--target checkout needs --path DIR (no vLLM checkout at or above")
    out = tmp_path / "audit.json"
    result = runner.invoke(
        app, ["audit", str(tmp_path / "nowhere"), "--base", str(tmp_path), "--json", str(out)]
    )
    assert result.exit_code == 2 and "not a series directory" in json.loads(out.read_text())["error"]


def test_explicit_outputs_replace_the_default_reports(tmp_path, monkeypatch):
    base, series = _series(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    args = ["audit", str(series), "--base", str(base), "--gates", "apply,dco"]
    result = runner.invoke(app, [*args, "--html", "x.html"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in work.iterdir()) == ["x.html"]  # no reports/audit.json beside it
    result = runner.invoke(app, args)
    assert result.exit_code == 0
    assert sorted(p.name for p in (work / "reports").iterdir()) == ["audit.html", "audit.json", "audit.md"]


def test_argument_help_is_shown():
    result = runner.invoke(app, ["audit", "--help"])
    assert re.search(r"\[SERIES_DIR\]\s+series dir \(default: \[series\]\.dir", result.output), result.output
    result = runner.invoke(app, ["report", "--help"])
    assert "audit result JSON files (shards are merged)" in result.output


def test_one_flag_style_no_off_switches():
    command = typer.main.get_command(app)
    for name, sub in command.commands.items():
        for param in sub.params:
            assert not getattr(param, "secondary_opts", []), f"{name} {param.opts} has {param.secondary_opts}"


def _color_codes(text: str) -> list[str]:
    """SGR colour codes (foreground/background); bold or dim are not colour."""
    return re.findall(r"\x1b\[(?:[0-9;]*;)?(?:3[0-9]|4[0-9]|9[0-7])(?:;[0-9;]*)?m", text)


def test_no_color_and_non_tty_output_has_no_colour(tmp_path):
    base, series = _series(tmp_path)
    args = [sys.executable, "-m", "patchkit", "audit", str(series), "--base", str(base),
            "--gates", "apply,dco", "--json", str(tmp_path / "a.json")]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TERM")}
    env["PATCHKIT_CACHE"] = str(tmp_path / "cache")
    piped = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and "ready" in piped.stdout
    assert "\x1b[" not in piped.stdout + piped.stderr  # not a terminal: plain text
    forced = subprocess.run(args, env={**env, "FORCE_COLOR": "1", "TERM": "xterm-256color"},
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert _color_codes(forced.stdout)  # the check can see colour when there is some
    colour_off = {**env, "FORCE_COLOR": "1", "TERM": "xterm-256color", "NO_COLOR": "1"}
    no_color = subprocess.run(args, env=colour_off, capture_output=True, text=True, timeout=120)
    assert no_color.returncode == 0 and not _color_codes(no_color.stdout + no_color.stderr)


def test_json_is_written_on_a_usage_error_too(tmp_path):
    out = tmp_path / "audit.json"
    args = [sys.executable, "-m", "patchkit", "audit", "--lang", "fr", "--json", str(out)]
    result = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "Invalid value for '--lang'" in result.stderr
    record = json.loads(out.read_text())
    assert (
        record["ok"] is False
        and record["exit_code"] == 2
        and "'fr' is not one of 'en', 'zh'" in record["error"]
    )
    ok = subprocess.run(
        [sys.executable, "-m", "patchkit", "--version"], capture_output=True, text=True, timeout=60
    )
    assert ok.returncode == 0 and ok.stdout.startswith("patchkit ")
    bad = subprocess.run([sys.executable, "-m", "patchkit", "checkout", "--pin", str(tmp_path / "none.toml")],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.startswith("patchkit: error: ")
