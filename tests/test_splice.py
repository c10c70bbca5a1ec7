"""``diff/splice.py`` (a file's hunks applied on its bytes, where every hunk sits where it says) and
the general path (``split_lines`` / ``apply_hunks`` / ``join_lines``) agree byte for byte wherever
the splice answers, and the splice answers the common case. The hunks are git's own
(``git diff --no-index`` of random file pairs, ``diff.pairs.diff_sides``)."""

from __future__ import annotations

import random

from patchkit.diff.hunks import HunkMismatch, apply_hunks, join_lines, split_lines
from patchkit.diff.pairs import diff_sides
from patchkit.diff.splice import splice

WORDS = ["a = 1", "b = 2", "", "def f():", "    return x", "# 注释 comment", "x\fy", "z\x1cw", "é", "pass"]


def _file(rng: random.Random, lines: int) -> bytes:
    text = "".join(rng.choice(WORDS) + "\n" for _ in range(lines))
    if rng.random() < 0.25 and text:
        text = text[:-1]  # no newline at the end
    return text.encode("utf-8")


def _edit(rng: random.Random, old: bytes) -> bytes:
    lines = old.decode().split("\n")
    for _ in range(rng.randint(1, 4)):
        at = rng.randint(0, len(lines))
        kind = rng.random()
        if kind < 0.4:
            lines.insert(at, rng.choice(WORDS))
        elif kind < 0.7 and at < len(lines):
            del lines[at]
        elif at < len(lines):
            lines[at] = rng.choice(WORDS) + "!"
    new = "\n".join(lines)
    if rng.random() < 0.15:
        new = new.rstrip("\n")  # the edit also drops (or keeps dropped) the final newline
    return new.encode("utf-8")


def _general(old: bytes, hunks) -> bytes | None:
    try:
        return join_lines(apply_hunks(split_lines(old), hunks, "f.py"))
    except HunkMismatch:
        return None


def test_the_splice_is_the_general_path_where_it_answers():
    rng = random.Random(45)
    pairs = []
    for n in range(300):
        old = _file(rng, rng.randint(0, 40))
        pairs.append((f"f{n}.py", (old, "100644"), (_edit(rng, old), "100644")))
    patches = {fp.path: fp for fp in diff_sides(pairs)}
    answered = 0
    for path, (old, _), (new, _) in pairs:
        fp = patches.get(path)
        if fp is None or not fp.hunks:
            continue
        variants = [old, b"moved = 0\n" * rng.randint(1, 3) + old, old.replace(b"\n", b"\r\n", 1)]
        if old.count(b"\n") > 3:  # one context line changed: neither path may apply it wrongly
            lines = old.split(b"\n")
            lines[rng.randrange(len(lines))] += b" # changed"
            variants.append(b"\n".join(lines))
        for k, text in enumerate(variants):
            fast, general = splice(text, fp.hunks), _general(text, fp.hunks)
            if fast is not None:
                assert fast == general, (path, k)
                answered += k == 0
            if k == 0:
                assert general == new, path  # git's hunks on git's old file give git's new one
    assert answered >= 250  # the common case is the splice's (a moved hunk is the general path's)
