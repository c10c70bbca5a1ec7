"""A mixed hunk whose diff alignment hands a closing bracket to the wrong domain.

git aligns the base's `),` with the *last* `),` of the new text, so the change to "A" would end
with `),` and the new "T" entry would lack its own; tool-parser applied alone would not parse.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from patchkit.analysis.syntax import unparsable_steps
from patchkit.base.tree import BaseTree
from patchkit.diff.hunks import apply_file_patch
from patchkit.diff.parse import parse_text
from patchkit.split.replay import split_replay
from patchkit.split.rules import parse_rules

BASE = 'ENV = {\n    "A": lambda: int(\n        get("A", "5")\n    ),\n    "B": 1,\n}\n'
POST = (
    'ENV = {\n    "A": lambda: int(\n        get("A", "65")\n    ),\n'
    '    # T switches the tool parser\n    "T": lambda: bool(\n        get("T")\n    ),\n'
    '    "B": 1,\n}\n'
)
RULES = """
[[domain]]
name = "tool-parser"
  [[domain.match]]
  paths = ["vllm/envs.py"]
  patterns = ['"T"']
[[domain]]
name = "serving"
  [[domain.match]]
  paths = ["vllm/envs.py"]
  patterns = ['"A"']
[[domain]]
name = "other"
fallback = true
"""


def _replay(tmp_path: Path) -> str:
    for side, text in (("a", BASE), ("b", POST)):
        (tmp_path / side / "vllm").mkdir(parents=True)
        (tmp_path / side / "vllm" / "envs.py").write_text(text)
    diff = subprocess.run(["git", "diff", "--no-index", "a/vllm/envs.py", "b/vllm/envs.py"],
                          cwd=tmp_path, capture_output=True, text=True).stdout  # fmt: skip
    return diff.replace("a/a/", "a/").replace("b/b/", "b/")


def test_each_domain_patch_alone_leaves_the_file_parsable(tmp_path: Path) -> None:
    replay = _replay(tmp_path)
    net = subprocess.run(["git", "diff", "--no-index", "-U0", "a/vllm/envs.py", "b/vllm/envs.py"],
                         cwd=tmp_path, capture_output=True, text=True).stdout  # fmt: skip
    # the hazard is real: git pairs the base's `),` with the new entry's, so the added run for
    # "A" ends with `),` and the run for "T" lacks one
    assert '+        get("A", "65")\n+    ),\n+    # T switches' in net
    result = split_replay_of(parse_text(replay, "envs.diff"), BaseTree(tmp_path / "a"))
    assert [p.domain for p in result.series.patches] == ["tool-parser", "serving"]
    assert result.series.warnings == []
    tool, serving = (sp.files[0] for sp in result.series.patches)
    tool_only = apply_file_patch(BASE.encode(), tool)
    compile(tool_only, "envs.py", "exec")  # raises SyntaxError on a broken cut
    assert tool_only.decode() == BASE.replace('    "B": 1,', '    # T switches the tool parser\n'
                                              '    "T": lambda: bool(\n        get("T")\n    ),\n'
                                              '    "B": 1,')  # fmt: skip
    assert apply_file_patch(tool_only, serving).decode() == POST


def split_replay_of(patches, base):
    from patchkit.diff.model import Replay

    return split_replay(Replay(patches=patches, sources=["envs.diff"]), base, parse_rules(RULES, "r"), "")


def test_a_step_that_breaks_python_is_named() -> None:
    before = (BASE.encode(), "100644")
    broken = (b"ENV = {\n    (\n}\n", "100644")
    steps = [("0000/vllm/envs.py", before, broken), ("0001/vllm/x.txt", before, broken)]
    [problem] = unparsable_steps(steps, ["tool-parser", "serving"], {})
    assert problem.startswith("0001-tool-parser leaves vllm/envs.py unparsable at line 3")
    # a file that did not parse before the step is not blamed on it
    assert unparsable_steps([("0000/vllm/envs.py", broken, broken)], ["tool-parser"], {}) == []
    # a step that leaves the file as the whole replay does is not the split's doing
    final = {"vllm/envs.py": broken[0]}
    assert unparsable_steps(steps[:1], ["tool-parser"], final) == []
