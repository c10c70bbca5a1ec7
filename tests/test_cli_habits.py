"""The habits of ruff, uv and pip: -h, -V, -q/-v, --json - on stdout, Ctrl-C as exit 130, shell
completion, one name for the config file, --path from the tree you stand in. Every check walks the
commands the app registers, so a new verb is held to them without a line here."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer.main
from fixtures.audit.builder import FAKE_TREE, fake_base, file_diff, patch_text, write_series
from typer.testing import CliRunner

from patchkit import __version__
from patchkit.cli import app

CALC = (FAKE_TREE / "vllm" / "calc.py").read_text()
runner = CliRunner()
COMMAND = typer.main.get_command(app)
VERBS = sorted(COMMAND.commands)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))


def _patchkit(*args: str, cwd: Path | None = None, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.run(
        [sys.executable, "-m", "patchkit", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=env,
        **kw,
    )


def _series(tmp_path: Path) -> tuple[Path, Path]:
    base = fake_base(tmp_path / "base")
    calc = file_diff("vllm/calc.py", CALC, CALC.replace("a + b", "b + a"))
    signed = patch_text(calc, trailers="Signed-off-by: Ada Dev <ada@example.org>")
    return base, write_series(tmp_path / "series", {"0001-calc.patch": signed})


def _options(verb: str) -> set[str]:
    return {o for p in COMMAND.commands[verb].params for o in getattr(p, "opts", [])}


@pytest.mark.parametrize("args", [["-h"], *[[verb, "-h"] for verb in VERBS]])
def test_dash_h_is_help_everywhere(args):
    short, long = runner.invoke(app, args), runner.invoke(app, [*args[:-1], "--help"])
    assert short.exit_code == 0 and short.output.startswith("Usage: ")
    assert short.output == long.output


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_dash_v_upper_is_the_version(flag):
    result = runner.invoke(app, [flag])
    assert result.exit_code == 0 and result.output == f"patchkit {__version__}\n"


@pytest.mark.parametrize("verb", VERBS)
def test_every_command_takes_quiet_and_verbose(verb):
    assert {"-q", "--quiet", "-v", "--verbose"} <= _options(verb)


def test_quiet_and_verbose_change_what_a_command_prints(tmp_path):
    base, series = _series(tmp_path)
    args = ["apply", str(series), "--target", "checkout", "--path", str(base), "--check"]
    normal, quiet, verbose = (runner.invoke(app, a) for a in (args, ["-q", *args], [*args, "-v"]))
    assert normal.exit_code == quiet.exit_code == verbose.exit_code == 0
    assert "modified vllm/calc.py" in normal.output and "sha256" not in normal.output
    assert quiet.output == ""
    assert "modified vllm/calc.py" in verbose.output and "sha256 " in verbose.output
    # the group's -q and the command's -v add up: back to the normal lines
    assert runner.invoke(app, ["-q", *args, "-v"]).output == normal.output


def test_quiet_report_and_audit_print_the_result_only(tmp_path):
    base, series = _series(tmp_path)
    record = tmp_path / "a.json"
    audited = runner.invoke(
        app, ["-q", "audit", str(series), "--base", str(base), "--gates", "apply,dco", "--json", str(record)]
    )
    assert audited.exit_code == 0 and audited.output == f"verdict: ready; reports: {record}\n"
    reported = runner.invoke(app, ["report", str(record), "-q", "--html", str(tmp_path / "a.html")])
    page = tmp_path / "a.html"  # the same result line as audit's: one presentation of one record
    assert reported.exit_code == 0 and reported.output == f"verdict: ready; reports: {page}\n"


def _json_verbs() -> list[str]:
    return [verb for verb in VERBS if "--json" in _options(verb)]


def test_the_commands_with_json_are_the_ones_expected():
    assert {"apply", "audit", "rebase", "split", "status"} <= set(_json_verbs())


@pytest.mark.parametrize("verb", _json_verbs())
def test_json_dash_is_stdout_even_for_a_failure(verb, tmp_path):
    """``--json -`` never writes a file named ``-``: stdout holds the JSON record and nothing else."""
    result = _patchkit(verb, str(tmp_path / "nowhere"), "--json", "-", cwd=tmp_path)
    assert result.returncode in (1, 2, 3), result.stderr
    record = json.loads(result.stdout)
    assert record["ok"] is False and record["exit_code"] == result.returncode
    assert not (tmp_path / "-").exists()


def test_json_dash_of_a_success_keeps_the_human_lines_on_stderr(tmp_path):
    base, series = _series(tmp_path)
    audited = _patchkit(
        "audit", str(series), "--base", str(base), "--gates", "apply,dco", "--json", "-", cwd=tmp_path
    )
    assert audited.returncode == 0, audited.stderr
    assert json.loads(audited.stdout)["verdict"] == "ready"
    assert "verdict: ready; reports: - (stdout)" in audited.stderr
    applied = _patchkit(
        "apply", str(series), "--target", "checkout", "--path", str(base), "--json", "-", cwd=tmp_path
    )
    assert applied.returncode == 0, applied.stderr
    assert json.loads(applied.stdout)["action"] == "applied"
    assert "applied 1 patch(es)" in applied.stderr
    assert not (tmp_path / "-").exists() and not (tmp_path / "reports").exists()


def test_json_dash_with_a_usage_error_is_stdout_too(tmp_path):
    result = _patchkit("audit", "--lang", "fr", "--json", "-", cwd=tmp_path)
    assert result.returncode == 2 and "Invalid value for '--lang'" in result.stderr
    assert json.loads(result.stdout)["exit_code"] == 2 and not (tmp_path / "-").exists()


def test_ctrl_c_is_one_line_and_exit_130(tmp_path):
    """Interrupted while it waits for a target lock someone else holds: one line, 130 (what a shell
    reports for SIGINT), never "Aborted!" with exit 1 (which reads as "a gate failed")."""
    base, series = _series(tmp_path)
    state = base / ".patchkit"
    state.mkdir()
    with open(state / "lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        proc = subprocess.Popen(
            [sys.executable, "-m", "patchkit", "apply", str(series), "--path", str(base)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            # a shell starts background jobs with SIGINT ignored, and Python keeps an ignored SIGINT
            # ignored: the child gets the default disposition, as a command typed at a prompt has
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        assert proc.stdout.readline().startswith("target: checkout")  # it is waiting for the lock now
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.splitlines() == [err.strip()] and err.startswith("patchkit: interrupted (Ctrl-C)")
    assert "Traceback" not in err and (base / "vllm" / "calc.py").read_text() == CALC


def test_shell_completion_is_typers(tmp_path):
    # Typer names the shell it runs under (its parent process): bash here, whatever runs the suite
    script = subprocess.run(
        ["bash", "-c", '"$0" -m patchkit --show-completion; exit $?', sys.executable],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    assert script.returncode == 0 and "_PATCHKIT_COMPLETE=complete_bash" in script.stdout
    env = {
        **os.environ,
        "_PATCHKIT_COMPLETE": "complete_bash",
        "COMP_CWORD": "1",
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    }
    verbs = subprocess.run(
        [sys.executable, "-m", "patchkit"],
        env={**env, "COMP_WORDS": "patchkit au"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert verbs.stdout.split() == ["audit"]
    options = subprocess.run(
        [sys.executable, "-m", "patchkit"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "COMP_WORDS": "patchkit audit --con", "COMP_CWORD": "2"},
    )
    assert options.stdout.split() == ["--config"]  # the hidden alias is not offered


def test_one_name_for_the_config_file_everywhere():
    """``--config FILE`` is patchkit.toml (or a pin file of its form) in every command that reads it;
    ``--pin`` still works, hidden from help."""
    takes = [verb for verb in VERBS if "--config" in _options(verb)]
    assert {"audit", "checkout", "pin", "split"} <= set(takes)
    for verb in takes:
        assert "--pin" in _options(verb)  # the older name, accepted
        shown = runner.invoke(app, [verb, "--help"]).output
        assert "--config" in shown and "--pin" not in shown
    assert not [verb for verb in VERBS if "--pin" in _options(verb) and "--config" not in _options(verb)]


def test_the_alias_reads_the_same_file(tmp_path):
    missing = str(tmp_path / "none.toml")
    by_alias, by_name = (
        runner.invoke(app, ["checkout", "--pin", missing]),
        runner.invoke(app, ["checkout", "--config", missing]),
    )
    assert by_alias.exit_code == by_name.exit_code == 2
    assert by_alias.output == by_name.output and missing in by_name.output


def test_status_and_apply_take_the_checkout_you_stand_in(tmp_path):
    base, series = _series(tmp_path)
    inside = base / "vllm"
    assert _patchkit("apply", str(series), cwd=inside).returncode == 0
    status = _patchkit("status", str(series), cwd=inside)
    assert status.returncode == 0, status.stderr
    assert f"target: checkout {base.resolve()}" in status.stdout and "consistent" in status.stdout
    assert _patchkit("apply", str(series), "--reverse", cwd=inside).returncode == 0
    assert (base / "vllm" / "calc.py").read_text() == CALC


def test_no_checkout_here_is_an_error_not_a_guess(tmp_path):
    result = _patchkit("status", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"patchkit: error: --target checkout needs --path DIR (no vLLM checkout at or above {tmp_path})"
    )


def test_an_installed_vllm_is_not_taken_for_a_checkout(tmp_path):
    site = tmp_path / "site-packages"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("")
    (site / "vllm-0.33.0.dist-info").mkdir()
    result = _patchkit("status", cwd=site / "vllm")
    assert result.returncode == 2 and "is an installed vllm: pass --target site-packages" in result.stderr


def test_a_verb_with_subcommands_gets_the_habits_too():
    """A later verb built as a group of its own (``patchkit edit absorb ...``) is adopted whole."""
    import click

    from patchkit.cli.conventions import Conventions

    leaf = click.Command("absorb", params=[click.Option(["--pin"]), click.Option(["--json"], help="w")])
    group = Conventions(commands={"edit": click.Group("edit", commands={"absorb": leaf})})
    absorb = group.commands["edit"].commands["absorb"]
    opts = {o for p in absorb.params for o in getattr(p, "opts", [])}
    assert {"--config", "--pin", "-q", "-v"} <= opts
    assert next(p for p in absorb.params if "--json" in p.opts).help.endswith("('-': stdout)")
