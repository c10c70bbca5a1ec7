from __future__ import annotations

from pathlib import Path

import pytest

from patchkit.diff.filediff import parse_diff
from patchkit.diff.hunks import HunkMismatch, apply_file_patch, render_file_patch
from patchkit.diff.model import FilePatch, Hunk

NL = "\\ No newline at end of file"


def lines(n: int, start: int = 1) -> bytes:
    return "".join(f"line {i}\n" for i in range(start, start + n)).encode()


def fp_of(*hunks: Hunk, path: str = "f.txt") -> FilePatch:
    return FilePatch(old_path=path, new_path=path, hunks=list(hunks))


def test_applies_at_offset_nearest_first() -> None:
    base = b"extra\nextra\nextra\n" + lines(10)
    hunk = Hunk(4, 3, 4, 3, [" line 4", "-line 5", "+LINE 5", " line 6"])
    out = apply_file_patch(base, fp_of(hunk))
    assert out == b"extra\nextra\nextra\n" + lines(4) + b"LINE 5\n" + lines(5, 6)


def test_offset_carries_to_later_hunks_and_hunks_stay_in_order() -> None:
    base = lines(20)
    h1 = Hunk(10, 2, 10, 2, ["-line 10", "+ten", " line 11"])
    h2 = Hunk(3, 2, 3, 2, ["-line 3", "+three", " line 4"])  # its preimage only exists before hunk 1's spot
    with pytest.raises(HunkMismatch) as info:
        apply_file_patch(base, fp_of(h1, h2))
    assert info.value.hunk_index == 1


def test_refuses_fuzz() -> None:
    base = lines(6)
    hunk = Hunk(2, 3, 2, 3, [" line 2", "-line 3", "+x", " line FOUR"])
    with pytest.raises(HunkMismatch):
        apply_file_patch(base, fp_of(hunk))


def test_hunk_at_line_one_must_match_at_start() -> None:
    base = b"header\n" + lines(5)
    hunk = Hunk(1, 3, 1, 3, [" line 1", "-line 2", "+two", " line 3"])
    with pytest.raises(HunkMismatch):
        apply_file_patch(base, fp_of(hunk))  # the text is there at line 2, but not at the start
    assert apply_file_patch(lines(5), fp_of(hunk)) == b"line 1\ntwo\n" + lines(3, 3)
    no_context = Hunk(1, 1, 1, 1, ["-line 2", "+two"])  # git (no --unidiff-zero): at the start too
    with pytest.raises(HunkMismatch):
        apply_file_patch(base, fp_of(no_context))
    no_trailing = Hunk(3, 2, 3, 2, [" line 2", "-line 3", "+three"])  # no trailing context: at the end
    with pytest.raises(HunkMismatch):
        apply_file_patch(base, fp_of(no_trailing))


def test_hunk_without_trailing_context_must_match_at_end() -> None:
    hunk = Hunk(4, 2, 4, 2, [" line 4", "-line 5", "+five"])
    with pytest.raises(HunkMismatch):
        apply_file_patch(lines(6), fp_of(hunk))  # "line 5" is not the last line here
    assert apply_file_patch(lines(5), fp_of(hunk)) == lines(4) + b"five\n"


def test_no_newline_both_ways() -> None:
    add_newline = Hunk(1, 2, 1, 2, [" a", "-b", NL, "+b"])
    assert apply_file_patch(b"a\nb", fp_of(add_newline)) == b"a\nb\n"
    with pytest.raises(HunkMismatch):
        apply_file_patch(b"a\nb\n", fp_of(add_newline))
    drop_newline = Hunk(1, 2, 1, 2, [" a", "-b", "+b", NL])
    assert apply_file_patch(b"a\nb\n", fp_of(drop_newline)) == b"a\nb"
    context_only = Hunk(1, 2, 1, 3, [" a", "+x", " b", NL])
    assert apply_file_patch(b"a\nb", fp_of(context_only)) == b"a\nx\nb"


def test_new_and_deleted_files() -> None:
    new = FilePatch(old_path=None, new_path="n.py", hunks=[Hunk(0, 0, 1, 2, ["+a", "+b"])])
    assert apply_file_patch(None, new) == b"a\nb\n"
    gone = FilePatch(old_path="g.py", new_path=None, hunks=[Hunk(1, 2, 0, 0, ["-a", "-b"])])
    assert apply_file_patch(b"a\nb\n", gone) is None
    with pytest.raises(HunkMismatch):
        apply_file_patch(b"a\nb\nc\n", gone)  # deleting must consume the whole file


def test_mismatch_message_names_hunk_expected_found_closest() -> None:
    base = lines(30)
    ok = Hunk(2, 2, 2, 2, ["-line 2", "+two", " line 3"])
    bad = Hunk(10, 3, 10, 3, [" line 20", "-line 21", "+x", " line 99"])
    with pytest.raises(HunkMismatch) as info:
        apply_file_patch(base, fp_of(ok, bad, path="pkg/m.py"))
    err = info.value
    record = err.to_dict()
    assert (record["hunk"], record["header"], record["expected_line"]) == (2, "@@ -10,3 +10,3 @@", 10)
    assert record["expected"] == ["line 20\n", "line 21\n", "line 99\n"]
    assert record["found"] == ["line 10\n", "line 11\n", "line 12\n"]
    # two of three lines equal at line 20; the search starts after hunk 1 (floor), nearest wins ties
    assert (record["closest_line"], record["closest_offset"]) == (20, 10)
    assert record["closest_similarity"] == pytest.approx(0.667)
    msg = str(err)
    assert msg.startswith("pkg/m.py: hunk #2 @@ -10,3 +10,3 @@ does not apply at line 10")
    assert "expected 'line 20', found 'line 10'" in msg
    assert "closest match at line 20 (offset +10, 67% of lines equal)" in msg


RENDER_CASES = {
    "modify": "diff --git a/d/m.py b/d/m.py\n--- a/d/m.py\n+++ b/d/m.py\n"
    "@@ -2,3 +2,4 @@ def f():\n line 2\n-line 3\n+three\n+3b\n line 4\n",
    "new": "diff --git a/d/n.py b/d/n.py\nnew file mode 100644\n--- /dev/null\n+++ b/d/n.py\n"
    "@@ -0,0 +1,2 @@\n+a\n+b\n",
    "delete": "diff --git a/d/g.py b/d/g.py\ndeleted file mode 100644\n--- a/d/g.py\n+++ /dev/null\n"
    "@@ -1,2 +0,0 @@\n-line 1\n-line 2\n",
    "mode": "diff --git a/d/run.sh b/d/run.sh\nold mode 100644\nnew mode 100755\n",
    "rename": "diff --git a/d/one.py b/d/r.py\nsimilarity index 80%\nrename from d/one.py\nrename to d/r.py\n"
    "--- a/d/one.py\n+++ b/d/r.py\n@@ -1 +1 @@\n-line 1\n+one\n",
    "no-newline": "diff --git a/d/e.py b/d/e.py\n--- a/d/e.py\n+++ b/d/e.py\n@@ -2 +2 @@\n-end\n"
    + NL
    + "\n+end\n",
}


@pytest.mark.parametrize("case", sorted(RENDER_CASES))
def test_render_round_trips_and_git_applies(case: str, tmp_path: Path, git_apply) -> None:
    text = RENDER_CASES[case]
    [fp] = parse_diff(text.splitlines(), case)
    rendered = render_file_patch(fp)
    assert rendered == text  # hand-written in git's own form, so rendering must give it back
    [again] = parse_diff(rendered.splitlines(), case)
    fp.source = again.source = ""
    assert again == fp
    tree = tmp_path / "t"
    (tree / "d").mkdir(parents=True)
    (tree / "d" / "m.py").write_bytes(lines(5))
    (tree / "d" / "g.py").write_bytes(lines(2))
    (tree / "d" / "one.py").write_bytes(lines(1))
    (tree / "d" / "run.sh").write_bytes(b"echo\n")
    (tree / "d" / "e.py").write_bytes(b"start\nend")
    before = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()}
    git_apply(tree, rendered.encode())
    target = tree / (fp.new_path or fp.old_path)
    if fp.new_path and fp.hunks:
        old = before.get(tree / (fp.old_path or ""), None) if fp.old_path else None
        assert target.read_bytes() == apply_file_patch(old, fp)  # our apply agrees with git's
    if case == "delete":
        assert not target.exists()
    if case == "mode":
        assert target.stat().st_mode & 0o100
    if case == "rename":
        assert not (tree / "d" / "one.py").exists()
