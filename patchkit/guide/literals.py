"""A changed literal as a reader wants it: whole when short, else by what changed in it.

The guide's "check the new default" finding quoted both literals whole; on a real partial pick of
vLLM 0.34.0 that was ``_REASONING_PARSERS_TO_REGISTER`` twice, 56 entries each, two screens of the
series lead for three changed keys.
"""

from __future__ import annotations

import ast

LONG = 80  # a default longer than this is shown by what changed in it, not whole


def compact_change(old: str, new: str) -> tuple[str, str]:
    """Two literals as a reader wants them: whole when short; a long dict, list, tuple or set by its
    size and the keys or items added (+), removed (-) and changed (~), at most 6 named (a registry of
    56 reasoning parsers is three names, not two screens); anything else cut at ``LONG``."""
    if len(old) <= LONG and len(new) <= LONG:
        return old, new
    try:
        before, after = ast.literal_eval(old), ast.literal_eval(new)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        before = after = None
    if isinstance(before, dict) and isinstance(after, dict):
        marks = [f"+{k!r}" for k in after if k not in before] + [f"-{k!r}" for k in before if k not in after]
        marks += [f"~{k!r}" for k in after if k in before and after[k] != before[k]]
        return f"{{…{len(before)} keys}}", f"{{…{len(after)} keys: {_listed(marks)}}}"
    if type(before) is type(after) and isinstance(before, (list, tuple, set, frozenset)):
        olds, news = list(before), list(after)
        marks = [f"+{v!r}" for v in news if v not in olds] + [f"-{v!r}" for v in olds if v not in news]
        marks = marks or ["order"]
        open_, close = {list: "[]", tuple: "()"}.get(type(before), "{}")
        return (f"{open_}…{len(olds)} items{close}", f"{open_}…{len(news)} items: {_listed(marks)}{close}")
    return _cut(old), _cut(new)


def _listed(marks: list[str]) -> str:
    shown = ", ".join(marks[:6])
    return shown + (f", +{len(marks) - 6} more" if len(marks) > 6 else "")


def _cut(text: str) -> str:
    return text if len(text) <= LONG else text[: LONG - 1] + "…"


__all__ = ["LONG", "compact_change"]
