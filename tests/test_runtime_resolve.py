"""``runtime.resolve``, ``runtime.signature`` and ``runtime.registry`` on small trees and texts of ours:
Python's lookup rules as a reader can follow them, and "unknown" where a reader cannot."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from patchkit.report.i18n import message_text
from patchkit.runtime.registry import parse_registry
from patchkit.runtime.resolve import Definition, SourceIndex, Unresolved
from patchkit.runtime.signature import incompatibilities, parameters

TREE = {
    "vllm/__init__.py": "",
    "vllm/a/__init__.py": "from .impl import f as f\nfrom .star import *\n",
    "vllm/a/impl.py": "def f(x, y=1):\n    return x\n\n\ndef g():\n    pass\n",
    "vllm/a/star.py": "def starred():\n    pass\n",
    "vllm/b.py": (
        "from typing import TYPE_CHECKING\nimport torch\n\nfrom vllm.a.impl import g as alias\n\n"
        "if TYPE_CHECKING:\n    from vllm.a.impl import g as only_for_types\n\n\n"
        "class Base:\n    def method(self):\n        pass\n\n\n"
        "class Child(Base):\n    @staticmethod\n    def own(a, /, b, *, c=3, **kw):\n        pass\n\n\n"
        "class Net(torch.nn.Module):\n    pass\n\n\nSAME = Base\n"
    ),
    "vllm/lazy.py": "def __getattr__(name):\n    return _made(name)\n",  # which names: known by running it
}


@pytest.fixture
def index(tmp_path: Path) -> SourceIndex:
    for rel, text in TREE.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return SourceIndex(tmp_path)


def test_re_exports_star_imports_and_aliases_lead_to_the_definition(index):
    f = index.resolve("vllm.a.f")
    assert isinstance(f, Definition) and (f.kind, f.where, f.via) == ("function", "vllm/a/impl.py:1",
                                                                      ("vllm/a/__init__.py:1",))  # fmt: skip
    assert index.resolve("vllm.a.starred").where == "vllm/a/star.py:1"
    assert index.resolve("vllm.b.alias").where == "vllm/a/impl.py:5"
    assert index.resolve("vllm.b.SAME").qualname == "Base"  # SAME = Base is the class


def test_a_type_checking_import_is_not_a_runtime_name(index):
    missing = index.resolve("vllm.b.only_for_types")
    assert isinstance(missing, Unresolved) and missing.reason == "absent"


def test_class_attributes_come_from_the_body_then_the_bases(index):
    assert index.resolve("vllm.b.Child.method").where == "vllm/b.py:11"
    assert index.resolve("vllm.b.Child.own").where == "vllm/b.py:16"  # its decorator's line
    assert index.resolve("vllm.b.Child.__repr__").kind == "builtin"
    gone = index.resolve("vllm.b.Child.nothing")
    assert isinstance(gone, Unresolved) and gone.reason == "absent" and "Child and its bases" in gone.detail


def test_what_a_reader_cannot_settle_is_unknown_never_absent(index):
    external = index.resolve("vllm.b.Net.forward")  # may come from torch.nn.Module
    assert (
        isinstance(external, Unresolved)
        and external.reason == "unknown"
        and "torch.nn.Module" in external.detail
    )
    lazy = index.resolve("vllm.lazy.anything")
    assert isinstance(lazy, Unresolved) and lazy.reason == "unknown" and "__getattr__" in lazy.detail
    assert index.resolve("vllm.b.torch").kind == "external"


def test_a_missing_module_is_absent_and_same_named_definitions_are_found(index):
    gone = index.resolve("vllm.a.nowhere.f")
    assert isinstance(gone, Unresolved) and gone.reason == "absent"
    assert [d.path for d in index.named_elsewhere("g", "vllm")] == ["vllm.a.impl.g"]


def _params(source: str):
    node = ast.parse(source).body[0]
    return parameters(node.value if isinstance(node, ast.Expr) else node)


@pytest.mark.parametrize(
    "original, replacement, expected",
    [
        ("def f(self, x, y=1): pass", "def g(self, x, y=1): pass", []),
        ("def f(self, x, y=1): pass", "def g(*args, **kwargs): pass", []),
        (
            "def f(self, x, y=1): pass",
            "def g(self, x): pass",
            ["positional `y` has no place in the replacement"],
        ),
        (
            "def f(self, x, y=1): pass",
            "def g(self, x, y): pass",
            ["`y` has a default in the original, none in the replacement"],
        ),
        (
            "def f(self, x, *, k): pass",
            "def g(self, x): pass",
            ["keyword `k` is not accepted by the replacement"],
        ),
        (
            "def f(self, x): pass",
            "def g(self, x, extra): pass",
            ["the replacement requires `extra`, which the original does not take"],
        ),
        (
            "def f(self, x): pass",
            "def g(self, z): pass",
            ["parameter 2 is `x` in the original, `z` in the replacement"],
        ),
        ("def f(self, x): pass", "lambda self, x: None", []),
    ],
)
def test_a_replacement_must_accept_every_call_of_its_original(original, replacement, expected):
    assert [message_text(m) for m in incompatibilities(_params(original), _params(replacement))] == expected


def test_the_registry_comment_in_vllm_ascends_shape():
    text = (
        "# ** 3. File: worker/patch_x.py**\n# ~~~~~~~~\n"
        "#   1. `vllm.a.f`,\n#      `vllm.a.g`\n#    Why:\n#       it is slow\n#       on our device.\n"
        "#    How：\n#       replace it.\n#    Related PR (if no, explain why):\n#       No, not yet.\n"
        "#    Future Plan:\n#       Drop it.\n#\n#   2. `vllm.b.Child.own`\n#    Why:\n#       other.\n"
        "import os\n# ** 4. File: after/code.py**\n"
    )
    entries = parse_registry(text)
    assert list(entries) == ["worker/patch_x.py", "after/code.py"]
    first, second = entries["worker/patch_x.py"]["items"]
    assert first["targets"] == ["vllm.a.f", "vllm.a.g"] and first["why"] == "it is slow on our device."
    assert (first["how"], first["pr"], first["plan"]) == ("replace it.", "No, not yet.", "Drop it.")
    assert second["targets"] == ["vllm.b.Child.own"] and second["why"] == "other."


def test_an_else_branch_reads_as_the_opposite_test():
    from patchkit.analysis.bindings import guard_texts

    assert guard_texts(ast.parse("not is_310p()", mode="eval").body) == ("if not is_310p()", "if is_310p()")
    assert guard_texts(ast.parse("v == '0.1'", mode="eval").body) == ("if v == '0.1'", "if not (v == '0.1')")


def test_what_an_older_pin_could_not_tell_is_not_a_change(tmp_path):
    from patchkit.runtime.since import compare

    trees = {}
    for name, text in (("old", "def __getattr__(name):\n    return _made(name)\n"),
                       ("new", "def f():\n    pass\n")):  # fmt: skip
        (tmp_path / name / "vllm").mkdir(parents=True)
        (tmp_path / name / "vllm" / "__init__.py").write_text("")
        (tmp_path / name / "vllm" / "m.py").write_text(text)
        trees[name] = SourceIndex(tmp_path / name)
    old, new = trees["old"], trees["new"]
    assert compare("vllm.m.f", old.resolve("vllm.m.f"), new.resolve("vllm.m.f"), old, new) == ("present", "")
    assert compare("vllm.m.g", old.resolve("vllm.m.g"), new.resolve("vllm.m.g"), old, new) == ("absent", "")
    assert compare("vllm.m.f", new.resolve("vllm.m.f"), old.resolve("vllm.m.f"), new, old) == ("unknown", "")
