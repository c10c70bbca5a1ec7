"""A commit message's trailers as git reads them (``trailer.c``; ``git interpret-trailers --parse``).

The trailer block is the last paragraph of the message (never its first, the title) when its
lines are all trailers, or when one of them starts as git writes its own (``Signed-off-by: ``,
``(cherry picked from commit ``) and at least a quarter of them are trailers: so
``git cherry-pick -x``'s line after a ``Signed-off-by:`` keeps it a trailer block. A trailer is
``<token>[ \\t]*:<value>`` (a token of ASCII letters, digits and ``-``); a line starting with
white space continues the trailer above it. Comment lines (``#``), a ``Conflicts:`` block and
blank lines at the end are ignored, and nothing below a ``# ---- >8 ----`` cut line counts. With
``divider`` (what ``interpret-trailers`` does with a file), the message ends at a ``---`` line.

Ported line by line from git 2.39 (its behaviour is unchanged in 2.50), including where git
reads past the end it computed; ``tests/test_trailers.py`` checks it against the real git.
"""

from __future__ import annotations

from patchkit.diff.model import Trailer

C_SPACE = " \t\n\r"  # git's own isspace() (git-compat-util.h): no vertical tab, no form feed
GIT_GENERATED = ("Signed-off-by: ", "(cherry picked from commit ")
COMMENT = "#"
CUT_LINE = "------------------------ >8 ------------------------\n"


def git_trailers(message: str, divider: bool = False) -> list[Trailer]:
    """The trailers ``git interpret-trailers --parse`` prints for ``message`` (``--no-divider``
    unless ``divider``), in order: key and value, continuation lines unfolded."""
    end = _patch_start(message) if divider else len(message)
    end -= _ignored_tail(message, end)
    start = _block_start(message, end)
    found = []
    for line in _block_lines(message[start:end]):
        if line.startswith(COMMENT):
            continue
        at = _separator(line)
        if at >= 1:
            found.append(Trailer(line[:at].strip(C_SPACE), _unfold(line[at + 1 :].strip(C_SPACE))))
    return found


def _separator(line: str, start: int = 0) -> int:
    """git's ``find_separator``: where ``:`` ends ``<token><optional blanks>``, else -1."""
    blank = False
    for i in range(start, len(line)):
        c = line[i]
        if c == ":":
            return i - start
        if not blank and ((c.isascii() and c.isalnum()) or c == "-"):
            continue
        if i != start and c in " \t":
            blank = True
            continue
        break
    return -1


def _is_blank(text: str, at: int) -> bool:
    """git's ``is_blank_line`` at offset ``at``: only white space up to the newline (or the end)."""
    while at < len(text) and text[at] != "\n":
        if text[at] not in C_SPACE:
            return False
        at += 1
    return True


def _next_line(text: str, at: int) -> int:
    newline = text.find("\n", at)
    return len(text) if newline < 0 else newline + 1


def _last_line(text: str, length: int) -> int:
    """git's ``last_line``: the start of the last line of ``text[:length]``; -1 when it is empty."""
    if length == 0:
        return -1
    if length == 1:
        return 0
    newline = text.rfind("\n", 0, length - 1)
    return newline + 1


def _patch_start(text: str) -> int:
    at = 0
    while at < len(text):
        if text.startswith("---", at) and at + 3 < len(text) and text[at + 3] in C_SPACE:
            return at
        at = _next_line(text, at)
    return len(text)


def _cut_at(text: str, length: int) -> int:
    """git's ``wt_status_locate_end``: where a ``# ---- >8 ----`` line starts, else ``length``."""
    pattern = f"\n{COMMENT} {CUT_LINE}"
    if text.startswith(pattern[1:]):
        return 0
    found = text.find(pattern)  # git searches the whole string, not only the first ``length``
    return found + 1 if found >= 0 else length


def _ignored_tail(text: str, length: int) -> int:
    """git's ``ignore_non_trailer``: how many bytes at the end of ``text[:length]`` are comments,
    blank lines, an old ``Conflicts:`` block or below the cut line."""
    comments_from = 0
    at = 0
    conflicts = False
    cutoff = _cut_at(text, length)
    while at < cutoff:
        newline = text.find("\n", at, length) if at < length else text.find("\n", at)
        following = newline + 1 if newline >= 0 else length
        first = text[at] if at < len(text) else ""
        if first in (COMMENT, "\n"):
            comments_from = comments_from or at
        elif text.startswith("Conflicts:\n", at):
            conflicts = True
            comments_from = comments_from or at
        elif conflicts and first == "\t":
            pass  # a path of the conflicts block
        elif comments_from:
            comments_from = 0
            conflicts = False
        at = following
    return length - comments_from if comments_from else length - cutoff


def _block_start(text: str, length: int) -> int:
    """git's ``find_trailer_start``: the offset of the trailer block in ``text[:length]``, or
    ``length`` when the last paragraph is not one."""
    at = 0
    while at < length:  # the first paragraph is the title and cannot be trailers
        if text.startswith(COMMENT, at):
            at = _next_line(text, at)
            continue
        if _is_blank(text, at):
            break
        at = _next_line(text, at)
    end_of_title = at
    only_spaces, recognized = True, False
    trailer_lines = non_trailer_lines = continuation_lines = 0
    line = _last_line(text, length)
    while line >= end_of_title:
        if text.startswith(COMMENT, line):
            non_trailer_lines += continuation_lines
            continuation_lines = 0
        elif _is_blank(text, line):
            if not only_spaces:
                non_trailer_lines += continuation_lines
                if recognized and trailer_lines * 3 >= non_trailer_lines:
                    return _next_line(text, line)
                if trailer_lines and not non_trailer_lines:
                    return _next_line(text, line)
                return length
        else:
            only_spaces = False
            first = text[line] if line < len(text) else ""
            if text.startswith(GIT_GENERATED, line):
                trailer_lines += 1
                continuation_lines = 0
                recognized = True
            elif _separator(text, line) >= 1 and first not in C_SPACE:
                trailer_lines += 1
                continuation_lines = 0
            elif first and first in C_SPACE:
                continuation_lines += 1
            else:
                non_trailer_lines += 1 + continuation_lines
                continuation_lines = 0
        line = _last_line(text, line)
    return length


def _block_lines(block: str) -> list[str]:
    """The block's lines, each continuation line (starting with white space) joined to the
    trailer above it, as git's ``trailer_info_get`` does."""
    lines: list[str] = []
    last_is_trailer = False
    parts = block.split("\n")  # ended by "\n" only (str.splitlines also splits at "\r" and others)
    for line in [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else []):
        if last_is_trailer and line[:1] and line[0] in C_SPACE:
            lines[-1] += line
            continue
        lines.append(line)
        last_is_trailer = _separator(line) >= 1
    return lines


def _unfold(value: str) -> str:
    """git's ``unfold_value``: each newline and the white space after it become one space."""
    out = []
    i = 0
    while i < len(value):
        c = value[i]
        i += 1
        if c == "\n":
            while i < len(value) and value[i] in C_SPACE:
                i += 1
            c = " "
        out.append(c)
    return "".join(out).strip(C_SPACE)
