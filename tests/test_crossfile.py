"""Every prefix of a split imports and calls its own package: cross-file names, one fixture per shape.

Each fixture puts a use (a line naming USE) in the first domain and what it needs in the second,
so a split that only keeps definitions with their uses inside one file leaves state 1 broken. Each
test shows that (the cross-file pass switched off) and that the split now resolves it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from patchkit.base.tree import BaseTree
from patchkit.diff.hunks import apply_file_patch
from patchkit.diff.model import Replay
from patchkit.diff.parse import parse_text
from patchkit.split import replay as replay_module
from patchkit.split.prefix import check_states
from patchkit.split.rules import parse_rules

RULES = r"""
[[domain]]
name = "early"
  [[domain.match]]
  paths = ['pkg/**']
  patterns = ['USE']

[[domain]]
name = "late"
paths = ['pkg/**']
"""
SPLIT_RULES = r"""
[[domain]]
name = "first"
  [[domain.match]]
  paths = ['pkg/**']
  patterns = ['FIRST']

[[domain]]
name = "second"
  [[domain.match]]
  paths = ['pkg/**']
  patterns = ['SECOND']
"""


def _split(tmp_path: Path, base: dict[str, str], final: dict[str, str], rules: str = RULES):
    for side, files in (("a", base), ("b", final)):
        for path, text in files.items():
            (tmp_path / side / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / side / path).write_text(text)
    diff = subprocess.run(["git", "diff", "--no-index", "a", "b"], cwd=tmp_path, capture_output=True).stdout
    text = diff.decode().replace("a/a/", "a/").replace("b/b/", "b/")
    replay = Replay(patches=parse_text(text, "r.diff"), sources=["r.diff"])
    tree = BaseTree(tmp_path / "a")
    result = replay_module.split_replay(replay, tree, parse_rules(rules, "rules.toml"), "")
    states, files = [], {}
    for patch in result.series.patches:
        for fp in patch.files:
            old = None
            if fp.old_path:
                old = files[fp.old_path] if fp.old_path in files else tree.read(fp.old_path)
            if fp.old_path and fp.old_path != fp.new_path:
                files[fp.old_path] = None
            if fp.new_path:
                files[fp.new_path] = apply_file_patch(old, fp)
        states.append((patch.filename, dict(files)))
    final_files = {p: t.encode() for p, t in final.items()}
    return result, check_states(tree, states, final_files)


def _both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, base, final, rules: str = RULES):
    """(prefix check without the cross-file pass, the split and prefix check with it)."""
    with monkeypatch.context() as m:
        m.setattr(replay_module, "resolve", lambda base, blocks, order, state_of, **_: (order, [], []))
        old_result, old = _split(tmp_path / "old", base, final, rules)
    result, new = _split(tmp_path / "new", base, final, rules)
    return (old_result, old) if rules is not RULES else old, result, new


INIT = {"pkg/__init__.py": ""}


def test_new_module(tmp_path, monkeypatch) -> None:
    base = {**INIT, "pkg/a.py": "X = 1\n"}
    final = {**INIT, "pkg/a.py": "from pkg.helpers import H  # USE\n\nX = H\n",
             "pkg/helpers.py": "H = 1\n"}  # fmt: skip
    old, result, new = _both(tmp_path, monkeypatch, base, final)
    assert [(f["kind"], f["name"]) for f in old.failures] == [("module", "pkg.helpers")]
    assert new.ok and new.states >= 1
    assert any(r["step"] == "move" and r["name"] == "pkg.helpers" for r in result.series.resolutions)


def test_new_envs_name(tmp_path, monkeypatch) -> None:
    envs = ("environment_variables = {\n    \"PKG_A\": lambda: 1,\n{new}}\n\n\n"
            "def __getattr__(name):\n    return environment_variables[name]()\n")  # fmt: skip
    base = {**INIT, "pkg/envs.py": envs.replace("{new}", ""), "pkg/a.py": "from pkg import envs\n"}
    final = {**INIT, "pkg/envs.py": envs.replace("{new}", '    "PKG_NEW": lambda: 2,\n'),
             "pkg/a.py": "from pkg import envs\n\nX = envs.PKG_NEW  # USE\n"}  # fmt: skip
    old, result, new = _both(tmp_path, monkeypatch, base, final)
    assert [(f["name"], f["target"]) for f in old.failures] == [("PKG_NEW", "pkg.envs")]
    assert new.ok, new.failures


def test_new_dataclass_field_used_as_keyword(tmp_path, monkeypatch) -> None:
    cfg = "from dataclasses import dataclass\n\n\n@dataclass\nclass Cfg:\n    a: int = 0\n"
    base = {**INIT, "pkg/config.py": cfg, "pkg/a.py": "from pkg.config import Cfg\n"}
    final = {**INIT, "pkg/config.py": cfg + "    b: int = 0\n",
             "pkg/a.py": "from pkg.config import Cfg\n\nC = Cfg(a=1, b=2)  # USE\n"}  # fmt: skip
    old, result, new = _both(tmp_path, monkeypatch, base, final)
    assert [(f["kind"], f["name"], f["target"]) for f in old.failures] == [("keyword", "b", "pkg.config.Cfg")]
    assert new.ok, new.failures


def test_new_class_attribute(tmp_path, monkeypatch) -> None:
    cls = "class Limits:\n    SOFT = 1\n"
    base = {**INIT, "pkg/limits.py": cls, "pkg/a.py": "from pkg.limits import Limits\n"}
    final = {**INIT, "pkg/limits.py": cls + "    HARD = 2\n",
             "pkg/a.py": "from pkg.limits import Limits\n\nX = Limits.HARD  # USE\n"}  # fmt: skip
    old, result, new = _both(tmp_path, monkeypatch, base, final)
    assert [(f["name"], f["target"]) for f in old.failures] == [("HARD", "pkg.limits.Limits")]
    assert new.ok, new.failures


def test_a_local_split_inside_one_function_is_merged(tmp_path, monkeypatch) -> None:
    # first takes ``result = g(x)`` (and the removed return), second the lines using and returning
    # it: state 1 would be a function that returns None
    base = {**INIT, "pkg/a.py": "def f(x):\n    return g(x)\n\n\ndef g(x):\n    return x\n"}
    final = {**INIT, "pkg/a.py": "def f(x):\n    result = g(x)  # FIRST\n    print(result)  # SECOND\n"
             "    return result\n\n\ndef g(x):\n    return x\n"}  # fmt: skip
    (old_result, _), result, new = _both(tmp_path, monkeypatch, base, final, SPLIT_RULES)
    old_first = old_result.texts[old_result.series.patches[0].filename]
    assert "+    result = g(x)" in old_first and "+    return result" not in old_first  # returns None
    assert [p.domain for p in result.series.patches] == ["first"]  # the function's change is one patch
    text = result.texts[result.series.patches[0].filename]
    assert "+    result = g(x)" in text and "+    return result" in text and "-    return g(x)" in text
    assert [(r["step"], r["name"]) for r in result.series.resolutions] == [("merge", "result")]


def test_a_cycle_forces_a_merge(tmp_path, monkeypatch) -> None:
    # early's a.py imports NEW, which late's b.py defines as Cfg(b=EARLY): moving it to early needs
    # late's new field b (no better), putting late first needs early's EARLY (no better either)
    cfg = "from dataclasses import dataclass\n\n\n@dataclass\nclass Cfg:\n    a: int = 0\n"
    base = {**INIT, "pkg/a.py": "A = 1\n", "pkg/b.py": "from pkg.c import Cfg\n", "pkg/c.py": cfg}
    final = {**INIT, "pkg/a.py": "from pkg.b import NEW  # USE\n\nA = 1\nEARLY = 2  # USE\n",
             "pkg/b.py": "from pkg.c import Cfg\nfrom pkg.a import EARLY\n\nNEW = Cfg(b=EARLY)\n",
             "pkg/c.py": cfg + "    b: int = 0\n"}  # fmt: skip
    old, result, new = _both(tmp_path, monkeypatch, base, final)
    assert [f["name"] for f in old.failures] == ["NEW"]
    assert new.ok, new.failures
    assert [(r["step"], r["file"], r["domain"]) for r in result.series.resolutions] == [
        ("merge", "pkg/a.py", "late")
    ]
    assert [p.domain for p in result.series.patches] == ["late"]


def test_an_import_of_a_name_defined_nowhere_is_the_replays_finding(tmp_path, monkeypatch) -> None:
    base = {**INIT, "pkg/a.py": "A = 1\n", "pkg/b.py": "B = 1\n"}
    final = {**INIT, "pkg/a.py": "from pkg.b import GHOST  # USE\n\nA = 1\n", "pkg/b.py": "B = 2\n"}
    old, result, new = _both(tmp_path, monkeypatch, base, final)
    assert new.ok  # not the split's doing ...
    assert [(f["name"], f["target"]) for f in new.replay_findings] == [("GHOST", "pkg.b")]  # ... the replay's


def test_needs_first_is_the_smallest_set_not_the_first_found() -> None:
    from patchkit.analysis.depends import _drop_one_by_one, minimal_needs

    def applies(subset: list[str]) -> bool:  # a patch that applies on A+B, or on C alone
        return {"A", "B"} <= set(subset) or set(subset) == {"C"}

    assert _drop_one_by_one(["A", "B", "C"], applies) == ["A", "B"]  # the greedy answer over-reports
    assert minimal_needs(["A", "B", "C"], applies) == ["C"]
    assert minimal_needs(["A"], lambda s: True) == []


def test_a_semantic_need_is_recorded_and_the_apply_gate_says_needs_first(tmp_path, monkeypatch) -> None:
    from patchkit.audit.gates import PatchUnderAudit, SeriesState
    from patchkit.audit.gates.apply import apply_gate

    # a use that no step can fix (its definer's line needs what the user's file adds) stays a need
    def keep(base, blocks, order, state_of, **_):
        from patchkit.analysis.static import Problem
        from patchkit.split.crossfile import Need

        return order, [], [Need("early", "late", Problem("pkg/a.py", 1, "name", "H", "pkg.h"))]

    monkeypatch.setattr(replay_module, "resolve", keep)
    base = {**INIT, "pkg/a.py": "X = 1\n", "pkg/h.py": "Y = 1\n"}
    final = {**INIT, "pkg/a.py": "from pkg.h import H  # USE\n\nX = H\n", "pkg/h.py": "Y = 1\nH = 2\n"}
    result, _ = _split(tmp_path, base, final)
    early, late = result.series.patches
    assert late.depends_on == [] and early.depends_on == ["late"]  # as the split recorded it
    assert "pkg.h has no name 'H'" in early.needs_why["late"]
    patch = PatchUnderAudit("0001-early.patch", 0, "", early.files, [], "early", {}, ["0002-late.patch"],
                            needs_why={"0002-late.patch": early.needs_why["late"]})  # fmt: skip
    gate = apply_gate(BaseTree(tmp_path / "a"), patch, [], SeriesState({}, {}, None))
    assert gate.details["alone"] == "applies"  # textually it does ...
    assert gate.message.key == "gate.apply.needs-why" and gate.details["needs"] == ["0002-late.patch"]
