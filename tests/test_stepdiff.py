"""Step patches are written from the change blocks: git's text where git agrees, exact totals always."""

from __future__ import annotations

import subprocess
from pathlib import Path

from patchkit.base.tree import BaseTree
from patchkit.diff.hunks import apply_file_patch, render_diff
from patchkit.diff.model import Replay
from patchkit.diff.parse import parse_text
from patchkit.split.replay import split_replay
from patchkit.split.rules import parse_rules

RULES = r"""
[[domain]]
name = "d0"
paths = ['pkg/*']
patterns = ['\balpha\b']

[[domain]]
name = "d1"
paths = ['pkg/*']
patterns = ['\bbeta\b']

[[domain]]
name = "rest"
fallback = true
"""


def _split(tmp_path: Path, base: dict[str, bytes], final: dict[str, bytes]):
    for side, files in (("a", base), ("b", final)):
        for rel, data in files.items():
            (tmp_path / side / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / side / rel).write_bytes(data)
    diff = subprocess.run(["git", "diff", "--no-index", "a", "b"], cwd=tmp_path, capture_output=True).stdout
    text = diff.decode().replace("a/a/", "a/").replace("b/b/", "b/")
    replay = Replay(patches=parse_text(text, "r.diff"), sources=["r.diff"])
    return split_replay(replay, BaseTree(tmp_path / "a"), parse_rules(RULES, "rules.toml"), "")


def _git_diff(tmp_path: Path, rel: str, old: bytes, new: bytes) -> str:
    work = tmp_path / "gd"
    for side, data in (("a", old), ("b", new)):
        (work / side / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / side / rel).write_bytes(data)
    out = subprocess.run(["git", "diff", "--no-index", f"a/{rel}", f"b/{rel}"], cwd=work,
                         capture_output=True).stdout.decode()  # fmt: skip
    return out.replace(f"a/a/{rel}", f"a/{rel}").replace(f"b/b/{rel}", f"b/{rel}")


def test_unambiguous_steps_are_byte_for_byte_what_git_diff_writes(tmp_path: Path) -> None:
    body = [f"def f{i}():\n    return {i}\n\n\n" for i in range(12)]
    base = "".join(body)
    edited = list(body)
    edited[1] = "def f1():\n    return 'alpha one'\n\n\n"  # d0, far from the next change
    edited[2] = "def f2():\n    return 'alpha two'\n\n\n"  # d0, close: same hunk as f1
    edited[6] = "def f6():\n    beta = 6\n    return beta\n\n\n"  # d1
    edited[10] = "class K:\n    alpha = 10\n\n\n"  # d0 again, a hunk of its own with a header
    result = _split(tmp_path, {"pkg/m.py": base.encode()}, {"pkg/m.py": "".join(edited).encode()})
    assert [p.domain for p in result.series.patches] == ["d0", "d1"]
    state = base.encode()
    for sp in result.series.patches:
        [fp] = sp.files
        after = apply_file_patch(state, fp)
        assert render_diff([fp]) == _git_diff(tmp_path / sp.domain, "pkg/m.py", state, after)
        state = after
    assert state == "".join(edited).encode()
    d0 = render_diff(result.series.patches[0].files)
    assert d0.count("@@ -") == 2 and "@@ def f0():" in d0 and "@@ def f9():" in d0


def test_a_last_line_without_newline_gains_one_only_where_lines_follow_it(tmp_path: Path) -> None:
    # 'beta 0' (d1) ends the base without a newline; d0 adds lines after it and comes first
    final = b"alpha 0\nalpha 0\nalpha 0\nalpha 0\npass"
    result = _split(tmp_path, {"pkg/f0.txt": b"beta 0"}, {"pkg/f0.txt": final})
    d0, d1 = result.series.patches
    [fp0], [fp1] = d0.files, d1.files
    middle = apply_file_patch(b"beta 0", fp0)
    assert middle == b"beta 0\n" + final  # not 'beta 0alpha 0': the old last line is terminated
    assert apply_file_patch(middle, fp1) == final
    assert (fp0.added, fp0.removed, fp1.added, fp1.removed) == (6, 1, 0, 1)
    # the line count still telescopes: +6-1 and -1 is the net +5-1... minus the newline fix
    assert fp0.added - fp0.removed + fp1.added - fp1.removed == 5 - 1


def test_mixed_block_lines_go_to_their_own_patch_only(tmp_path: Path) -> None:
    base = b"x = [\n    'keep',\n]\n"
    final = b"x = [\n    'keep',\n    'alpha',\n    'beta',\n    'alpha 2',\n]\n"
    result = _split(tmp_path, {"pkg/l.py": base}, {"pkg/l.py": final})
    d0, d1 = result.series.patches
    [fp0], [fp1] = d0.files, d1.files
    assert [ln for ln in fp0.hunks[0].lines if ln[0] in "+-"] == ["+    'alpha',", "+    'alpha 2',"]
    assert [ln for ln in fp1.hunks[0].lines if ln[0] in "+-"] == ["+    'beta',"]
    assert apply_file_patch(apply_file_patch(base, fp0), fp1) == final
