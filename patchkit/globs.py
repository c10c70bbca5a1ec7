"""Path globs as regular expressions: ``**`` crosses directories, ``*`` and ``?`` stay in one segment."""

from __future__ import annotations

import re


def glob_source(glob: str) -> str:
    """The regex source of ``glob`` (unanchored: callers add what their syntax needs)."""
    out = []
    i = 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return "".join(out)
