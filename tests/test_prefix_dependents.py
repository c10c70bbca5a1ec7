"""A state breaks files it does not touch: the prefix check reads the untouched modules that use what
a state takes away (a function, a module, a keyword), not only the touched ones. The shape is real:
vLLM 0.34.0's ``structured_output/utils.py`` drops ``apply_grammar_bitmask``, which 0.33.0's untouched
``v1/worker/gpu_model_runner.py`` imports; a partial pick of that release split "0 failures" and
said nothing. Every claim here is checked against a real ``import`` of the state in a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from patchkit.analysis import dependents as dependents_module
from patchkit.analysis.dependents import dependents, lost
from patchkit.base.tree import BaseTree
from patchkit.split.prefix import check_states

UTIL = "def helper(x, y=0):\n    return x + y\n\n\ndef keep():\n    return 1\n"
BASE = {
    "pkg/__init__.py": "",
    "pkg/util.py": "import os\n\n" + UTIL,
    "pkg/worker.py": "from pkg.util import helper\n\nVALUE = helper(1)\n",
    "pkg/other.py": "import pkg.util as u\n\nVALUE = u.keep()\n\n\ndef call():\n    return u.helper(2)\n",
    "pkg/kw.py": "from pkg.util import helper\n\nVALUE = helper(x=1, y=2)\n",
    "pkg/sub/__init__.py": "",
    "pkg/sub/rel.py": "from ..util import helper\n\nVALUE = helper(3)\n",
    "pkg/unrelated.py": "import os\n\nPATH = os.sep\n",
}


@pytest.fixture
def tree(tmp_path: Path) -> BaseTree:
    for path, text in BASE.items():
        (tmp_path / "base" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "base" / path).write_text(text)
    return BaseTree(tmp_path / "base")


def _imports(tree: BaseTree, files: dict[str, bytes | None], module: str, where: Path) -> bool:
    """The independent witness: does ``import module`` run on base + files (a real interpreter)?"""
    for path, text in BASE.items():
        (where / path).parent.mkdir(parents=True, exist_ok=True)
        (where / path).write_text(text)
    for path, data in files.items():
        if data is None:
            (where / path).unlink()
        else:
            (where / path).write_bytes(data)
    proc = subprocess.run(
        [sys.executable, "-c", f"import {module}"], cwd=where, capture_output=True, timeout=60
    )
    return proc.returncode == 0


def test_a_removed_function_breaks_the_untouched_files_that_import_it(tree, tmp_path):
    gone = {"pkg/util.py": b"def keep():\n    return 1\n"}
    result = check_states(tree, [("0001-a.patch", gone)], gone)
    where = {(f["file"], f["kind"], f["name"]) for f in result.replay_findings}
    assert ("pkg/worker.py", "name", "helper") in where
    assert ("pkg/sub/rel.py", "name", "helper") in where  # the relative import resolves to pkg.util
    assert ("pkg/kw.py", "name", "helper") in where
    assert not result.failures  # the replay's own final state has them: findings of the replay
    assert "pkg/unrelated.py" not in result.dependents
    # the witness agrees: the untouched worker no longer imports; the unrelated module still does
    assert not _imports(tree, gone, "pkg.worker", tmp_path / "w1")
    assert not _imports(tree, gone, "pkg.sub.rel", tmp_path / "w2")
    assert _imports(tree, gone, "pkg.unrelated", tmp_path / "w3")
    assert _imports(tree, {}, "pkg.worker", tmp_path / "w4")


def test_a_name_removed_in_one_patch_and_restored_in_a_later_one_is_the_splits_failure(tree):
    gone = {"pkg/util.py": b"def keep():\n    return 1\n"}
    back = {"pkg/util.py": b"def keep():\n    return 1\n\n\ndef helper(x, y=0):\n    return x\n"}
    result = check_states(tree, [("0001-a.patch", gone), ("0002-b.patch", back)], back)
    failures = {(f["patch"], f["file"]) for f in result.failures}
    assert ("0001-a.patch", "pkg/worker.py") in failures
    assert not any(f["patch"] == "0002-b.patch" for f in result.failures)


def test_a_keyword_the_function_no_longer_accepts_breaks_the_untouched_caller(tree, tmp_path):
    narrowed = {"pkg/util.py": b"def helper(x):\n    return x\n\n\ndef keep():\n    return 1\n"}
    result = check_states(tree, [("0001-a.patch", narrowed)], narrowed)
    found = {(f["file"], f["kind"], f["name"]) for f in result.replay_findings}
    assert ("pkg/kw.py", "keyword", "y") in found
    assert not _imports(tree, narrowed, "pkg.kw", tmp_path / "w")  # TypeError at import
    assert _imports(tree, narrowed, "pkg.worker", tmp_path / "w2")  # helper(1) still fine
    assert ("pkg/worker.py", "keyword", "y") not in found


def test_a_deleted_module_breaks_its_importers(tree, tmp_path):
    deleted = {"pkg/util.py": None}
    result = check_states(tree, [("0001-a.patch", deleted)], deleted)
    kinds = {(f["file"], f["kind"]) for f in result.replay_findings}
    assert ("pkg/worker.py", "module") in kinds and ("pkg/other.py", "module") in kinds
    assert not _imports(tree, deleted, "pkg.other", tmp_path / "w")


def test_nothing_lost_searches_nothing(tree, monkeypatch):
    calls = []
    monkeypatch.setattr(dependents_module, "_grep", lambda *a: calls.append(a) or [])
    added = {"pkg/util.py": (BASE["pkg/util.py"] + "\n\ndef more():\n    return 2\n").encode()}
    result = check_states(tree, [("0001-a.patch", added)], added)
    assert result.dependents == [] and calls == []
    # a stdlib import dropped is nobody's name to import from pkg.util
    assert lost(tree.read, {"pkg/util.py": UTIL.encode()}, {"pkg"}) == {}


def test_git_grep_and_the_plain_scan_find_the_same_files(tree):
    names = frozenset({"helper", "keep"})
    by_git = dependents_module._grep(tree, names)
    by_scan = dependents_module._scan(tree, names)
    assert (
        by_git == by_scan == ["pkg/kw.py", "pkg/other.py", "pkg/sub/rel.py", "pkg/util.py", "pkg/worker.py"]
    )


def test_the_module_must_be_named_not_only_the_name(tree, tmp_path):
    """A file that says ``helper`` but imports it from elsewhere is not a dependent of pkg.util."""
    (tree.root / "pkg" / "mine.py").write_text("def helper():\n    return 0\n")
    (tree.root / "pkg" / "local.py").write_text("from pkg.mine import helper\n\nVALUE = helper()\n")
    gone = {"pkg/util.py": b"def keep():\n    return 1\n"}
    found = dependents(BaseTree(tree.root), [gone], {"pkg"})
    assert "pkg/local.py" not in found and "pkg/worker.py" in found


def test_users_outside_the_touched_packages_are_read_too(tree, tmp_path):
    """A root script and an ``__init__``-less tests/ directory import the package as well."""
    (tree.root / "main.py").write_text("from pkg.util import helper\n\nVALUE = helper(1)\n")
    (tree.root / "tests").mkdir()
    (tree.root / "tests" / "test_u.py").write_text(
        "import pkg.util\n\n\ndef test_u():\n    pkg.util.helper(1)\n"
    )
    gone = {"pkg/util.py": b"def keep():\n    return 1\n"}
    result = check_states(BaseTree(tree.root), [("0001-a.patch", gone)], gone)
    where = {(f["file"], f["name"]) for f in result.replay_findings}
    assert ("main.py", "helper") in where  # from-import at module level
    assert ("tests/test_u.py", "helper") in where  # pkg.util.helper through ``import pkg.util``


def test_a_module_attribute_chain_and_a_class_attribute_through_a_module_are_read(tree, tmp_path):
    (tree.root / "pkg" / "cls.py").write_text(
        "class C:\n    def meth(self):\n        return 1\n\n    def keep(self):\n        return 2\n"
    )
    (tree.root / "pkg" / "chain.py").write_text(
        "import pkg.cls\nfrom pkg import cls as m\n\nA = pkg.cls.C.meth\nB = m.C.keep\n"
    )
    narrowed = {"pkg/cls.py": b"class C:\n    def keep(self):\n        return 2\n"}
    base = BaseTree(tree.root)
    result = check_states(base, [("0001-a.patch", narrowed)], narrowed)
    found = {(f["file"], f["name"], f["target"]) for f in result.replay_findings}
    assert ("pkg/chain.py", "meth", "pkg.cls.C") in found
    assert not any(f["name"] == "keep" for f in result.replay_findings)


def test_a_deleted_package_is_not_a_namespace_package(tree, tmp_path):
    (tree.root / "pkg" / "sub" / "x.py").write_text("X = 1\n")
    (tree.root / "pkg" / "subuser.py").write_text("import pkg.sub\nfrom pkg import sub\n")
    deleted = {"pkg/sub/__init__.py": None, "pkg/sub/x.py": None, "pkg/sub/rel.py": None}
    result = check_states(BaseTree(tree.root), [("0001-a.patch", deleted)], deleted)
    kinds = {(f["file"], f["kind"]) for f in result.replay_findings}
    assert ("pkg/subuser.py", "module") in kinds, result.replay_findings
