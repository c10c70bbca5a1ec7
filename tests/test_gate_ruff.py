import json
import shutil
import subprocess
from pathlib import Path

import pytest
from fixtures.audit.builder import fake_base, file_diff

from patchkit.analysis.undefined import dependency_ruff
from patchkit.audit.gates import PatchUnderAudit, Trees, apply_files
from patchkit.audit.gates.ruff import added_findings, config_paths, ruff_gate
from patchkit.base.tree import BaseTree
from patchkit.diff.parse import parse_text
from patchkit.report.words import gate_summary
from patchkit.tools.ruff_binary import RuffTool
from patchkit.values import Message

needs_ruff = pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff not installed")

BASE = "import os\n\n\ndef f():\n    unused = 1\n    return 2\n"


def _gate(tmp_path, old: str | None, new: str, path="vllm/mod.py"):
    root = fake_base(tmp_path / "base")
    if old is not None:
        (root / path).write_text(old)
    text = file_diff(path, old, new)
    files = parse_text(text, "p.diff")[0].files
    base = BaseTree(root)
    post: dict = {}
    apply_files(files, base.read, post)
    patch = PatchUnderAudit("p.diff", 0, text, files, [None], "calc", {"en": "c"})
    return ruff_gate(patch, Trees(base, {}, post))


@needs_ruff
def test_only_added_findings_count_and_shifted_lines_are_not_new(tmp_path):
    # base already has F401 (os) and F841 (unused); the patch shifts them down and adds one F841
    new = "import os\n\nX = 1\nY = 2\n\n\ndef f():\n    unused = 1\n    other = 3\n    return 2\n"
    result = _gate(tmp_path, BASE, new)
    assert result.status == "failed"
    assert [(f["code"], f["line"]) for f in result.details["findings"]] == [("F841", 9)]
    assert "other" in result.details["findings"][0]["message"]
    assert result.details["configs"] == ["pyproject.toml"]


@needs_ruff
def test_clean_change_passes(tmp_path):
    result = _gate(tmp_path, BASE, BASE.replace("return 2", "return 3"))
    assert result.status == "passed", gate_summary(result)


@needs_ruff
def test_target_config_is_used(tmp_path):
    long_line = "X = '" + "a" * 95 + "'\n"  # 101 columns: over the fixture's line-length 100
    result = _gate(tmp_path, BASE, BASE + long_line)
    assert [f["code"] for f in result.details["findings"]] == ["E501"]


NO_RUFF = RuffTool(None, "", "none", Message("ruff.why.none", {"reason": Message("ruff.why.no-pin", {
    "config": ".pre-commit-config.yaml"}).to_dict()}))  # fmt: skip


def test_whitespace_is_patchkits_own_check_not_ruffs(tmp_path, monkeypatch):
    monkeypatch.setattr("patchkit.audit.gates.ruff.tool_for", lambda trees: NO_RUFF)
    result = _gate(tmp_path, "a = 1\n", "a = 1\nb = 2  \n\n", path="vllm/data.txt")
    codes = sorted((f["code"], f["line"]) for f in result.details["whitespace"])
    assert codes == [("blank-line-at-eof", 3), ("trailing-whitespace", 2)]
    assert result.details["findings"] == []  # none of them is counted as ruff's
    assert result.status == "failed"
    assert "patchkit's own whitespace check (not ruff): 2 on added lines" in gate_summary(result)


def test_no_ruff_is_could_not_run_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr("patchkit.audit.gates.ruff.tool_for", lambda trees: NO_RUFF)
    result = _gate(tmp_path, BASE, BASE.replace("2", "3"))
    assert result.status == "could-not-run"
    assert gate_summary(result) == (
        "no ruff could run: the base's .pre-commit-config.yaml pins no ruff; patchkit's own ruff "
        "dependency is not installed and no ruff is on PATH"
    )


@needs_ruff
def test_the_report_says_which_ruff_ran_and_why(tmp_path):
    result = _gate(tmp_path, BASE, BASE.replace("return 2", "return 3"))
    assert result.details["ruff"]["source"] == "dependency"  # the fixture base pins no ruff
    assert "patchkit's own dependency (the base's .pre-commit-config.yaml pins no ruff)" in gate_summary(
        result
    )


def test_a_pyproject_without_tool_ruff_is_not_a_ruff_config(tmp_path):
    root = fake_base(tmp_path / "base")
    (root / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (root / "vllm" / "pyproject.toml").write_text('[tool.ruff.lint]\nselect = ["E"]\n')
    trees = Trees(BaseTree(root), {}, {})
    assert config_paths(trees, ["vllm/calc.py", "README.md"]) == ["vllm/pyproject.toml"]


def test_added_findings_is_a_multiset_difference():
    key = ("f.py", "F841", "m", "x = 1")
    before = [(key, {"line": 3})]
    after = [(key, {"line": 5}), (key, {"line": 9})]
    assert added_findings(before, after) == [{"line": 9}]


@needs_ruff
def test_isort_sees_the_real_packages(tmp_path):
    """Only touched files are staged for ruff; their packages' __init__.py must come along, or
    isort takes ``vllm`` for a namespace package and reports a false I001 on added imports."""
    root = fake_base(tmp_path / "base")
    (root / "pyproject.toml").write_text('[tool.ruff.lint]\nselect = ["I", "INP"]\n')
    (root / "vllm" / "sub").mkdir()
    (root / "vllm" / "sub" / "__init__.py").write_text("")
    old = "from typing import Any\n\nimport vllm.calc\n"
    new = "from typing import Any\n\nfrom openai import OpenAI\n\nimport vllm.calc\n"
    (root / "vllm" / "sub" / "mod.py").write_text(old)
    text = file_diff("vllm/sub/mod.py", old, new)
    files = parse_text(text, "p.diff")[0].files
    base, post = BaseTree(root), {}
    apply_files(files, base.read, post)
    patch = PatchUnderAudit("p.diff", 0, text, files, [None], "calc", {"en": "c"})
    result = ruff_gate(patch, Trees(base, {}, post))
    assert result.status == "passed", result.details["findings"]


@needs_ruff
def test_first_party_findings_are_exactly_ruffs_on_the_full_patched_tree(tmp_path):
    """A patch touching tests/ that imports ``vllm.assets``: staged alone, ``vllm`` looks third-party
    and isort reports a false I001. The gate must report exactly what ruff on the full patched tree
    reports for the touched files (here: one real I001 and one F401, nothing else)."""
    root = fake_base(tmp_path / "base")
    (root / "pyproject.toml").write_text('[tool.ruff.lint]\nselect = ["I", "F"]\n')
    (root / "vllm" / "assets").mkdir()
    (root / "vllm" / "assets" / "__init__.py").write_text("")
    (root / "vllm" / "assets" / "image.py").write_text("X = 1\n")
    clean = "import pytest\n\nfrom vllm.assets.image import X\n\nprint(pytest, X)\n"
    unsorted = "import sys\nimport os\n\nfrom vllm.assets import image\n\nprint(os, sys, image)\n"
    unused = "import json\n\nfrom vllm.calc import add\n\nprint(add)\n"
    diff = file_diff("tests/test_img.py", None, clean) + file_diff("tests/test_sorted.py", None, unsorted)
    diff += file_diff("tests/test_unused.py", None, unused)
    files = parse_text(diff, "p.diff")[0].files
    base, post = BaseTree(root), {}
    apply_files(files, base.read, post)
    patch = PatchUnderAudit("p.diff", 0, diff, files, [None], "calc", {"en": "c"})
    result = ruff_gate(patch, Trees(base, {}, post))
    gate_found = sorted((f["file"], f["code"], f["line"]) for f in result.details["findings"])

    full = tmp_path / "full"  # the witness: ruff itself on the whole patched tree
    shutil.copytree(root, full)
    for path, data in post.items():
        (full / path).write_bytes(data)
    ruff = result.details["ruff"]
    exe = shutil.which("ruff") if ruff["source"] != "dependency" else dependency_ruff()
    proc = subprocess.run([exe, "check", "--output-format", "json", "--no-cache", "--exit-zero",
                           *sorted(post)], cwd=full, capture_output=True, text=True, check=True)  # fmt: skip
    witness = sorted((Path(f["filename"]).relative_to(full).as_posix(), f["code"], f["location"]["row"])
                     for f in json.loads(proc.stdout))  # fmt: skip
    assert gate_found == witness == [("tests/test_sorted.py", "I001", 1), ("tests/test_unused.py", "F401", 1)]

    partial = tmp_path / "partial"  # what staging only the touched files showed: a false I001
    (partial / "tests").mkdir(parents=True)
    shutil.copy(root / "pyproject.toml", partial)
    (partial / "tests" / "test_img.py").write_bytes(post["tests/test_img.py"])
    args = [exe, "check", "--output-format", "json", "--no-cache", "--exit-zero", "tests/test_img.py"]
    proc = subprocess.run(args, cwd=partial, capture_output=True, text=True, check=True)
    assert [f["code"] for f in json.loads(proc.stdout)] == ["I001"]


def test_the_html_shows_the_whitespace_check_apart_from_ruff(tmp_path, monkeypatch):
    from patchkit.audit.model import AuditResult, PatchAudit
    from patchkit.report.html import render_html
    from patchkit.report.words import fill_words
    from patchkit.values import Pin

    monkeypatch.setattr("patchkit.audit.gates.ruff.tool_for", lambda trees: NO_RUFF)
    gate = _gate(tmp_path, "a = 1\n", "a = 1\nb = 2  \n", path="vllm/data.txt")
    patch = PatchAudit("0001-x.patch", "x", {"en": "x"}, [gate], "needs-work", [])
    result = fill_words(AuditResult("s", Pin(), [patch], "needs-work"))
    html = render_html(result, "en")
    section = html.split("patchkit&#39;s own whitespace check (not ruff)</h4>", 1)[1].split("</table>", 1)[0]
    assert "trailing-whitespace" in section and "vllm/data.txt:2" in section
