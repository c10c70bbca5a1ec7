"""Which scope of a Python file a line belongs to, and which scopes a change touches (pure, ``ast``).

A scope is the innermost function a line lies in (``Class.method``, ``outer.inner``: its dotted
qualified name, from its ``def`` line to its last line) or ``MODULE`` for everything that runs at
import time: module-level statements, class bodies outside a method, decorators (evaluated when
the module is imported; a changed decorator changes every call), imports. A file that does not
parse, a new file, and a file that is not Python are ``MODULE`` as a whole.
"""

from __future__ import annotations

import ast
import difflib

MODULE = "<module>"


def line_scopes(source: str, executed: bool = False) -> list[str] | None:
    """The scope of each line (index 0 is line 1); None when the source does not parse. A ``def``
    line is its function's when it changes (its signature and defaults shape every call), but the
    enclosing scope's when it runs (``executed``: coverage sees it run where the def runs)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    scopes = [MODULE] * (source.count("\n") + 1)

    def visit(node: ast.AST, prefix: str, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                for line in range(child.lineno, (child.end_lineno or child.lineno) + 1):
                    scopes[line - 1] = name
                for line in range(child.lineno, child.body[0].lineno) if executed else ():
                    scopes[line - 1] = function
                for decorator in child.decorator_list:  # run where the def runs, not in the body
                    for line in range(decorator.lineno, (decorator.end_lineno or decorator.lineno) + 1):
                        scopes[line - 1] = function
                visit(child, name + ".", name)
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.", function)
            else:
                visit(child, prefix, function)

    visit(tree, "", MODULE)
    return scopes


def _enclosing(scopes: list[str], before: int, after: int) -> str:
    """The scope of lines inserted between old lines ``before`` and ``after`` (0-based; -1 or
    len(scopes): the file's start or end): the function both neighbours share, else MODULE."""
    if before < 0 or after >= len(scopes):
        return MODULE
    shared = scopes[before]
    return shared if shared == scopes[after] else MODULE


def changed_scopes(old: str | None, new: str | None) -> set[str]:
    """The scopes of ``old`` (the file before the change) that a change to ``new`` touches: the
    scope of every replaced or removed line, and of every insertion point. A new file (``old``
    None), a deleted one, or an ``old`` that does not parse: {MODULE}."""
    if old is None or new is None:
        return {MODULE}
    scopes = line_scopes(old)
    if scopes is None:
        return {MODULE}
    before, after = old.splitlines(), new.splitlines()
    touched: set[str] = set()
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for tag, i1, i2, _j1, _j2 in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            touched.update(scopes[i] for i in range(i1, i2))
        elif tag == "insert":
            touched.add(_enclosing(scopes, i1 - 1, i1))
    return touched
