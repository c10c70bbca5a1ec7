"""How the pinned vLLM reads a class attribute: only through the class (``Cls.f``, ``cls.f``), or
also through an instance (``self.f``) — where a ``staticmethod`` and a plain function differ."""

from __future__ import annotations

import ast
import re

from patchkit.runtime.resolve import SourceIndex


def class_reads_only(index: SourceIndex, owner: str, name: str) -> bool:
    """Every read of ``.name`` in the pin's ``vllm`` package goes through ``owner`` (the class's name)
    or ``cls``, and there is at least one: Python then binds a staticmethod and a plain function alike."""
    pattern = re.compile(rf"\.{re.escape(name)}\b")
    seen = False
    for _, tree in index.matching(pattern, "vllm", "." + name):
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == name:
                if not (isinstance(node.value, ast.Name) and node.value.id in (owner, "cls")):
                    return False  # self.f, obj.f, super().f: an instance may bind it
                seen = True
    return seen
