"""Issue 14, output side: split, reports and JSON are written whole or not at all, split removes
only its own files, hostile input is one line, rebase needs evidence, caches and subprocesses
cannot outlive the code or hang. One regression test per item of the issue."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_journal import invoke, make_checkout

from patchkit import cache, git
from patchkit.diff.filediff import parse_diff
from patchkit.diff.parse import parse_text
from patchkit.errors import CheckFailed
from patchkit.rebase.merge import classify_hunk

REPORTS = Path(__file__).parent / "fixtures" / "report"


@pytest.fixture(autouse=True)
def _away_from_any_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def _split(fixtures: Path, replays: list[Path], out: Path, *more: str) -> tuple[int, str]:
    return invoke("split", *map(str, replays), "--base", str(fixtures / "base"), "--out", str(out), *more)


def _cli_with_file_limit(args: list[str], limit: int, cwd: Path) -> subprocess.CompletedProcess:
    """patchkit in a child whose files may not grow past ``limit`` bytes: a full disk, as a write sees it."""

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [sys.executable, "-m", "patchkit", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        preexec_fn=limited,
        timeout=120,
    )


# 4 -----------------------------------------------------------------------------------------------


def test_item04_split_refuses_an_out_holding_its_inputs(fixtures: Path, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    for n in range(1, 4):
        shutil.copy(fixtures / "replays/tangled.mbox", mine / f"{n:04d}-step.patch")
    before = {p.name: p.read_bytes() for p in mine.iterdir()}
    code, out = _split(fixtures, sorted(mine.iterdir())[:1], mine)
    assert code == 2 and "holds the input" in out, out
    assert {p.name: p.read_bytes() for p in mine.iterdir()} == before


def test_item04_split_removes_only_files_it_wrote(fixtures: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _split(fixtures, [fixtures / "replays/tangled.mbox"], out)[0] == 0
    ours = sorted(p.name for p in out.glob("*.patch"))
    mine = out / "0099-mine.patch"
    mine.write_text("my own notes\n")
    (out / ours[0]).unlink()  # a file of ours the user removed: no complaint
    assert _split(fixtures, [fixtures / "replays/tangled-pkg.mbox"], out, "--replace")[0] == 0
    assert mine.read_text() == "my own notes\n"
    listed = (out / "series").read_text().split()
    assert all((out / name).is_file() for name in listed)


def test_item04_a_crashing_split_keeps_the_previous_series(
    fixtures: Path, tmp_path: Path, monkeypatch
) -> None:
    out = tmp_path / "out"
    assert _split(fixtures, [fixtures / "replays/tangled.mbox"], out)[0] == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    import patchkit.commands.split as split_command

    def boom(*args, **kwargs):
        raise KeyboardInterrupt  # the user's ^C, or a crash, in the middle of the split

    monkeypatch.setattr(split_command, "prove", boom)
    (one,) = (fixtures / "replays/tangled-items").glob("0002-*.patch")  # a smaller series
    try:
        code, _ = _split(fixtures, [one], out, "--replace")
    except KeyboardInterrupt:
        code = 130
    assert code != 0
    after = {p.name: p.read_bytes() for p in out.iterdir()}
    assert set(before) <= set(after)  # nothing of the previous series removed
    assert all(name in after for name in after["series"].decode().split())
    assert all(p["filename"] in after for p in json.loads(after["split.json"])["patches"])


# 5 -----------------------------------------------------------------------------------------------


def test_item05_full_disk_split_keeps_the_previous_series(fixtures: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert _split(fixtures, [fixtures / "replays/tangled.mbox"], out)[0] == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    args = [  # another replay: an identical series is now not written again at all (nothing changes)
        "split",
        str(fixtures / "replays/tangled-pkg.mbox"),
        "--base",
        str(fixtures / "base"),
        "--out",
        str(out),
        "--replace",
    ]
    proc = _cli_with_file_limit(args, 3000, tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "previous version is kept" in proc.stderr + proc.stdout
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nothing truncated, no temp left


def test_item05_full_disk_report_and_apply_json(tmp_path: Path) -> None:
    html = tmp_path / "r.html"
    html.write_text("previous report\n")
    proc = _cli_with_file_limit(
        ["report", str(REPORTS / "audit_small.json"), "--html", str(html)], 4096, tmp_path
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert html.read_text() == "previous report\n" and os.listdir(tmp_path) == ["r.html"]
    tree, series = make_checkout(tmp_path)
    js = tmp_path / "apply.json"
    js.write_text("{}\n")
    args = ["apply", str(series), "--target", "checkout", "--path", str(tree), "--check", "--json", str(js)]
    proc = _cli_with_file_limit(args, 300, tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert js.read_text() == "{}\n"


# 6 (split, audit) --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["vllm/a\\000b.py", "vllm/" + "a" * 300 + ".py", "vllm/d/e"], ids=["nul", "long", "file-as-dir"]
)
def test_item06_split_hostile_paths_are_one_line(fixtures: Path, tmp_path: Path, path: str) -> None:
    quoted = f'"b/{path}"' if "\\" in path else f"b/{path}"
    new_file = "new file mode 100644\n--- /dev/null\n"
    diff = f"diff --git a/{path} b/{path}\n{new_file}+++ {quoted}\n@@ -0,0 +1 @@\n+x\n"
    if path.endswith("d/e"):  # the same replay creates vllm/d as a file
        diff = f"diff --git a/vllm/d b/vllm/d\n{new_file}+++ b/vllm/d\n@@ -0,0 +1 @@\n+x\n" + diff
    replay = tmp_path / "hostile.patch"
    replay.write_text(f"From: Dev <d@example.com>\nSubject: [PATCH] x\n\n{diff}")
    code, out = _split(fixtures, [replay], tmp_path / "out")
    assert code == 2 and "Traceback" not in out and len(out.strip().splitlines()) == 1, out


def test_item06_non_utf8_from_is_printable(fixtures: Path, tmp_path: Path) -> None:
    replay = tmp_path / "latin1.patch"
    text = (fixtures / "replays/tangled.mbox").read_bytes().replace(b"From: ", b"From: J\xe9r\xf4me \xff ", 1)
    replay.write_bytes(text)
    (patch, *_) = parse_text(text.decode("utf-8", errors="surrogateescape"), "latin1.patch")
    patch.commit.author.encode("utf-8")  # no lone surrogates left to crash a writer
    code, out = _split(fixtures, [replay], tmp_path / "out")
    assert code == 0 and "Traceback" not in out, out


def test_item06_split_out_naming_a_file(fixtures: Path, tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("mine\n")
    code, out = _split(fixtures, [fixtures / "replays/tangled.mbox"], tmp_path / "taken")
    assert code == 2 and "is a file" in out and (tmp_path / "taken").read_text() == "mine\n"


# 10 ----------------------------------------------------------------------------------------------


def test_item10_markdown_escapes_gate_names_in_the_table_header() -> None:
    from patchkit.audit.model import AuditResult
    from patchkit.report.markdown import render_markdown

    result = AuditResult.from_dict(json.loads((REPORTS / "audit_small.json").read_text("utf-8")))
    result.patches[0].gates[0].gate = "<img src=x onerror=alert(1)>|x"
    text = render_markdown(result, "en")
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;\\|x" in text


# 11 ----------------------------------------------------------------------------------------------

_FILLER = "".join(f"# filler {n}\n" for n in range(36))


def _hunk_for_f():
    diff = (
        "--- a/m.py\n+++ b/m.py\n@@ -2,3 +2,3 @@ def f():\n     x = 1\n-    y = 2\n+    y = 20\n     z = 3\n"
    )
    return parse_diff(diff.splitlines(), "m.patch")[0].hunks[0]


def test_item11_same_lines_in_another_function_are_no_evidence() -> None:
    old = f"def f():\n    x = 1\n    y = 2\n    z = 3\n{_FILLER}def g():\n    x = 1\n    y = 20\n    z = 3\n"
    new = old.replace("def f():\n    x = 1\n", "def f():\n    x = 10\n")  # upstream changed f only
    outcome = classify_hunk("m.py", 0, _hunk_for_f(), old.encode(), new.splitlines(keepends=True))
    assert outcome.status != "already-upstream", outcome.note


def test_item11_already_upstream_at_its_place_shows_evidence() -> None:
    old = f"def f():\n    x = 1\n    y = 2\n    z = 3\n{_FILLER}def g():\n    pass\n"
    new = "# upstream added a header line\n" + old.replace("y = 2", "y = 20")
    outcome = classify_hunk("m.py", 0, _hunk_for_f(), old.encode(), new.splitlines(keepends=True))
    assert outcome.status == "already-upstream"
    assert "at lines 3-5 (in def f():)" in outcome.note and "4:     y = 20" in outcome.evidence


# 13 ----------------------------------------------------------------------------------------------


def test_item13_cached_results_do_not_survive_an_upgrade(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    cache.put_json("audit-gate", "k1", {"status": "passed"})
    assert cache.get_json("audit-gate", "k1") == {"status": "passed"}
    monkeypatch.setattr(cache, "__version__", "99.0")  # another patchkit
    cache.code_identity.cache_clear()
    try:
        assert cache.get_json("audit-gate", "k1") is None
    finally:
        cache.code_identity.cache_clear()


# 14 ----------------------------------------------------------------------------------------------


def _sleeper(tmp_path: Path, name: str) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    tool = bindir / name
    tool.write_text("#!/bin/sh\nsleep 30\n")
    tool.chmod(0o755)
    return tool


def test_item14_a_hanging_git_times_out_in_one_line(tmp_path: Path, monkeypatch) -> None:
    _sleeper(tmp_path, "git")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("PATCHKIT_GIT_TIMEOUT", "0.5")
    with pytest.raises(CheckFailed, match=r"git fetch timed out after 0.5 s"):
        git.run(["fetch", "-q", "https://example.invalid/repo.git", "main"], tmp_path)


def test_item14_a_hanging_interpreter_times_out_in_one_line(tmp_path: Path, monkeypatch) -> None:
    from patchkit.apply import sitepackages

    python = _sleeper(tmp_path, "python3")
    monkeypatch.setattr(sitepackages, "QUERY_TIMEOUT", 0.5)
    code, out = invoke("apply", "--target", "site-packages", "--python", str(python), "--check")
    assert code == 1 and "did not list its distributions within 0.5 s" in out and "Traceback" not in out, out
