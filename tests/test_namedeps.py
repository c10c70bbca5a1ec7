"""A definition goes with the first patch that uses it (import, assignment, whole rewritten block)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from patchkit.base.tree import BaseTree
from patchkit.diff.hunks import apply_file_patch
from patchkit.diff.model import Replay
from patchkit.diff.parse import parse_text
from patchkit.split.names import defined_names, undefined_globals, used_names
from patchkit.split.replay import split_replay
from patchkit.split.rules import parse_rules

# tools claims the lines naming TOOL_FIX; everything else in pkg/ is serving's, which comes later
RULES = r"""
[[domain]]
name = "tools"
  [[domain.match]]
  paths = ['pkg/*.py']
  patterns = ['TOOL_FIX']

[[domain]]
name = "serving"
paths = ['pkg/*.py']

[[domain]]
name = "rest"
fallback = true
"""


def _split(tmp_path: Path, base: str, final: str):
    for side, text in (("a", base), ("b", final)):
        (tmp_path / side / "pkg").mkdir(parents=True, exist_ok=True)
        (tmp_path / side / "pkg" / "m.py").write_text(text)
    diff = subprocess.run(["git", "diff", "--no-index", "a", "b"], cwd=tmp_path, capture_output=True).stdout
    text = diff.decode().replace("a/a/", "a/").replace("b/b/", "b/")
    replay = Replay(patches=parse_text(text, "r.diff"), sources=["r.diff"])
    result = split_replay(replay, BaseTree(tmp_path / "a"), parse_rules(RULES, "rules.toml"), "")
    return result, {sp.domain: sp.files for sp in result.series.patches}


def _state(base: str, *file_lists) -> str:
    data = base.encode()
    for files in file_lists:
        for fp in files:
            data = apply_file_patch(data, fp)
    return data.decode()


BASE = "import json\n\n\ndef serve(args):\n    return json.dumps(args)\n"


def test_an_import_moves_to_the_earlier_patch_that_uses_it(tmp_path: Path) -> None:
    final = (
        "import json\nimport os\n\n\ndef serve(args):\n"
        "    if os.environ.get('TOOL_FIX') is None:\n        os.environ['TOOL_FIX'] = '1'\n"
        "    return json.dumps(args)\n"
    )
    result, files = _split(tmp_path, BASE, final)
    tools_only = _state(BASE, files["tools"])
    assert "import os\n" in tools_only, "without the move, tools alone would read an undefined os"
    assert undefined_globals(tools_only.encode()) == set()
    assert "serving" not in files  # the import was serving's only line
    [rec] = [a for a in result.series.assignments if "defines 'os'" in a.rule]
    assert rec.domain == "tools" and "(was serving)" in rec.rule


def test_a_definition_that_rewrites_base_lines_moves_with_its_whole_change(tmp_path: Path) -> None:
    final = (
        "import json\n\n\ndef serve(args):\n    req = json.dumps(args)\n"
        "    if TOOL_FIX:\n        req = req.strip()\n    return req\n"
    )
    result, files = _split(tmp_path, BASE, final)
    tools_only = _state(BASE, files["tools"])
    assert "    req = json.dumps(args)\n" in tools_only
    assert "    return json.dumps(args)\n" not in tools_only  # not half an edit: the old line went too
    assert undefined_globals(tools_only.encode()) == {"TOOL_FIX"}  # the replay's own, not the split's
    assert _state(BASE, *files.values()) == final


def test_a_name_the_base_defines_or_nobody_uses_earlier_moves_nothing(tmp_path: Path) -> None:
    final = "import json\nimport os\n\n\ndef serve(args):\n    TOOL_FIX = 1\n    return json.dumps(args)\n"
    result, files = _split(tmp_path, BASE, final)
    assert not [a for a in result.series.assignments if "defines" in a.rule]
    assert set(files) == {"tools", "serving"}


def test_line_analysis_and_undefined_globals() -> None:
    assert used_names("    x = os.environ.get('A', fallback)  # req") == {"os", "fallback"}
    assert used_names("f(key=value)") == {"f", "value"}
    assert defined_names("from a.b import (c, d as e)") == {"c", "e"}
    assert defined_names("import os.path, json as j") == {"os", "j"}
    assert defined_names("    req: Request = build()") == {"req"}
    assert defined_names("    self.req = 1") == set()
    assert defined_names("for i, (k, v) in items:") == {"i", "k", "v"}
    assert defined_names("with open(p) as fh:") == {"fh"}
    source = b"import os\nX = 1\ndef f(a):\n    global G\n    G = a\n    return os, X, G, a, req, len\n"
    assert undefined_globals(source) == {"req"}
    assert undefined_globals(b"from x import *\nprint(y)\n") == {
        "y"
    }  # a star import file is analysed (issue 25)
    assert undefined_globals(b"def (:\n") is None


def test_a_statement_that_does_not_parse_alone_moves_with_its_whole_block(tmp_path: Path) -> None:
    base = "import json\n\n\ndef serve(args):\n    n = 0\n    total = 1\n    more = 2\n"
    base += "    return json.dumps(args)\n"
    final = base.replace("    n = 0\n", "    if args:\n        extra = len(args)\n    n = 0\n").replace(
        "    return json.dumps(args)\n", "    return json.dumps(args) + str(extra if TOOL_FIX else 0)\n"
    )
    result, files = _split(tmp_path, base, final)
    tools_only = _state(base, files["tools"])
    # 'extra = len(args)' alone would sit under 'def' without its 'if': the whole block moved
    assert "    if args:\n        extra = len(args)\n" in tools_only
    compile(tools_only, "m.py", "exec")
    assert undefined_globals(tools_only.encode()) == {"TOOL_FIX"}
    assert "serving" not in files
