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

from patchkit.base.tree import BaseTree
from patchkit.cli import app
from patchkit.diff.model import Replay
from patchkit.diff.parse import parse_text
from patchkit.split import replay as replay_module
from patchkit.split.depends import compute_dependencies
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
