"""One terminal presentation (patchkit/ui/): audit and report print the same record the same way, in
--lang; off a terminal nothing is cut; the tools that ran only with -v; -q draws no progress; colour
follows --color, NO_COLOR and FORCE_COLOR; a mistyped command is suggested once."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.audit.builder import FAKE_TREE, fake_base, file_diff, patch_text, write_series

from patchkit.audit.model import AuditResult, ProgressEvent
from patchkit.ui import console as ui_console
from patchkit.ui.progress import AuditProgress

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "tests" / "fixtures" / "report" / "audit_small.json"
CALC = (FAKE_TREE / "vllm" / "calc.py").read_text()
LONG = "0001-a-patch-name-longer-than-any-terminal-column-would-hold-whole.patch"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS")}
    return {**env, "PYTHONPATH": str(ROOT), "COLUMNS": "80", "TERM": "xterm-256color", **extra}


def _patchkit(*args: str, **env: str) -> subprocess.CompletedProcess:
    """patchkit with stdout a pipe, as in a CI log."""
    argv = [sys.executable, "-m", "patchkit", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, env=_env(**env))


def _on_a_terminal(*args: str, **env: str) -> str:
    """patchkit with stdout a pseudo-terminal of 80 columns: what it wrote there."""
    leader, follower = pty.openpty()
    argv = [sys.executable, "-m", "patchkit", *args]
    proc = subprocess.Popen(argv, stdout=follower, stderr=subprocess.DEVNULL, env=_env(**env))
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=120)
    os.close(leader)
    return out.decode("utf-8", "replace")


def _record(tmp_path: Path, name: str = LONG) -> Path:
    data = json.loads(SMALL.read_text("utf-8"))
    data["patches"][0]["patch"] = name
    data["environment"]["series_patches"] = [p["patch"] for p in data["patches"]]
    path = tmp_path / "audit.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _series(tmp_path: Path) -> tuple[Path, Path]:
    base = fake_base(tmp_path / "base")
    calc = file_diff("vllm/calc.py", CALC, CALC.replace("a + b", "b + a"))
    signed = patch_text(calc, trailers="Signed-off-by: Ada Dev <ada@example.org>")
    return base, write_series(tmp_path / "series", {"0001-calc.patch": signed})


def test_off_a_terminal_every_name_is_written_whole(tmp_path):
    """A CI log is no terminal: no column is cut at 80 characters (it was `0001-tool-parser.pat…`)."""
    result = _patchkit("report", str(_record(tmp_path)))
    assert result.returncode == 1, result.stderr
    assert LONG in result.stdout and "…" not in result.stdout.split("\n\n")[1]
    table = result.stdout.split("\n\n")[1].splitlines()
    assert max(len(line) for line in table) > 80 and all(line == line.rstrip() for line in table)


def test_audit_and_report_print_one_presentation_in_every_language(tmp_path):
    base, series = _series(tmp_path)
    record = tmp_path / "a.json"
    headers = {"en": ("Patch", "Verdict", "apply", "dco"), "zh": ("补丁", "结论", "apply", "dco")}
    for lang, header in headers.items():
        args = ["--base", str(base), "--gates", "apply,dco", "--json", str(record), "--lang", lang]
        audited = _patchkit("audit", str(series), *args)
        reported = _patchkit("report", str(record), "--lang", lang)
        assert audited.returncode == reported.returncode == 0, audited.stderr + reported.stderr
        table = audited.stdout.split("\n\n")[1]  # title lines, the table, the result
        assert table == reported.stdout.split("\n\n")[1]
        assert all(word in table.splitlines()[0] for word in header), table
    assert "Patch" not in table and "Verdict" not in table and "通过" in table  # zh: no English header
    assert audited.stdout.splitlines()[-1].startswith("结论：可合入；报告：")


def test_the_tools_that_ran_are_named_only_with_verbose(tmp_path):
    plain = _patchkit("report", str(_record(tmp_path)))
    verbose = _patchkit("report", str(_record(tmp_path)), "-v")
    for internal in ("Witness", "diff/engine.py", "interpret-trailers"):
        assert internal not in plain.stdout and internal in verbose.stdout
    assert "    Witness: git interpret-trailers 2.39.5" in verbose.stdout


def test_reasons_shared_by_several_patches_are_one_line():
    from patchkit.ui.summary import reason_lines
    from patchkit.values import Message

    result = AuditResult.from_dict(json.loads(SMALL.read_text("utf-8")))
    first, second = result.patches
    for audit, count in ((first, 4), (second, 12)):
        audit.verdict = "incomplete"
        audit.reasons = [f"imports could not run here: {count} touched module(s) checked statically"]
        audit.reason_messages = [Message("reason.could-not-run", {})]
    assert reason_lines(result, "en") == [
        f"{first.patch}, {second.patch} (2 patches): imports could not run here: … touched module(s) checked "
        "statically"
    ]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("level", [-1, 0])
def test_quiet_draws_no_progress_on_a_terminal(monkeypatch, level):
    monkeypatch.setattr(ui_console, "_verbosity", level)
    stream = _Terminal()
    with AuditProgress(stream) as tell:
        tell(ProgressEvent("gate-start", "0001-x.patch", 1, 1, gate="apply"))
        tell(ProgressEvent("gate-done", "0001-x.patch", 1, 1, gate="apply", status="passed", seconds=1.0))
    assert (stream.getvalue() == "") is (level < 0)


def test_quiet_starts_no_live_display(monkeypatch):
    monkeypatch.setattr(ui_console, "_verbosity", -1)
    progress = AuditProgress(_Terminal())
    with progress:
        assert progress.live is None


def test_progress_lines_follow_the_language(monkeypatch):
    monkeypatch.setattr(ui_console, "_verbosity", 0)
    stream, x = io.StringIO(), "0002-x.patch"
    with AuditProgress(stream, lang="zh") as tell:
        tell(ProgressEvent("tests", "0002-x.patch", 2, 4, gate="tests", side="base", done=12, selected=296))
        tell(ProgressEvent("gate-done", x, 2, 4, gate="tests", status="could-not-run", seconds=3))
        tell(ProgressEvent("patch-done", "0002-x.patch", 2, 4, status="incomplete"))
    lines = stream.getvalue().splitlines()
    assert lines[0].endswith("[2/4] 0002-x.patch 测试（基线）：12/296")
    assert lines[1].endswith("[2/4] 0002-x.patch tests：无法运行 (3.0 s)")
    assert lines[2].endswith("[2/4] 0002-x.patch：未完成")


@pytest.mark.parametrize(
    ("args", "env", "coloured"),
    [
        ((), {}, True),
        ((), {"NO_COLOR": "1"}, False),
        (("--color", "never"), {}, False),
        (("--color", "always"), {"NO_COLOR": "1"}, True),  # the option wins, as in ruff
        (("--color=never",), {"FORCE_COLOR": "1"}, False),
    ],
)
def test_colour_on_a_terminal(tmp_path, args, env, coloured):
    out = _on_a_terminal("report", str(_record(tmp_path)), *args, **env)
    assert "Patch" in out
    assert bool(ANSI.search(out)) is coloured, out[:300]


@pytest.mark.parametrize(
    ("args", "env", "coloured"),
    [((), {}, False), (("--color", "always"), {}, True), ((), {"FORCE_COLOR": "1"}, True)],
)
def test_colour_in_a_pipe(tmp_path, args, env, coloured):
    result = _patchkit("report", str(_record(tmp_path)), *args, **env)
    assert bool(ANSI.search(result.stdout)) is coloured


def test_color_is_an_option_of_the_app_and_of_every_command(tmp_path):
    before = _patchkit("--color", "always", "report", str(_record(tmp_path)))
    assert ANSI.search(before.stdout)
    bad = _patchkit("report", str(_record(tmp_path)), "--color", "sometimes")
    assert bad.returncode == 2 and "'sometimes' is not one of 'auto', 'always', 'never'" in bad.stderr


@pytest.mark.parametrize(("typo", "verb"), [("aply", "apply"), ("rport", "report"), ("stauts", "status")])
def test_a_mistyped_command_is_suggested_once(typo, verb):
    result = _patchkit(typo)
    assert result.returncode == 2
    assert result.stderr.count("Did you mean") == 1 and f"Did you mean '{verb}'?" in result.stderr


def test_an_unknown_command_without_a_near_one_says_so_once():
    result = _patchkit("zzzzzz")
    assert result.returncode == 2 and "No such command 'zzzzzz'." in result.stderr
    assert "Did you mean" not in result.stderr


def test_a_narrow_terminal_gets_a_card_per_patch_never_a_cut_name(tmp_path):
    """80 columns hold no table of four gates, the tests and the priority: each patch becomes two
    lines (name, verdict; each gate's sign, tests, priority), names whole, nothing past column 80."""
    narrow = ANSI.sub("", _on_a_terminal("report", str(_record(tmp_path)), COLUMNS="80"))
    lines = narrow.replace("\r", "").splitlines()
    assert "✓ passed  ✗ failed  ! could not run  – skipped" in lines
    assert f" 1 {LONG}  needs work" in lines and "…" not in narrow.split("✓ passed", 1)[1].split("\n\n")[0]
    assert any(line.startswith("   apply ✓  ruff ✗  dco ✓  tests !") for line in lines)
    cards = [line for line in lines if re.match(r" \d |   apply ", line)]
    assert len(cards) == 4 and max(len(line) for line in cards[1:]) <= 80  # the long name's line may wrap
    wide = ANSI.sub("", _on_a_terminal("report", str(_record(tmp_path)), COLUMNS="240"))
    assert "✓ passed" not in wide and any(line.startswith("#   Patch") for line in wide.splitlines())
