"""patchkit rebase: hunk outcomes, conflict stop, --continue and --abort (fixtures in fixtures/rebase)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from patchkit import cli
from patchkit.base.tree import BaseTree
from patchkit.diff.hunks import apply_file_patch
from patchkit.series.files import load_entries, load_split_json

FIXTURES = Path(__file__).parent / "fixtures" / "rebase"


def run_cli(args: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "argv", ["patchkit", *args])
    with pytest.raises(SystemExit) as info:
        cli.main()
    return info.value.code


def rebase_args(series: str, out: Path, *extra: str) -> list[str]:
    return ["rebase", str(FIXTURES / series), "--from-base", str(FIXTURES / "old"),
            "--to-base", str(FIXTURES / "new"), "--out", str(out), *extra]  # fmt: skip


def hunks(report: dict) -> dict[tuple[str, int], dict]:
    return {(h["file"], h["hunk"]): h for p in report["patches"] for h in p["hunks"]}


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_clean_merged_and_already_upstream(tmp_path: Path, monkeypatch, capsys) -> None:
    out, js = tmp_path / "out", tmp_path / "report.json"
    assert run_cli(rebase_args("series-clean", out, "--json", str(js)), monkeypatch) == 0
    report = json.loads(js.read_text())
    by_hunk = hunks(report)
    moved = by_hunk[("vllm/a.py", 1)]
    assert moved["status"] == "clean" and moved["offset"] == 5  # five lines inserted above
    changed = by_hunk[("vllm/b.py", 1)]
    assert changed["status"] == "merged"
    assert changed["mismatch"]["expected"][1] == "y = 2\n" and changed["mismatch"]["found"][1] == "y = 22\n"
    assert by_hunk[("vllm/c.py", 1)]["status"] == "already-upstream"
    assert by_hunk[("vllm/c.py", 2)]["status"] == "clean"
    assert report["counts"] == {"clean": 2, "merged": 1, "already-upstream": 1, "conflict": 0, "resolved": 0}
    stdout = capsys.readouterr().out
    assert "already-upstream" in stdout and "offset +5" in stdout

    series = load_split_json(out)
    assert series.base.path == str((FIXTURES / "new").resolve())
    assert [p.filename for p in series.patches] == [
        "0001-alpha.patch",
        "0002-bravo.patch",
        "0003-charlie.patch",
    ]
    text = (out / "0003-charlie.patch").read_text()
    assert "From: Ann Author <ann@example.com>" in text
    assert "Signed-off-by: Ann Author <ann@example.com>" in text
    # a series patchkit did not write keeps its names, subjects and headers (issue 15)
    assert "Subject: [PATCH] feature flag and eleven" in text and "Patchkit-" not in text
    assert "+FEATURE = True" not in text and "+eleven = 111" in text  # the upstream hunk is dropped
    assert json.loads((out / "rebase.json").read_text())["proof"]["ok"] is True
    assert not (out / ".rebase").exists()

    tree: dict[str, bytes | None] = {}  # the written series applies to the new base in order
    new = BaseTree(FIXTURES / "new")
    for entry in load_entries(out):
        for fp in (fp for p in entry.patches for fp in p.files):
            tree[fp.path] = apply_file_patch(tree.get(fp.path, new.read(fp.path)), fp)
    assert tree["vllm/b.py"] == b"x = 1\ny = 22\nz = 3\nw = 40\nv = 5\nu = 6\nt = 7\n"


def test_all_upstream_patch_is_dropped(tmp_path: Path, monkeypatch) -> None:
    series = tmp_path / "series"
    shutil.copytree(FIXTURES / "series-clean", series)
    new = tmp_path / "new"
    shutil.copytree(FIXTURES / "new", new)
    (new / "vllm" / "a.py").write_text((new / "vllm" / "a.py").read_text().replace("return 2", "return 20"))
    out, js = tmp_path / "out", tmp_path / "report.json"
    args = ["rebase", str(series), "--from-base", str(FIXTURES / "old"), "--to-base", str(new),
            "--out", str(out), "--json", str(js)]  # fmt: skip
    assert run_cli(args, monkeypatch) == 0
    first = json.loads(js.read_text())["patches"][0]
    assert first["status"] == "dropped" and first["hunks"][0]["status"] == "already-upstream"
    assert (out / "series").read_text() == "0002-bravo.patch\n0003-charlie.patch\n"  # its own names


def conflict_run(tmp_path: Path, monkeypatch) -> tuple[Path, dict]:
    out, js = tmp_path / "out", tmp_path / "report.json"
    assert run_cli(rebase_args("series-conflict", out, "--json", str(js)), monkeypatch) == 1
    return out, json.loads(js.read_text())


def test_conflict_reports_three_sides_and_writes_markers(tmp_path: Path, monkeypatch, capsys) -> None:
    out, report = conflict_run(tmp_path, monkeypatch)
    assert report["status"] == "conflict" and report["pending"] == ["0003-bravo.patch"]
    stopped = report["patches"][-1]
    assert stopped["patch"] == "0002-delta.patch" and stopped["conflict_files"] == ["vllm/d.py"]
    (hunk,) = stopped["hunks"]
    assert hunk["status"] == "conflict" and hunk["header"].startswith("@@ -1,4 +1,4 @@")
    assert hunk["conflicts"] == [
        {"old_base": ["LIMIT = 10\n"], "new_base": ["LIMIT = 30\n"], "patch": ["LIMIT = 20\n"]}
    ]
    assert (
        hunk["mismatch"]["expected"][2] == "LIMIT = 10\n" and hunk["mismatch"]["found"][2] == "LIMIT = 30\n"
    )
    assert "closest match" in hunk["mismatch_text"]
    worktree = out / ".rebase" / "worktree"
    marked = (worktree / "vllm" / "d.py").read_text()
    assert (
        "<<<<<<< new base" in marked and "||||||| old base" in marked and ">>>>>>> 0002-delta.patch" in marked
    )
    assert (worktree / ".git").is_dir()
    assert "return 20" in (worktree / "vllm" / "a.py").read_text()  # patch 1 is in the worktree
    assert (out / ".rebase" / "state.json").is_file()
    stdout = capsys.readouterr().out
    assert "CONFLICT in vllm/d.py" in stdout and "LIMIT = 30" in stdout and "LIMIT = 20" in stdout


def test_continue_refused_while_markers_remain(tmp_path: Path, monkeypatch, capsys) -> None:
    out, _ = conflict_run(tmp_path, monkeypatch)
    assert run_cli(["rebase", "--continue", "--out", str(out)], monkeypatch) == 1
    err = capsys.readouterr().err
    assert "conflict markers remain" in err and "vllm/d.py:3" in err
    assert (out / ".rebase" / "state.json").is_file() and not (out / "series").exists()


def test_continue_after_resolution_completes_the_series(tmp_path: Path, monkeypatch) -> None:
    out, _ = conflict_run(tmp_path, monkeypatch)
    resolved = out / ".rebase" / "worktree" / "vllm" / "d.py"
    resolved.write_text('import math\n\nLIMIT = 25\nNAME = "d"\n')
    js = tmp_path / "final.json"
    assert run_cli(["rebase", "--continue", "--out", str(out), "--json", str(js)], monkeypatch) == 0
    assert not (out / ".rebase").exists()
    assert (out / "series").read_text().split() == [
        "0001-alpha.patch",
        "0002-delta.patch",
        "0003-bravo.patch",
    ]
    delta = (out / "0002-delta.patch").read_text()
    assert "-LIMIT = 30" in delta and "+LIMIT = 25" in delta
    report = json.loads(js.read_text())
    assert [p["status"] for p in report["patches"]] == ["rebased", "resolved", "rebased"]
    assert report["counts"]["resolved"] == 1 and report["proof"]["ok"] is True


def test_abort_restores_out_byte_identical(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("keep me\n")
    (out / "old").mkdir()
    (out / "old" / "0001-x.patch").write_bytes(b"previous\n")
    before = snapshot(out)
    assert run_cli(rebase_args("series-conflict", out), monkeypatch) == 1
    (out / ".rebase" / "worktree" / "vllm" / "d.py").write_text("half done\n")
    assert run_cli(["rebase", "--abort", "--out", str(out)], monkeypatch) == 0
    assert snapshot(out) == before


def test_abort_removes_out_that_did_not_exist(tmp_path: Path, monkeypatch) -> None:
    out, _ = conflict_run(tmp_path, monkeypatch)
    assert run_cli(["rebase", "--abort", "--out", str(out)], monkeypatch) == 0
    assert not out.exists()


def test_refuses_new_rebase_while_one_is_in_progress(tmp_path: Path, monkeypatch, capsys) -> None:
    out, _ = conflict_run(tmp_path, monkeypatch)
    assert run_cli(rebase_args("series-conflict", out), monkeypatch) == 2
    assert "rebase is in progress" in capsys.readouterr().err


def test_a_quilt_series_of_user_files_keeps_names_and_headers(tmp_path: Path, monkeypatch) -> None:
    series = tmp_path / "quilt"
    series.mkdir()
    names = []
    for source in sorted((FIXTURES / "series-clean").glob("*.patch")):
        name = source.name.split("-", 1)[1].replace(".patch", ".diff")  # "alpha.diff": no number
        (series / name).write_bytes(source.read_bytes())
        names.append(name)
    (series / "series").write_text("# the fork's own order\n" + "".join(f"{n} -p1\n" for n in names))
    out = tmp_path / "out"
    args = ["rebase", str(series), "--from-base", str(FIXTURES / "old"), "--to-base", str(FIXTURES / "new"),
            "--out", str(out)]  # fmt: skip
    assert run_cli(args, monkeypatch) == 0
    assert (out / "series").read_text().split() == names
    for name in names:
        old, new = (series / name).read_text(), (out / name).read_text()
        assert old.split("\n---\n")[0] == new.split("\n---\n")[0]  # header and message untouched


def test_the_conflict_line_names_only_the_stopped_patchs_files(capsys) -> None:
    """After a --continue carried one conflicted patch, the next stop names its own files only (the
    state's ``conflicts``), not the ones already resolved."""
    from patchkit.rebase.outcome import PatchOutcome, RebaseReport, print_summary
    from patchkit.values import Pin

    pin = Pin(source="path", path="/b")
    first = PatchOutcome("0002-a.patch", "a", "resolved", conflict_files=["vllm/v1/sample/metadata.py"])
    stopped = PatchOutcome("0003-b.patch", "b", "conflict", conflict_files=["vllm/x.py", "vllm/y.py"])
    report = RebaseReport("s", "o", pin, pin, "conflict", [first, stopped], worktree="o/.rebase/worktree")
    print_summary(report, 0.1)
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("CONFLICT in"))
    assert line.startswith("CONFLICT in vllm/x.py, vllm/y.py:") and "metadata.py" not in line
