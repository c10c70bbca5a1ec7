"""A patch's needs are what it needs to *work*, not only to apply; and no prefix is left unparsable
by a statement cut between two domains.

The shapes are real (a partial pick of vLLM 0.34.0: a new ``vllm/v1/token_buffer.py`` in patch 1,
its importers in patches 2 and 3, declared needs none; opt21-25: ``scheduler.py`` reads a name
another patch's hunk binds far above; 1Cat-vLLM v1.2.1..v1.2.2: ``if (`` turned into ``x = (`` by
one commit and the condition rewritten by another). The fixtures are ours. Every claim is checked
by a witness outside patchkit: ``git apply`` builds the patch's own state (base + its needs + it),
then a real ``import`` or ruff itself judges it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fixtures.audit.builder import fake_base, file_diff, patch_text, write_series
from typer.testing import CliRunner

from patchkit.analysis.depends import compute_dependencies
from patchkit.base.tree import BaseTree
from patchkit.cli import app
from patchkit.diff.model import Replay
from patchkit.diff.parse import parse_text
from patchkit.split import replay as replay_module
from patchkit.split.rules import parse_rules

RUFF = shutil.which("ruff")
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
INIT = {"pkg/__init__.py": ""}


def _write(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)


def _split(tmp_path: Path, base: dict[str, str], final: dict[str, str]):
    _write(tmp_path / "a", base)
    _write(tmp_path / "b", final)
    diff = subprocess.run(["git", "diff", "--no-index", "a", "b"], cwd=tmp_path, capture_output=True).stdout
    text = diff.decode().replace("a/a/", "a/").replace("b/b/", "b/")
    replay = Replay(patches=parse_text(text, "r.diff"), sources=["r.diff"])
    tree = BaseTree(tmp_path / "a")
    result = replay_module.split_replay(replay, tree, parse_rules(RULES, "rules.toml"), "")
    compute_dependencies(tree, result.series.patches, result.overlays)
    result.finish()
    return result, tree


def _state(tmp_path: Path, base: dict[str, str], patches: list[str], name: str) -> Path:
    """base + patches, built by git apply in a fresh directory (the witness's own tree)."""
    where = tmp_path / name
    _write(where, base)
    for i, text in enumerate(patches):
        patch = tmp_path / f"{name}-{i}.diff"
        patch.write_text(text)
        proc = subprocess.run(["git", "apply", "--unsafe-paths", str(patch)], cwd=where, capture_output=True)
        assert proc.returncode == 0, proc.stderr.decode()
    return where


def _imports(where: Path, module: str) -> bool:
    return (
        subprocess.run([sys.executable, "-c", f"import {module}"], cwd=where, capture_output=True).returncode
        == 0
    )


def test_a_patch_that_imports_a_module_an_earlier_patch_creates_needs_it(tmp_path):
    base = {**INIT, "pkg/user.py": "VALUE = 1\n"}
    final = {
        **INIT,
        "pkg/buf.py": "SIZE = 4  # USE\n",
        "pkg/user.py": "from pkg.buf import SIZE\n\nVALUE = SIZE\n",
    }
    result, _ = _split(tmp_path, base, final)
    early, late = result.series.patches
    assert [p.domain for p in (early, late)] == ["early", "late"]
    assert late.depends_on == ["early"], late.depends_on
    assert "imports pkg.buf, which does not exist" in late.needs_why["early"]
    # the witness: late alone does not import; with its declared needs first it does
    alone = _state(tmp_path, base, [result.texts[late.filename]], "alone")
    assert not _imports(alone, "pkg.user")
    needed = _state(tmp_path, base, [result.texts[early.filename], result.texts[late.filename]], "needs")
    assert _imports(needed, "pkg.user")


@pytest.mark.skipif(RUFF is None, reason="ruff (a patchkit dependency) is not on PATH")
def test_a_patch_that_reads_a_name_an_earlier_patch_binds_far_above_needs_it(tmp_path):
    filler = "".join(f"\n\ndef f{i}():\n    return {i}\n" for i in range(12))  # the two hunks stay apart
    base = {**INIT, "pkg/m.py": "X = 1\n" + filler + "\n\ndef g():\n    return X\n"}
    final = {
        **INIT,
        "pkg/m.py": "import json  # USE\n\nX = 1\n" + filler + "\n\ndef g():\n    return json.dumps(X)\n",
    }
    result, _ = _split(tmp_path, base, final)
    early, late = result.series.patches
    assert late.depends_on == ["early"], late.depends_on
    assert "name 'json' is undefined" in late.needs_why["early"]
    # ruff itself, on late's own state built by git: F821 alone, clean with its needs first
    alone = _state(tmp_path, base, [result.texts[late.filename]], "alone")
    needed = _state(tmp_path, base, [result.texts[early.filename], result.texts[late.filename]], "needs")
    found = []
    for where in (alone, needed):
        argv = [RUFF, "check", "--isolated", "--no-cache", "--select", "F821", "--output-format", "json"]
        proc = subprocess.run([*argv, "--exit-zero", "pkg/m.py"], cwd=where, capture_output=True, text=True)
        found.append([f["message"] for f in json.loads(proc.stdout)])
    assert found[0] and "json" in found[0][0] and found[1] == []


def test_a_statement_cut_between_two_domains_goes_whole_to_one(tmp_path):
    other = {"pkg/other.py": "def h():\n    return 1\n"}  # a change of the late domain's own elsewhere
    old = "def f(a, b):\n    if (\n        a\n        and b\n    ):\n        return 1\n    return 0\n"
    base = {**INIT, **other, "pkg/m.py": old}
    new = "def f(a, b):\n    cand = (\n        a\n        and b\n    )\n"
    new += "    if cand:  # USE\n        return 1\n"
    final = {**INIT, "pkg/other.py": "def h():\n    return 2\n", "pkg/m.py": new + "    return 0\n"}
    result, _ = _split(tmp_path, base, final)
    assert len(result.series.patches) == 2
    assert any(r["kind"] == "syntax" and r["step"] == "merge" for r in result.series.resolutions)
    # the witness: every prefix state git builds compiles
    texts = [result.texts[p.filename] for p in result.series.patches]
    for k in range(1, len(texts) + 1):
        where = _state(tmp_path, base, texts[:k], f"prefix{k}")
        proc = subprocess.run([sys.executable, "-c", "import ast; ast.parse(open('pkg/m.py').read())"],
                              cwd=where, capture_output=True, text=True)  # fmt: skip
        assert proc.returncode == 0, (k, proc.stderr)


def test_the_audit_grows_a_hand_made_series_needs_and_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    base = fake_base(tmp_path / "base")
    calc = (base / "vllm" / "calc.py").read_text()
    buffer = file_diff("vllm/buf.py", None, "SIZE = 4\n")
    user = file_diff("vllm/calc.py", calc, "from vllm.buf import SIZE\n" + calc)
    series = write_series(tmp_path / "series", {"0001-buf.patch": patch_text(buffer),
                                                 "0002-user.patch": patch_text(user)})  # fmt: skip
    out = tmp_path / "a.json"
    args = ["audit", str(series), "--base", str(base), "--gates", "apply", "--json", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    gates = {p["patch"]: p["gates"][0] if isinstance(p["gates"], list) else p["gates"]["apply"]
             for p in json.loads(out.read_text())["patches"]}  # fmt: skip
    user_gate = gates["0002-user.patch"]["details"]
    assert user_gate["alone"] == "applies"  # textually it does; it does not work alone
    assert user_gate["needs"] == ["0001-buf.patch"] and user_gate["needs_from"] == "computed + working"
    assert "imports vllm.buf, which does not exist" in user_gate["needs_why"]["0001-buf.patch"]
    assert gates["0001-buf.patch"]["details"]["needs"] == []


def _audit_needs(tmp_path, base: dict[str, str], patches: list[dict[str, str | None]]) -> dict:
    """A hand-made series (each patch: path -> new text, on the state before it), audited with the
    apply gate; each patch's details by name."""
    root = tmp_path / "base"
    _write(root, base)
    state, texts = dict(base), {}
    for i, change in enumerate(patches, 1):
        diff = "".join(file_diff(p, state.get(p), t) for p, t in change.items())
        state.update(change)
        texts[f"000{i}-p{i}.patch"] = patch_text(diff)
    series = write_series(tmp_path / "series", texts)
    out = tmp_path / "a.json"
    result = CliRunner().invoke(
        app, ["audit", str(series), "--base", str(root), "--gates", "apply", "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    return {p["patch"]: (p["gates"][0] if isinstance(p["gates"], list) else p["gates"]["apply"])["details"]
            for p in json.loads(out.read_text())["patches"]}  # fmt: skip


def test_needs_cover_other_top_level_packages_module_attributes_and_keywords(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    base = {**INIT, "app/__init__.py": "", "app/x.py": "V = 1\n", "pkg/m.py": "def f():\n    return 1\n",
            "pkg/u.py": "U = 1\n", "pkg/w.py": "W = 1\n"}  # fmt: skip
    details = _audit_needs(tmp_path, base, [
        {"pkg/buf.py": "SIZE = 4\n"},  # a module another top-level package imports
        {"app/x.py": "from pkg.buf import SIZE\n\nV = SIZE\n"},
        {"pkg/m.py": "NEW = 2\n\n\ndef f(kw=0):\n    return kw\n"},
        {"pkg/u.py": "import pkg.m\n\nU = pkg.m.NEW\n"},  # an attribute through ``import pkg.m``
        {"pkg/w.py": "from pkg import m\n\nW = m.f(kw=1)\n"},  # a keyword through a module
    ])  # fmt: skip
    assert details["0002-p2.patch"]["needs"] == ["0001-p1.patch"]
    assert details["0004-p4.patch"]["needs"] == ["0003-p3.patch"]
    assert "pkg.m has no name 'NEW'" in details["0004-p4.patch"]["needs_why"]["0003-p3.patch"]
    assert details["0005-p5.patch"]["needs"] == ["0003-p3.patch"]
    assert "passes kw= to pkg.m.f" in details["0005-p5.patch"]["needs_why"]["0003-p3.patch"]
    # the witness: each alone does not import, with its needs it does
    for name, module, needs in (
        ("0002", "app.x", ["0001"]),
        ("0004", "pkg.u", ["0003"]),
        ("0005", "pkg.w", ["0003"]),
    ):
        series = tmp_path / "series"
        alone = _state(tmp_path, base, [(series / f"{name}-p{name[-1]}.patch").read_text()], f"alone{name}")
        assert not _imports(alone, module), name
        texts = [(series / f"{n}-p{n[-1]}.patch").read_text() for n in [*needs, name]]
        assert _imports(_state(tmp_path, base, texts, f"needs{name}"), module), name


def test_a_need_whose_file_the_patch_breaks_brings_the_patch_that_mends_it(tmp_path, monkeypatch):
    """p3 needs p1 to apply; p1 makes pkg/u.py import ``old``, p3 removes ``old``, p2 drops the
    import: with p1 alone before it p3's state does not import, so p3 needs p2 too."""
    monkeypatch.setenv("PATCHKIT_CACHE", str(tmp_path / "cache"))
    base = {**INIT, "pkg/m.py": "def old():\n    return 1\n\n\nX = 1\n", "pkg/u.py": "V = 1\n"}
    details = _audit_needs(tmp_path, base, [
        {"pkg/m.py": "def old():\n    return 1\n\n\nX = 10\n",
         "pkg/u.py": "from pkg.m import old\n\nV = old()\n"},
        {"pkg/u.py": "V = 1\n"},
        {"pkg/m.py": "X = 11\n"},
    ])  # fmt: skip
    assert details["0003-p3.patch"]["needs"] == ["0001-p1.patch", "0002-p2.patch"]
    series = tmp_path / "series"
    texts = [(series / n).read_text() for n in ("0001-p1.patch", "0003-p3.patch")]
    assert not _imports(_state(tmp_path, base, texts, "without"), "pkg.u")


def test_a_caller_updated_only_after_its_callee_went_is_ordered_first(tmp_path):
    base = {**INIT, "pkg/m.py": "def gone():  # USE\n    return 1  # USE\n\n\ndef keep():\n    return 2\n",
            "pkg/u.py": "from pkg.m import gone\n\nX = gone()\n"}  # fmt: skip
    final = {**INIT, "pkg/m.py": "def keep():\n    return 2\n", "pkg/u.py": "X = 1\n"}
    result, _ = _split(tmp_path, base, final)
    assert [p.domain for p in result.series.patches] == ["late", "early"]
    assert any(r["step"] == "reorder" for r in result.series.resolutions)
    texts = [result.texts[p.filename] for p in result.series.patches]
    for k in range(1, len(texts) + 1):  # every prefix imports, built by git
        assert _imports(_state(tmp_path, base, texts[:k], f"prefix{k}"), "pkg.u"), k


def test_several_cut_statements_in_one_file_are_all_mended(tmp_path):
    def cut(name: str, new: bool) -> str:
        if new:
            head = f"def {name}(a, b):\n    cand = (\n        a\n        and b\n    )\n"
            return head + "    if cand:  # USE\n        return 1\n    return 0\n"
        return (
            f"def {name}(a, b):\n    if (\n        a\n        and b\n    ):\n        return 1\n    return 0\n"
        )

    pad = "".join(f"\n\ndef pad{i}():\n    return {i}\n" for i in range(8))
    old_cfg, new_cfg = 'CFG = {\n    "a": 1,\n    "b": 2,\n}\n', "CFG = dict(  # USE\n    a=1,\n    b=2,\n)\n"
    base = {
        **INIT,
        "pkg/other.py": "H = 1\n",
        "pkg/m.py": cut("f", False) + pad + cut("g", False) + pad + old_cfg,
    }
    final = {
        **INIT,
        "pkg/other.py": "H = 2\n",
        "pkg/m.py": cut("f", True) + pad + cut("g", True) + pad + new_cfg,
    }
    result, _ = _split(tmp_path, base, final)
    assert sum(r["kind"] == "syntax" for r in result.series.resolutions) >= 2
    texts = [result.texts[p.filename] for p in result.series.patches]
    for k in range(1, len(texts) + 1):
        where = _state(tmp_path, base, texts[:k], f"prefix{k}")
        assert _imports(where, "pkg.m"), k
