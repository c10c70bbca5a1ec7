"""A patch's changes mapped to the scopes of the file before it (analysis/scopes, testrun/affected): the
function whose body changed, decorators and class attributes and module-level statements as the
module, new and deleted files, deleted functions."""

from patchkit.analysis.scopes import MODULE, changed_scopes, line_scopes
from patchkit.testrun.affected import EVERYTHING, changes

SOURCE = """\
import os

LIMIT = 4


def helper(x):
    return x + 1


@register("pool")
def scale(x, factor=2):
    return x * factor


class Pool:
    size = 8

    def grow(self, n):
        def step(k):
            return k * 2

        return step(n) + self.size

    @property
    def empty(self):
        return self.size == 0


def tail():
    return LIMIT
"""


def edit(old: str, new: str) -> set[str]:
    assert old in SOURCE
    return changed_scopes(SOURCE, SOURCE.replace(old, new))


def test_a_function_body_change_is_that_function():
    assert edit("return x * factor", "return x * factor + 1") == {"scale"}
    assert edit("return self.size == 0", "return self.size <= 0") == {"Pool.empty"}
    assert edit("            return k * 2", "            return k * 3") == {"Pool.grow.step"}
    assert edit("return step(n) + self.size", "return step(n) - self.size") == {"Pool.grow"}


def test_a_signature_change_is_the_function_a_line_inserted_in_a_body_too():
    assert edit("def scale(x, factor=2):", "def scale(x, factor=3):") == {"scale"}
    assert edit("    return x + 1\n", "    y = x\n    return y + 1\n") == {"helper"}


def test_a_decorator_runs_at_import_so_it_is_the_module():
    assert edit('@register("pool")', '@register("pools")') == {MODULE}
    # a nested def's decorator runs when its enclosing function runs
    nested = "def outer():\n    @wrap\n    def inner():\n        return 1\n    return inner\n"
    assert changed_scopes(nested, nested.replace("@wrap", "@other")) == {"outer"}


def test_class_attributes_and_module_level_statements_are_the_module():
    assert edit("    size = 8", "    size = 9") == {MODULE}
    assert edit("LIMIT = 4", "LIMIT = 5") == {MODULE}
    assert edit("import os\n", "import os\nimport re\n") == {MODULE}


def test_a_new_function_between_two_others_is_the_module():
    assert edit("\n\ndef tail():", "\n\ndef added():\n    return 0\n\n\ndef tail():") == {MODULE}


def test_a_deleted_function_is_that_function():
    deleted = SOURCE.replace("def helper(x):\n    return x + 1\n", "")
    assert changed_scopes(SOURCE, deleted) == {"helper"}


def test_new_deleted_and_unparsable_files_are_the_module():
    assert changed_scopes(None, SOURCE) == {MODULE}
    assert changed_scopes(SOURCE, None) == {MODULE}
    assert changed_scopes("def broken(:\n", "def broken():\n") == {MODULE}
    assert changed_scopes(SOURCE, SOURCE) == set()


def test_a_def_line_runs_in_the_enclosing_scope_where_coverage_sees_it():
    changed, executed = line_scopes(SOURCE), line_scopes(SOURCE, executed=True)
    def_line = SOURCE.splitlines().index("def helper(x):")
    assert changed[def_line] == "helper" and executed[def_line] == MODULE
    assert executed[def_line + 1] == "helper"  # the body runs when it is called
    decorated = SOURCE.splitlines().index("    def empty(self):")
    assert executed[decorated] == MODULE and executed[decorated - 1] == MODULE


def test_changes_cover_the_patch_and_the_patches_it_needs():
    base = {"vllm/a.py": SOURCE.encode(), "vllm/b.py": b"def f():\n    return 1\n", "docs/x.md": b"x\n"}
    pre = {"vllm/b.py": b"def f():\n    return 2\n"}  # a needed earlier patch, on the base
    post = {
        **pre,
        "vllm/a.py": SOURCE.replace("x * factor", "x / factor").encode(),
        "vllm/new.py": b"X = 1\n",
    }
    got = changes(base.get, pre, post)
    assert got == {"vllm/a.py": {"scale"}, "vllm/b.py": {"f"}, "vllm/new.py": {MODULE}}
    assert changes(base.get, {}, {"docs/x.md": b"y\n"}) == {"docs/x.md": {EVERYTHING}}
    assert changes(base.get, {}, {"tests/conftest.py": b"import os\n"}) == {"tests/conftest.py": {EVERYTHING}}
