"""Issue 25's prefix shapes that the guard tests of ``test_prefix_undefined`` did not make fail on
the landed main (667170b): each fixture here splits a small replay over several domains and then
runs ruff itself (a subprocess, not patchkit's code) on every prefix state's files. A finding in a
state that neither the base nor the replay's final state has is a state that does not run."""

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

# ``early`` claims changed lines marked USE anywhere in pkg/ and the whole of pkg/caller.py;
# ``late`` the rest of pkg/. The early domain's patch comes first.
RULES = r"""
[[domain]]
name = "early"
paths = ['pkg/caller.py']
  [[domain.match]]
  paths = ['pkg/**']
  patterns = ['USE']

[[domain]]
name = "late"
paths = ['pkg/**']
"""


def _split(tmp_path: Path, base: dict[str, str], final: dict[str, str], rules: str):
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
    return result, states, check_states(tree, states, final_files), tree


def _ruff(tmp: Path, files: dict[str, bytes | None], extra: str = "") -> set[tuple[str, str]]:
    """(path, message) of ruff's F821/F822/F823/F706 findings (and the ``extra`` codes), ruff run by
    hand."""
    if tmp.exists():
        shutil.rmtree(tmp)
    for path, data in files.items():
        if data is not None and path.endswith(".py"):
            (tmp / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp / path).write_bytes(data)
    tmp.mkdir(parents=True, exist_ok=True)
    select = "F821,F822,F823,F706" + extra
    cmd = [
        RUFF,
        "check",
        "--isolated",
        "--no-cache",
        "--exit-zero",
        "--output-format",
        "json",
        "--select",
        select,
        ".",
    ]
    out = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, check=True)
    return {
        (str(Path(f["filename"]).relative_to(tmp.resolve())), f["message"]) for f in json.loads(out.stdout)
    }


def _witnessed(
    tmp_path: Path, base: dict[str, str], final: dict[str, str], rules: str = RULES, extra: str = ""
):
    """The split, its states, and the ruff findings of each state neither the base nor the replay has."""
    result, states, prefixes, tree = _split(tmp_path, base, final, rules)
    paths = set(base) | set(final)
    on_base = _ruff(tmp_path / "rb", {p: tree.read(p) for p in paths}, extra)
    on_final = _ruff(tmp_path / "rf", {p: t.encode() for p, t in final.items()}, extra)
    assert not [f for f in on_final if f[1].startswith("Undefined name")], on_final  # the fixture is sound
    caused = []
    for k, (name, files) in enumerate(states):
        full = {p: files[p] if p in files else tree.read(p) for p in paths}
        caused += [(name, f) for f in _ruff(tmp_path / f"r{k}", full, extra) - on_base - on_final]
    return result, states, prefixes, caused


INIT = {"pkg/__init__.py": ""}


SEND = "def send(**kw):\n    return kw\n\n\n"


def _keyword_line_fixture():
    """A late domain binds the local ``kwargs``; the early domain's only line in that function is the
    keyword argument ``kwargs=kwargs,`` of a call the base already has. The keyword line binds
    nothing: taken for ``kwargs = ...`` it hides that the early patch reads a local it lacks."""
    base = {
        **INIT,
        "pkg/core.py": SEND + "def g(a):\n    return send(\n        a=a,\n    )\n",
    }
    final = {
        **INIT,
        "pkg/core.py": SEND + "def g(a):\n    kwargs = {'b': a}\n    return send(\n"
        "        a=a,\n        kwargs=kwargs,  # USE\n    )\n",
    }
    return base, final


def test_a_keyword_argument_line_is_not_a_definition_of_the_local(tmp_path) -> None:
    base, final = _keyword_line_fixture()
    result, states, prefixes, caused = _witnessed(tmp_path, base, final)
    assert caused == [] and prefixes.ok, (caused, prefixes.failures)
    # the early patch carries its read of kwargs and the binding with it
    first = states[0][1]["pkg/core.py"].decode()
    assert "kwargs=kwargs," in first and "kwargs = {'b': a}" in first, first


def _keyword_move_fixture():
    """The caller (early) passes a keyword the late domain adds to ``Engine.__init__``; the block
    that adds it also annotates a parameter with ``NewClass``, whose import (and module) the late
    domain keeps. Moving the signature into the caller's patch without that import leaves a state
    that reads ``NewClass`` unbound (667170b took that move: only import problems were counted)."""
    base = {
        **INIT,
        "pkg/engine.py": "import os\n\n\nclass Engine:\n    def __init__(self, a):\n        self.a = a\n"
        "        self.sep = os.sep\n",
        "pkg/caller.py": "from pkg.engine import Engine\n\n\ndef make():\n    return Engine(1)\n",
    }
    final = {
        **INIT,
        "pkg/newmod.py": "class NewClass:\n    pass\n",
        "pkg/engine.py": "import os\n\nfrom pkg.newmod import NewClass\n\n\nclass Engine:\n"
        "    def __init__(self, a, fast=False, helper: NewClass | None = None):\n        self.a = a\n"
        "        self.sep = os.sep\n        self.fast = fast\n        self.helper = helper\n",
        "pkg/caller.py": "from pkg.engine import Engine\n\n\ndef make():\n    return Engine(1, fast=True)\n",
    }
    return base, final


def test_a_keyword_move_carrying_annotations_is_judged_by_undefined_names(tmp_path) -> None:
    base, final = _keyword_move_fixture()
    result, states, prefixes, caused = _witnessed(tmp_path, base, final)
    assert caused == [] and prefixes.ok, (caused, prefixes.failures)
    # a keyword check of our own: no state's caller passes ``fast`` to an Engine without it
    for name, files in states:
        caller = files.get("pkg/caller.py") or base["pkg/caller.py"].encode()
        engine = files.get("pkg/engine.py") or base["pkg/engine.py"].encode()
        assert b"fast=True" not in caller or b"fast=False" in engine, name


FILLER = "".join(f"    step{i} = a + {i}\n" for i in range(12))


def _rebind_fixture():
    """The late domain binds ``kwargs`` at the top of a long function; far below (another change
    block), the early domain's line rebinds it from itself; the early domain also has a file of
    its own. The rebind reads the binding: it cannot stand in for it."""
    body = "def g(a):\n" + FILLER + "    return [a]\n"
    base = {**INIT, "pkg/core.py": body, "pkg/caller.py": "def h():\n    return 1\n"}
    final = {
        **INIT,
        "pkg/core.py": "def g(a):\n    kwargs = [a]\n" + FILLER + "    kwargs = kwargs + [1]  # USE\n"
        "    return [a]\n",
        "pkg/caller.py": "def h():\n    return 2\n",
    }
    return base, final


def test_a_rebinding_local_far_from_its_binding_stays_with_it(tmp_path) -> None:
    base, final = _rebind_fixture()
    result, states, prefixes, caused = _witnessed(tmp_path, base, final)
    assert caused == [] and prefixes.ok, (caused, prefixes.failures)
    for name, files in states:  # wherever the rebind is, its binding is
        text = files.get("pkg/core.py", b"").decode()
        assert "kwargs = kwargs" not in text or "kwargs = [a]" in text, (name, text)


CONSTANTS = "".join(f"STEP{i} = {i}\n" for i in range(12))
TERMS = "".join(f"        + a * {i}\n" for i in range(12))


def _return_to_local_fixture():
    """``return (`` rewritten into ``kwargs = (`` by the late domain in ``g``; a dozen unchanged
    lines of the expression below, the early domain's line reads ``kwargs`` (another change block).
    Far above, in another function, the early domain binds a ``kwargs`` of its own: the name is
    bound in the file by the first domain, but not in ``g``."""
    base = {
        **INIT,
        "pkg/core.py": "def f(a):\n    return a\n\n\n" + CONSTANTS + "\n\n"
        "def g(a):\n    return (\n        a\n" + TERMS + "    )\n",
        "pkg/caller.py": "def h():\n    return 1\n",
    }
    final = {
        **INIT,
        "pkg/core.py": "def f(a):\n    kwargs = {'a': a}  # USE\n    return kwargs\n\n\n" + CONSTANTS + "\n\n"
        "def g(a):\n    kwargs = (\n        a\n" + TERMS + "    )\n"
        "    print(kwargs)  # USE\n    return kwargs\n",
        "pkg/caller.py": "def h():\n    return 2\n",
    }
    return base, final


def test_return_rewritten_into_a_local_far_from_its_reads_keeps_them_together(tmp_path) -> None:
    base, final = _return_to_local_fixture()
    result, states, prefixes, caused = _witnessed(tmp_path, base, final)
    assert caused == [] and prefixes.ok, (caused, prefixes.failures)
    for name, files in states:  # wherever g reads kwargs, the rewrite that binds it is there
        text = files.get("pkg/core.py", b"").decode()
        assert "print(kwargs)" not in text or "kwargs = (" in text, (name, text)


def _star_fixture():
    """A file with a star import: the late domain adds the constant ``LIMIT`` at the top, far below
    the early domain's new function reads it. ruff reports a read of a name the file does not bind
    as F405 there (it may come from the star), so the witness adds F405 for this file."""
    base = {
        **INIT,
        "pkg/core.py": "from os.path import *\n\n\ndef old():\n    return sep\n\n\n" + CONSTANTS,
        "pkg/caller.py": "def h():\n    return 1\n",
    }
    final = {
        **INIT,
        "pkg/core.py": "from os.path import *\n\nLIMIT = 3\n\n\ndef old():\n    return sep\n\n\n"
        + CONSTANTS
        + "\n\ndef f():\n    return LIMIT  # USE\n",
        "pkg/caller.py": "def h():\n    return 2\n",
    }
    return base, final


def test_a_star_import_file_far_from_the_definition_is_analysed(tmp_path) -> None:
    base, final = _star_fixture()
    result, states, prefixes, caused = _witnessed(tmp_path, base, final, extra=",F405")
    assert caused == [] and prefixes.ok, (caused, prefixes.failures)
    for name, files in states:  # wherever f reads LIMIT, the file binds it
        text = files.get("pkg/core.py", b"").decode()
        assert "return LIMIT" not in text or "LIMIT = 3" in text, (name, text)


RULES_CONSTS = RULES.replace("paths = ['pkg/caller.py']", "paths = ['pkg/caller.py', 'pkg/consts.py']")


def _keyword_move_no_reorder_fixture():
    """As above, and the late domain's new module imports a constant the early domain's new file
    defines: putting the late patch first is no way out (its state imports a file it lacks)."""
    base, final = _keyword_move_fixture()
    final = {
        **final,
        "pkg/consts.py": "FAST = True\n",
        "pkg/newmod.py": "from pkg.consts import FAST\n\n\nclass NewClass:\n    fast = FAST\n",
        "pkg/caller.py": "from pkg.consts import FAST\nfrom pkg.engine import Engine\n\n\ndef make():\n"
        "    return Engine(1, fast=FAST)\n",
    }
    return base, final, RULES_CONSTS


def test_a_keyword_move_with_annotations_when_no_reorder_helps(tmp_path) -> None:
    base, final, rules = _keyword_move_no_reorder_fixture()
    result, states, prefixes, caused = _witnessed(tmp_path, base, final, rules)
    assert caused == [] and prefixes.ok, (caused, prefixes.failures)
    for name, files in states:
        caller = files.get("pkg/caller.py") or base["pkg/caller.py"].encode()
        engine = files.get("pkg/engine.py") or base["pkg/engine.py"].encode()
        assert b"fast=FAST" not in caller or b"fast=False" in engine, name


RULES_THREE = r"""
[[domain]]
name = "early"
  [[domain.match]]
  paths = ['pkg/**']
  patterns = ['USE']

[[domain]]
name = "mid"
  [[domain.match]]
  paths = ['pkg/**']
  patterns = ['MID']

[[domain]]
name = "late"
paths = ['pkg/**']
"""


def _keyword_line_elsewhere_fixture():
    """Three domains. The first domain's only line is the keyword argument ``kwargs=x,`` in a call
    of ``f``; in ``g`` the last domain binds the local ``kwargs`` and, a dozen unchanged lines
    below, the middle domain reads it. Taken for a definition, the keyword line "defines kwargs in
    time for everyone" and the middle patch is left reading a local it does not bind."""
    base = {
        **INIT,
        "pkg/core.py": SEND + "def f(x):\n    return send(\n        a=x,\n    )\n\n\n" + CONSTANTS + "\n\n"
        "def g(a):\n" + FILLER + "    return [a]\n",
    }
    final = {
        **INIT,
        "pkg/core.py": SEND
        + "def f(x):\n    return send(\n        a=x,\n        kwargs=x,  # USE\n    )\n\n\n"
        + CONSTANTS
        + "\n\ndef g(a):\n    kwargs = {'b': a}\n"
        + FILLER
        + "    print(kwargs)  # MID\n"
        "    return [a]\n",
    }
    return base, final, RULES_THREE


def test_a_keyword_argument_line_elsewhere_does_not_bind_a_later_local(tmp_path) -> None:
    base, final, rules = _keyword_line_elsewhere_fixture()
    result, states, prefixes, caused = _witnessed(tmp_path, base, final, rules)
    assert caused == [] and prefixes.ok, (caused, prefixes.failures)
    for name, files in states:  # wherever g reads kwargs, g binds it
        text = files.get("pkg/core.py", b"").decode()
        assert "print(kwargs)" not in text or "kwargs = {'b': a}" in text, (name, text)


def test_the_prefix_check_sees_an_undefined_name_in_a_star_import_file(tmp_path) -> None:
    """In a file with a star import ruff reports a read of a name the file does not bind as F405,
    not F821: the prefix check counts it too (what the star really provides is on the base and in
    the final state, so it is not the split's)."""
    (tmp_path / "a" / "pkg").mkdir(parents=True)
    (tmp_path / "a" / "pkg" / "__init__.py").write_text("")
    (tmp_path / "a" / "pkg" / "core.py").write_text("from os.path import *\n\n\ndef old():\n    return sep\n")
    tree = BaseTree(tmp_path / "a")
    star = b"from os.path import *\n\n\ndef old():\n    return sep\n"
    broken = {"pkg/core.py": star + b"\n\ndef f():\n    return LIMIT\n"}
    final = {
        "pkg/core.py": star.replace(b"\n\n\ndef", b"\n\nLIMIT = 3\n\n\ndef")
        + b"\n\ndef f():\n    return LIMIT\n"
    }
    # the witness of the fixture: ruff run here sees LIMIT in the broken state only
    assert _ruff(tmp_path / "rb", broken, ",F405") - _ruff(tmp_path / "rf", final, ",F405") == {
        ("pkg/core.py", "`LIMIT` may be undefined, or defined from star imports")
    }
    result = check_states(tree, [("0001-a.patch", broken), ("0002-b.patch", final)], final)
    assert [(f["patch"], f["kind"], f["name"]) for f in result.failures] == [
        ("0001-a.patch", "undefined", "LIMIT")
    ]
