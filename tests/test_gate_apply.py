from fixtures.audit.builder import fake_base, file_diff

from patchkit.audit.gates import PatchUnderAudit
from patchkit.audit.gates.apply import apply_gate, series_states
from patchkit.audit.needs import needed_patches
from patchkit.base.tree import BaseTree
from patchkit.diff.parse import parse_text
from patchkit.report.words import gate_summary

CALC = (fake_base.__globals__["FAKE_TREE"] / "vllm" / "calc.py").read_text()


def _patch(name, index, text):
    files = [fp for p in parse_text(text, name) for fp in p.files]
    return PatchUnderAudit(name, index, text, files, [None], "calc", {"en": "c"})


def _series(tmp_path):
    base = BaseTree(fake_base(tmp_path / "base"))
    one = CALC.replace("return a + b", "return b + a")
    two = one.replace("return b + a", "return int(b + a)")
    bad = CALC.replace("return x * 2", "return x * 3").replace("def scale", "def scale_")
    p1 = _patch("0001-a.patch", 0, file_diff("vllm/calc.py", CALC, one))
    p2 = _patch("0002-b.patch", 1, file_diff("vllm/calc.py", one, two))
    p3 = _patch("0003-c.patch", 2, file_diff("vllm/calc.py", CALC.replace("import os", "import sys"), bad))
    return base, [p1, p2, p3]


def test_alone_in_series_and_needs(tmp_path):
    base, patches = _series(tmp_path)
    states = series_states(base, patches)
    first = apply_gate(base, patches[0], [], states[0])
    assert first.status == "passed" and first.details["needs"] == []
    second = apply_gate(base, patches[1], patches[:1], states[1])
    assert second.status == "passed" and second.details["alone"] == "does not apply"
    assert gate_summary(second) == "applies in series; needs 0001-a.patch first"
    third = apply_gate(base, patches[2], patches[:2], states[2])
    assert third.status == "failed" and "does not apply" in gate_summary(third)
    assert needed_patches(base, patches[1], patches[:1]) == ["0001-a.patch"]


def test_declared_needs_from_split_json_win(tmp_path):
    base, patches = _series(tmp_path)
    patches[1].declared_needs = ["0001-a.patch"]
    result = apply_gate(base, patches[1], patches[:1], series_states(base, patches)[1])
    assert result.details["needs_from"] == "split.json"
