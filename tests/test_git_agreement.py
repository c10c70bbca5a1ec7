"""Regressions where patchkit read or applied a patch differently from git (issue 15); git is the witness."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchkit import cli
from patchkit.diff.engine import apply_files
from patchkit.diff.parse import parse_text

ENV = {
    **os.environ,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "Ada Author",
    "GIT_AUTHOR_EMAIL": "ada@example.org",
    "GIT_COMMITTER_NAME": "Ada Author",
    "GIT_COMMITTER_EMAIL": "ada@example.org",
}
PARSER = "vllm/tool_parsers/x_tool_parser.py"


def git(args: list[str], cwd: Path, data: bytes | None = None) -> bytes:
    proc = subprocess.run(["git", *args], cwd=cwd, input=data, capture_output=True, env=ENV)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout


def run_cli(args: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "argv", ["patchkit", *args])
    with pytest.raises(SystemExit) as info:
        cli.main()
    return info.value.code


def repo_of(base: Path) -> Path:
    git(["init", "-q", "-b", "main"], base)
    git(["add", "-A"], base)
    git(["commit", "-q", "-m", "base"], base)
    return base


def tree_id(base: Path, patches: list[Path], directory: str | None = None) -> str:
    """git apply --cached of ``patches`` on HEAD of ``base``, then write-tree."""
    env = {**ENV, "GIT_INDEX_FILE": str(base.parent / "witness.index")}
    subprocess.run(["git", "read-tree", "HEAD"], cwd=base, env=env, check=True)
    extra = [f"--directory={directory}"] if directory else []
    subprocess.run(["git", "apply", "--cached", *extra, *map(str, patches)], cwd=base, env=env, check=True)
    return subprocess.run(
        ["git", "write-tree"], cwd=base, env=env, capture_output=True, text=True
    ).stdout.strip()


def test_copy_keeps_its_source_and_the_split_is_witnessed(base_copy, tmp_path, monkeypatch, capsys) -> None:
    base = repo_of(base_copy("base"))
    source = base / PARSER
    (base / "vllm/tool_parsers/y_tool_parser.py").write_text(source.read_text().replace("XTool", "YTool"))
    source.write_text(source.read_text().replace("calls = []", "calls: list[dict] = []"))
    git(["add", "-A"], base)
    git(["commit", "-q", "-m", "copy x to y\n\nSigned-off-by: Ada Author <ada@example.org>"], base)
    mail = git(["format-patch", "-1", "-C", "-C", "--stdout"], base)
    assert b"copy from vllm/tool_parsers/x_tool_parser.py" in mail
    files = parse_text(mail.decode(), "copy.patch")[0].files
    copy = next(fp for fp in files if fp.is_copy)
    assert not copy.is_rename and copy.old_path == PARSER
    git(["checkout", "-q", "HEAD~1"], base)
    before = {p: (base.joinpath(p).read_bytes(), "100644") for p in (PARSER,)}
    after = apply_files(files, lambda p: before.get(p, (None, None))).files
    assert after[PARSER][0] == (base_copy("head") / PARSER).read_bytes().replace(
        b"calls = []", b"calls: list[dict] = []"
    )
    assert b"calls = []" in after["vllm/tool_parsers/y_tool_parser.py"][0]  # copied from the old text
    replay = tmp_path / "copy.patch"
    replay.write_bytes(mail)
    plain = base_copy("plain")
    out = tmp_path / "out"
    assert (
        run_cli(
            ["split", str(replay), "--base", str(plain), "--out", str(out), "--root", ".", "-v"], monkeypatch
        )
        == 0
    )
    record = json.loads((out / "split.json").read_text())["proof"]["git_witness"]
    assert record["ran"] and record["ok"]
    assert record["replay_tree"] == record["series_tree"] == record["patchkit_tree"]
    assert f"git witness: replay tree {record['replay_tree'][:12]}," in capsys.readouterr().out  # -v only


def test_only_new_files_needs_root_and_is_never_rerooted(base_copy, tmp_path, monkeypatch, capsys) -> None:
    replay = tmp_path / "new.diff"
    replay.write_text(
        "diff --git a/vllm/tool_parsers/z_tool_parser.py b/vllm/tool_parsers/z_tool_parser.py\n"
        "new file mode 100644\n--- /dev/null\n+++ b/vllm/tool_parsers/z_tool_parser.py\n"
        "@@ -0,0 +1 @@\n+Z = 1\n"
    )
    base = base_copy("base")
    out = tmp_path / "out"
    assert run_cli(["split", str(replay), "--base", str(base), "--out", str(out)], monkeypatch) == 2
    err = capsys.readouterr().err
    assert "only adds new files" in err and "--root" in err and len(err.strip().splitlines()) == 1
    assert (
        run_cli(["split", str(replay), "--base", str(base), "--out", str(out), "--root", "."], monkeypatch)
        == 0
    )
    series = (out / "series").read_text().split()
    assert "+++ b/vllm/tool_parsers/z_tool_parser.py" in (out / series[0]).read_text()  # not vllm/vllm/


def test_split_of_a_plain_diff_is_taken_by_git_am(base_copy, tmp_path, monkeypatch) -> None:
    base = repo_of(base_copy("base"))
    text = (base / PARSER).read_text()
    (base / PARSER).write_text(text.replace("calls = []", "calls = []  # found"))
    envs = base / "vllm/envs.py"
    envs.write_text(envs.read_text() + "VLLM_X_TOOL_LIMIT = 4\n")
    replay = tmp_path / "plain.diff"
    replay.write_bytes(git(["diff"], base))
    git(["checkout", "-q", "."], base)
    out = tmp_path / "out"
    args = ["split", str(replay), "--base", str(base_copy("plain")), "--out", str(out), "--root", "."]
    assert run_cli([*args, "--author", "Bea Builder <bea@example.org>"], monkeypatch) == 0
    names = (out / "series").read_text().split()
    for name in names:
        text = (out / name).read_text()
        assert "From: Bea Builder <bea@example.org>" in text
        assert "X-Patchkit-Author: supplied by --author" in text and "Signed-off-by" not in text
    git(["am", "-q", *[str(out / n) for n in names]], base)
    assert git(["log", "--format=%an <%ae>", "-1"], base).decode().strip() == "Bea Builder <bea@example.org>"
    assert "# found" in (base / PARSER).read_text() and "VLLM_X_TOOL_LIMIT" in envs.read_text()
    assert run_cli([*args, "--author", "nobody"], monkeypatch) == 2


def test_mismatching_index_line_applies_like_git_everywhere(base_copy, tmp_path, monkeypatch, capsys) -> None:
    base = repo_of(base_copy("base"))
    (base / PARSER).write_text((base / PARSER).read_text().replace("calls = []", "calls = []  # x"))
    patch = git(["diff"], base).replace(b"index ", b"index 1234567..89abcde 100644\n#", 1)
    patch = b"\n".join(ln for ln in patch.split(b"\n") if not ln.startswith(b"#"))
    assert b"index 1234567..89abcde" in patch
    git(["checkout", "-q", "."], base)
    series = tmp_path / "series"
    series.mkdir()
    (series / "0001-x.patch").write_bytes(patch)
    (series / "series").write_text("0001-x.patch\n")
    witness = tree_id(base, [series / "0001-x.patch"])
    strict = ["apply", str(series), "--target", "checkout", "--path", str(base), "--strict-index"]
    assert run_cli(strict, monkeypatch) == 1  # only when asked: the exact preimage
    assert "not the preimage blob 1234567 the patch names" in capsys.readouterr().err
    code = run_cli(["apply", str(series), "--target", "checkout", "--path", str(base)], monkeypatch)
    out = capsys.readouterr().out
    assert code == 0 and "not the preimage blob 1234567" in out
    git(["add", "-A"], base)
    assert git(["write-tree"], base).decode().strip() == witness
    report = tmp_path / "audit.json"
    code = run_cli(["audit", str(series), "--base", str(base_copy("b2")), "--gates", "apply",
                    "--json", str(report)], monkeypatch)  # fmt: skip
    gates = json.loads(report.read_text())["patches"][0]["gates"]
    assert [g["status"] for g in gates if g["gate"] == "apply"] == ["passed"]


IDE = """Subject: [PATCH] tighten the parser
---
Index: vllm/tool_parsers/x_tool_parser.py
IDEA additional info:
Subsystem: com.intellij.openapi.diff.impl.patch.CharsetEP
<+>UTF-8
===================================================================
diff --git a/vllm/tool_parsers/x_tool_parser.py b/vllm/tool_parsers/x_tool_parser.py
--- a/vllm/tool_parsers/x_tool_parser.py\t(revision 0123456789abcdef0123456789abcdef01234567)
+++ b/vllm/tool_parsers/x_tool_parser.py\t(date 1756726212465)
@@ -1,4 +1,4 @@
-import json
+import json  # stdlib
@@BLANK@@
@@BLANK@@
 class XToolParser:
""".replace("@@BLANK@@", " ")


def test_ide_export_subject_then_dashes(base_copy, tmp_path) -> None:
    patches = parse_text(IDE, "ide.patch")
    assert [p.commit.subject for p in patches] == ["tighten the parser"]
    assert [fp.path for fp in patches[0].files] == [PARSER]
    base = repo_of(base_copy("base"))
    (tmp_path / "ide.patch").write_text(IDE)
    git(["apply", "--check", str(tmp_path / "ide.patch")], base)  # git takes it too


def test_cat_of_several_patch_files(base_copy, tmp_path) -> None:
    base = repo_of(base_copy("base"))
    (base / PARSER).write_text((base / PARSER).read_text().replace("import json", "import json  # 1"))
    git(["commit", "-qam", "one"], base)
    first = git(["format-patch", "-1", "--stdout"], base)
    envs = base / "vllm/envs.py"
    envs.write_text(envs.read_text() + "VLLM_TWO = 2\n")
    plain = git(["diff"], base)
    git(["commit", "-qam", "two"], base)
    (base / PARSER).write_text((base / PARSER).read_text().replace("import json  # 1", "import json  # 3"))
    git(["commit", "-qam", "three"], base)
    third = git(["format-patch", "-1", "--stdout"], base)
    together = first.rstrip(b"\n") + b"\n" + plain + third  # ``cat`` keeps no blank line between them
    patches = parse_text(together.decode(), "all.patch")
    assert [p.commit.subject for p in patches] == ["one", "three"]  # the plain diff rides in mail one
    assert [fp.path for p in patches for fp in p.files] == [PARSER, "vllm/envs.py", PARSER]
    git(["reset", "-q", "--hard", "HEAD~3"], base)
    (tmp_path / "all.patch").write_bytes(together)
    ours: dict = {}
    for patch in patches:
        ours.update(
            apply_files(patch.files, lambda p: ours.get(p) or ((base / p).read_bytes(), "100644")).files
        )
    git(["apply", str(tmp_path / "all.patch")], base)
    for path, (data, _) in ours.items():
        assert (base / path).read_bytes() == data
    assert "# 3" in (base / PARSER).read_text() and "VLLM_TWO" in envs.read_text()
    shutil.rmtree(base / ".git")


def test_witness_names_the_first_path_where_git_disagrees(base_copy, tmp_path) -> None:
    from patchkit.base.tree import BaseTree
    from patchkit.diff.parse import parse_files
    from patchkit.split.witness import PendingWitness

    base = repo_of(base_copy("base"))
    (base / PARSER).write_text((base / PARSER).read_text().replace("import json", "import json  # replay"))
    (tmp_path / "replay.diff").write_bytes(git(["diff"], base))
    (base / PARSER).write_text((base / PARSER).read_text().replace("# replay", "# series"))
    (tmp_path / "series.diff").write_bytes(git(["diff", "HEAD"], base))
    git(["checkout", "-q", "."], base)
    tree = BaseTree(base_copy("plain"))
    replay = parse_files([tmp_path / "replay.diff"])
    expected = {
        PARSER: ((base / PARSER).read_bytes().replace(b"import json", b"import json  # replay"), "100644")
    }
    pending = PendingWitness(tree, [tmp_path / "replay.diff"], replay, "")
    pending.start_series([tmp_path / "series.diff"])
    seen = pending.finish(expected)
    assert seen.ran and not seen.ok and seen.first_difference == PARSER
    assert seen.replay_tree == seen.patchkit_tree != seen.series_tree
