"""Modules a vLLM build makes that its sdist holds no Python source for: the compiled extensions
its ``setup.py`` declares (``CMakeExtension(name="vllm._C")``, ``Extension("vllm.x", ...)``), and
the packages they sit in. A reader cannot see inside them, nor say one is absent: "unknown"."""

from __future__ import annotations

import ast
from pathlib import Path

from patchkit.analysis.modfacts import dotted_name


def compiled_modules(root: Path) -> frozenset[str]:
    """The dotted names ``root/setup.py`` builds as extensions, with their parent packages."""
    try:
        tree = ast.parse((root / "setup.py").read_text("utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not (dotted_name(node.func) or "").endswith("Extension"):
            continue
        given = [k.value for k in node.keywords if k.arg == "name"] + node.args[:1]
        for value in given:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                parts = value.value.split(".")
                names |= {".".join(parts[:end]) for end in range(1, len(parts) + 1)}
    return frozenset(names)
