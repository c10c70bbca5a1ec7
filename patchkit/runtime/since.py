"""What became of an original between two pins: its status and the upstream diff of its source."""

from __future__ import annotations

import difflib

from patchkit.runtime.resolve import OUTSIDE, Definition, Resolution, SourceIndex, Unresolved
from patchkit.runtime.signature import key

CONTEXT = 3


def compare(
    target: str, old: Resolution, new: Resolution, old_index: SourceIndex, new_index: SourceIndex
) -> tuple[str, str]:
    """(status, diff) of ``target`` from the older pin to the pin.

    missing: the older pin had it, the pin does not (a method gone from a vLLM class is missing
    though a base from outside the tree may have that name: that one is not vLLM's); absent: the
    pin lacks it, the older pin did not have it either (or could not tell); new-upstream: only the
    pin has it; present: the pin has it, reading the older pin could not tell; signature-changed /
    body-changed / unchanged: both have it (the signature: ``signature.key``)."""
    if isinstance(new, Unresolved):
        if new.reason == "absent":  # what the pin lacks: missing if the older pin had it
            return ("missing", "") if isinstance(old, Definition) else ("absent", "")
        if new.detail.startswith(OUTSIDE) and isinstance(old, Definition) and old.file:
            return "missing", ""  # vLLM's own definition is gone; a base from elsewhere is not it
        return "unknown", ""
    if isinstance(old, Unresolved):  # the pin has it: new upstream, or the older pin could not tell
        return ("new-upstream", "") if old.reason == "absent" else ("present", "")
    if not new.file or not old.file:  # external or builtin on either side: nothing to read
        return "unchanged" if (new.kind, new.detail) == (old.kind, old.detail) else "body-changed", ""
    old_text, new_text = old_index.source(old), new_index.source(new)
    if old.kind == "module" or new.kind == "module":
        old_text = (old_index.root / old.file).read_text("utf-8", errors="replace")
        new_text = (new_index.root / new.file).read_text("utf-8", errors="replace")
    if old_text == new_text and old.file == new.file:
        return "unchanged", ""
    diff = function_diff(old, new, old_text, new_text)
    if old_text == new_text:
        return "unchanged", diff  # moved to another file, same source
    if _key(old, old_index) != _key(new, new_index):
        return "signature-changed", diff
    return "body-changed", diff


def _key(found: Definition, index: SourceIndex):
    """The signature as ``inspect.Signature`` compares it (a class: its ``__init__``'s)."""
    if found.kind == "class":
        init = index.member(found, "__init__", f"{found.path}.__init__")
        return key(init.node) if isinstance(init, Definition) and init.node is not None else None
    return key(found.node) if found.node is not None else None


def function_diff(old: Definition, new: Definition, old_text: str, new_text: str) -> str:
    """A git-style diff of the definition's lines, numbered as in each pin's file."""
    old_lines, new_lines = old_text.splitlines(), new_text.splitlines()
    old_start = old.line if old.kind != "module" else 1
    new_start = new.line if new.kind != "module" else 1
    out = [f"diff --git a/{old.file} b/{new.file}", f"--- a/{old.file}", f"+++ b/{new.file}"]
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for group in matcher.get_grouped_opcodes(CONTEXT):
        i1, i2 = group[0][1], group[-1][2]
        j1, j2 = group[0][3], group[-1][4]
        out.append(
            f"@@ -{_range(old_start + i1, i2 - i1)} +{_range(new_start + j1, j2 - j1)} @@ {new.qualname}"
        )
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                out += [" " + line for line in old_lines[a1:a2]]
                continue
            out += ["-" + line for line in old_lines[a1:a2]]
            out += ["+" + line for line in new_lines[b1:b2]]
    return "\n".join(out) + "\n" if len(out) > 3 else ""


def _range(start: int, length: int) -> str:
    if length == 0:
        return f"{start - 1},0"
    return f"{start}" if length == 1 else f"{start},{length}"
