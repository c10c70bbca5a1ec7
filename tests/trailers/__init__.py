"""Generated commit messages, read by ``patchkit.diff.trailers`` and by ``git interpret-trailers``.

Each message is built from the shapes git's trailer rules turn on: a title, prose paragraphs,
trailers (``Signed-off-by`` in any case, other tokens, blanks before the colon, empty values),
continuation lines, ``git cherry-pick -x`` lines, other non-trailer lines inside the block (the
25 % rule), comment lines, a ``Conflicts:`` block, a cut line, ``---`` lines, blank lines made of
white space, CR LF endings and non-ASCII text.

git 2.39 loops forever on a cut line below a ``---`` divider (with a divider, i.e. without
``--no-divider``); messages read with the divider never hold a cut line.
"""

from __future__ import annotations

import os
import random
import subprocess

from patchkit.diff.trailers import CUT_LINE, git_trailers

TOKENS = ("Signed-off-by", "signed-off-by", "SIGNED-OFF-BY", "Signed-Off-By", "Reviewed-by", "Acked-by",
          "Co-developed-by", "Fixes", "Link", "Cc", "Change-Id", "Bug", "X-y-1", "-", "a", "9", "Signé-par",
          "Ré", "Reviewed by")  # fmt: skip
PEOPLE = ("Ada Dev <ada@example.org>", "Bo Li <bo@example.com>", "李雷 <lilei@example.cn>", "<x@y>", "")
PROSE = ("Fix the thing.", "This changes how blocks are freed", "See: the docs", "Note that x: y",
         "ends with a colon:", "Signed-off-by is required", "    indented prose", "URL: http://a/b",
         "non-ascii é: ü", "foo bar: baz", "Conflicts: none", "(cherry picked from commit x)")  # fmt: skip


def _trailer(rng: random.Random) -> str:
    token = rng.choice(TOKENS)
    before = rng.choice(("", "", "", " ", "\t", "  "))
    after = rng.choice((" ", " ", "", "  ", "\t"))
    value = (
        rng.choice(PEOPLE) if "by" in token.lower() else rng.choice(('abc123 ("x")', "https://x/1", "", "v"))
    )
    tail = rng.choice(("",) * 8 + ("\u00a0", "\u3000", "\x1c", " \t", "\x0b"))  # not C white space, or C's
    return f"{token}{before}:{after}{value}{tail}"


def _line(rng: random.Random, in_block: bool) -> str:
    roll = rng.random()
    if in_block and roll < 0.45:
        return _trailer(rng)
    if roll < 0.55:
        return f"(cherry picked from commit {rng.getrandbits(160):040x})"
    if roll < 0.62:
        return rng.choice((" continued", "\tcontinued value", "  more: text", " "))
    if roll < 0.67:
        return rng.choice(("# a comment", "#", "# Signed-off-by: C <c@d>"))
    if roll < 0.70:
        return rng.choice(("---", "--- a/x", "---x", "-- "))
    if roll < 0.73:
        return rng.choice((":x", ": y", "Signed-off-by:x", "Signed-off-by:", "Signed-off-by : A <a@b>"))
    return rng.choice(PROSE)


def message(seed: int) -> tuple[str, bool]:
    """A commit message and whether it is read with the ``---`` divider."""
    rng = random.Random(seed)
    divider = rng.random() < 0.3
    titles = ("Fix block pool", "subject: with colon", "Signed-off-by: T <t@t>", "# c", "")
    lines = [rng.choice(titles + (() if divider else ("# " + CUT_LINE.rstrip("\n"),)))]
    if rng.random() < 0.85:
        lines.append("")
    for _ in range(rng.randint(0, 3)):  # paragraphs
        for _ in range(rng.randint(1, 4)):
            lines.append(_line(rng, in_block=rng.random() < 0.3))
        lines.append(rng.choice(("", "", " ", "\t")))
    if rng.random() < 0.3:  # a last paragraph near the 25 % line: git's own trailers among prose
        block = [rng.choice(("Signed-off-by: Ada Dev <ada@example.org>", "(cherry picked from commit 1)"))]
        block += [_trailer(rng) for _ in range(rng.randint(0, 2))]
        block += [rng.choice(PROSE) for _ in range(rng.randint(len(block) * 2, len(block) * 4))]
        rng.shuffle(block)
        lines += block
    for _ in range(rng.randint(0, 6)):  # the last paragraph: mostly trailers
        lines.append(_line(rng, in_block=True))
    if rng.random() < 0.2:
        lines += rng.choice((["", "# trailing comment"], ["Conflicts:", "\tvllm/x.py"], ["", ""], [" "]))
    if not divider and rng.random() < 0.1:
        lines += ["# " + CUT_LINE.rstrip("\n"), "Signed-off-by: Below <cut@x>"]
    newline = "\r\n" if rng.random() < 0.05 else "\n"
    text = newline.join(lines)
    return text + (newline if rng.random() < 0.9 else ""), divider


def git_parse(text: str, divider: bool) -> list[tuple[str, str]]:
    """``git interpret-trailers --parse`` of ``text``: (key, value) pairs, no user configuration."""
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C"}
    args = ["git", "interpret-trailers", "--parse", *([] if divider else ["--no-divider"])]
    out = subprocess.run(args, input=text.encode(), capture_output=True, env=env, cwd="/", timeout=30,
                         check=True).stdout.decode()  # fmt: skip
    pairs = []
    for line in out.split("\n")[:-1]:
        key, _, value = line.partition(": ")
        pairs.append((key, value))
    return pairs


def disagreement(seed: int) -> str | None:
    """None when patchkit reads seed's message as git does, else what differs."""
    text, divider = message(seed)
    ours = [(t.key, t.value) for t in git_trailers(text, divider=divider)]
    theirs = git_parse(text, divider)
    return None if ours == theirs else f"seed {seed}: {text!r}: ours {ours} git {theirs}"
