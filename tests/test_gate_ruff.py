import shutil

import pytest
from fixtures.audit.builder import fake_base, file_diff

from patchkit.audit.gates import PatchUnderAudit, Trees, apply_files
from patchkit.audit.gates.ruff import added_findings, ruff_gate
from patchkit.base.tree import BaseTree
from patchkit.diff.parse import parse_text
from patchkit.report.words import gate_summary

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


def test_whitespace_and_blank_line_at_eof(tmp_path, monkeypatch):
    monkeypatch.setattr("patchkit.audit.gates.ruff.ruff_command", lambda: None)
    result = _gate(tmp_path, "a = 1\n", "a = 1\nb = 2  \n\n", path="vllm/data.txt")
    codes = sorted((f["code"], f["line"]) for f in result.details["findings"])
    assert codes == [("blank-line-at-eof", 3), ("trailing-whitespace", 2)]
    assert result.status == "failed"


def test_no_ruff_is_could_not_run(tmp_path, monkeypatch):
    monkeypatch.setattr("patchkit.audit.gates.ruff.ruff_command", lambda: None)
    result = _gate(tmp_path, BASE, BASE.replace("2", "3"))
    assert result.status == "could-not-run" and "not installed" in gate_summary(result)


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
