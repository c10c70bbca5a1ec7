"""No prefix state of a split reads a name only a later patch binds: ruff F821/F822/F823 on every
state, one fixture of ours per shape. Each test splits a small replay and then runs ruff itself
(a subprocess, not patchkit's code) on every state's touched files."""

from __future__ import annotations

import json
import shutil
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

RUFF = shutil.which("ruff")
pytestmark = pytest.mark.skipif(RUFF is None, reason="ruff (a patchkit dependency) is not installed")

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


def _split(tmp_path: Path, base: dict[str, str], final: dict[str, str]):
    for side, files in (("a", base), ("b", final)):
        for path, text in files.items():
            (tmp_path / side / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / side / path).write_text(text)
    diff = subprocess.run(["git", "diff", "--no-index", "a", "b"], cwd=tmp_path, capture_output=True).stdout
    text = diff.decode().replace("a/a/", "a/").replace("b/b/", "b/")
    replay = Replay(patches=parse_text(text, "r.diff"), sources=["r.diff"])
    tree = BaseTree(tmp_path / "a")
    result = replay_module.split_replay(replay, tree, parse_rules(RULES, "rules.toml"), "")
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
    return result, states, check_states(tree, states, final_files), tree


def _ruff(tmp: Path, files: dict[str, bytes | None]) -> set[tuple[str, str]]:
    """(path, message) of ruff's F821/F822/F823/F706 (and F405) findings, ruff run by hand."""
    if tmp.exists():
        shutil.rmtree(tmp)
    for path, data in files.items():
        if data is not None and path.endswith(".py"):
            (tmp / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp / path).write_bytes(data)
    tmp.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(
        [
            RUFF,
            "check",
            "--isolated",
            "--no-cache",
            "--exit-zero",
            "--output-format",
            "json",
            "--select",
            "F821,F822,F823,F706,F405",  # F405: a star-import file's undefined names
            ".",
        ],
        cwd=tmp,
        capture_output=True,
        text=True,
    )
    return {
        (str(Path(f["filename"]).relative_to(tmp.resolve())), f["message"]) for f in json.loads(out.stdout)
    }


def _witnessed(tmp_path: Path, base: dict[str, str], final: dict[str, str]):
    """The split, and the ruff findings of each state that neither the base nor the replay has."""
    result, states, prefixes, tree = _split(tmp_path, base, final)
    paths = set(base) | set(final)
    on_base = _ruff(tmp_path / "rb", {p: tree.read(p) for p in paths})
    on_final = _ruff(tmp_path / "rf", {p: t.encode() for p, t in final.items()})
    caused = []
    for k, (name, files) in enumerate(states):
        full = {p: files[p] if p in files else tree.read(p) for p in paths}
        caused += [(name, f) for f in _ruff(tmp_path / f"r{k}", full) - on_base - on_final]
    return result, prefixes, caused


INIT = {"pkg/__init__.py": ""}
CORE = "import os\n\n\ndef old():\n    return os.sep\n"


def test_a_one_line_def_annotation_is_a_use_and_its_import_comes_first(tmp_path) -> None:
    final = {
        **INIT,
        "pkg/newmod.py": "class NewClass:\n    pass\n",
        "pkg/core.py": "import os\n\nfrom pkg.newmod import NewClass\n\n\ndef old():\n    return os.sep\n\n\n"
        "def f(x: NewClass): ...  # USE\n",
    }
    result, prefixes, caused = _witnessed(tmp_path, {**INIT, "pkg/core.py": CORE}, final)
    assert len(result.series.patches) >= 1
    assert caused == [] and prefixes.ok, (caused, prefixes.failures)


def test_an_import_for_an_optional_annotation_is_not_left_to_a_later_patch(tmp_path) -> None:
    """The vendor patch's shape: ``Optional[NewClass]`` in a core module, the import of the new
    module in the same file claimed by a later domain."""
    final = {
        **INIT,
        "pkg/newmod.py": "class NewClass:\n    pass\n",
        "pkg/core.py": "import os\nfrom typing import Optional\n\nfrom pkg.newmod import NewClass\n\n\n"
        "def old():\n    return os.sep\n\n\nclass Engine:\n"
        "    def run(self, x: Optional[NewClass] = None) -> None:  # USE\n"
        "        pass\n",
    }
    result, prefixes, caused = _witnessed(tmp_path, {**INIT, "pkg/core.py": CORE}, final)
    assert caused == [] and prefixes.ok, (caused, prefixes.failures)


def test_a_rebinding_local_stays_with_its_binding(tmp_path) -> None:
    base = {**INIT, "pkg/core.py": "def g(a):\n    return a\n"}
    final = {
        **INIT,
        "pkg/core.py": "def g(a):\n    kwargs = [a]\n    print(a)\n    kwargs = kwargs + [1]  # USE\n"
        "    return a\n",
    }
    result, prefixes, caused = _witnessed(tmp_path, base, final)
    assert caused == [] and prefixes.ok, (caused, prefixes.failures)


def test_return_rewritten_into_a_local_keeps_its_reads_with_it(tmp_path) -> None:
    base = {**INIT, "pkg/core.py": "def g(a):\n    return (\n        a + 1\n    )\n"}
    final = {
        **INIT,
        "pkg/core.py": "def g(a):\n    kwargs = (\n        a + 1\n    )\n"
        "    print(kwargs)  # USE\n    return kwargs\n",
    }
    result, prefixes, caused = _witnessed(tmp_path, base, final)
    assert caused == [] and prefixes.ok, (caused, prefixes.failures)


def test_a_star_import_file_is_analysed(tmp_path) -> None:
    base = {**INIT, "pkg/core.py": "from os.path import *\n\n\ndef old():\n    return sep\n"}
    final = {
        **INIT,
        "pkg/core.py": "from os.path import *\n\nLIMIT = 3\n\n\ndef old():\n    return sep\n\n\n"
        "def f():\n    return LIMIT  # USE\n",
    }
    result, prefixes, caused = _witnessed(tmp_path, base, final)
    assert caused == [] and prefixes.ok, (caused, prefixes.failures)


def test_the_prefix_check_counts_undefined_names_by_ruff(tmp_path) -> None:
    """A state that reads a name nothing binds is a failure of the prefix check (not "0 failures")."""
    (tmp_path / "a" / "pkg").mkdir(parents=True)
    (tmp_path / "a" / "pkg" / "__init__.py").write_text("")
    (tmp_path / "a" / "pkg" / "core.py").write_text("X = 1\n")
    tree = BaseTree(tmp_path / "a")
    broken = {"pkg/core.py": b"X = 1\nY = NewClass()\n"}
    final = {"pkg/core.py": b"from pkg.m import NewClass\nX = 1\nY = NewClass()\n"}
    result = check_states(tree, [("0001-a.patch", broken), ("0002-b.patch", final)], final)
    assert [(f["kind"], f["name"]) for f in result.failures] == [("undefined", "NewClass")]


def test_return_outside_a_function_does_not_compile(tmp_path) -> None:
    (tmp_path / "a" / "pkg").mkdir(parents=True)
    (tmp_path / "a" / "pkg" / "__init__.py").write_text("")
    (tmp_path / "a" / "pkg" / "core.py").write_text("def f():\n    return 1\n")
    tree = BaseTree(tmp_path / "a")
    cut = {"pkg/core.py": b"x = 1\n    \nreturn 1\n"}
    final = {"pkg/core.py": b"def f():\n    x = 1\n    return x\n"}
    result = check_states(tree, [("0001-a.patch", cut), ("0002-b.patch", final)], final)
    assert [f["kind"] for f in result.failures] == ["syntax"]


def test_the_imports_gate_static_half_includes_undefined_names(tmp_path) -> None:
    from patchkit.audit.gates.imports import undefined_names

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "core.py").write_text("X = 1\n")
    base = BaseTree(tmp_path)
    found = undefined_names(
        base, {"pkg/core.py": b"def f(x: NewClass): ...\n"}, ["pkg/core.py", "pkg/__init__.py"]
    )
    assert found is not None and [(q.file, q.kind, q.name, q.target) for q in found] == [
        ("pkg/core.py", "undefined", "NewClass", "F821")
    ]
    assert undefined_names(base, {}, ["pkg/core.py"]) == []


def test_a_ruff_run_that_fails_leaves_no_clean_answer_behind(monkeypatch):
    """A ruff process that fails is NoRuff every time it is asked, never an empty answer the next
    time (before: the memo held "no problem" for every file of the failed run)."""
    from patchkit.analysis import undefined

    state = {"vllm/failing_run_probe.py": b"print(never_defined_probe_name)\n"}
    monkeypatch.setattr(undefined, "command", lambda: ["false", "{dir}"])
    for _ in range(2):
        with pytest.raises(undefined.NoRuff):
            undefined.check([state])
    monkeypatch.undo()
    (found,) = undefined.check([state])
    assert [q.name for q in found] == ["never_defined_probe_name"]


def test_the_ruff_process_started_in_a_thread_answers_as_check():
    from patchkit.analysis import undefined

    states = [
        {"vllm/async_probe_a.py": b"x = undefined_in_a\n"},
        {"vllm/async_probe_b.py": b"import os\nos.getcwd()\n"},
    ]
    wait = undefined.check_async(states)
    assert [[q.name for q in s] for s in wait()] == [["undefined_in_a"], []]
    assert wait() == undefined.check(states)
