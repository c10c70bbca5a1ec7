"""Environment variables set at runtime: a default changed in code, invisible to envs.py readers."""

from __future__ import annotations

import ast

from patchkit.guide.findings import make_finding
from patchkit.guide.model import Finding
from patchkit.guide.view import FileView


def env_write_findings(view: FileView) -> list[Finding]:
    return _env_write_findings(view) if view.post is not None else []


def _is_os(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "os"


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ" and _is_os(node.value)


def _env_write_findings(view: FileView) -> list[Finding]:
    """An added line that sets an environment variable at runtime (``os.environ[X] = v``,
    ``os.environ.setdefault(X, v)``, ``os.putenv(X, v)``): a default changed in code, for this
    process and every process it starts, where no reader of ``envs.py`` will see it."""
    out = []
    for node in view.post_nodes.of(ast.Assign, ast.Call):
        if node.lineno not in view.added:
            continue
        key = value = None
        if isinstance(node, ast.Assign):
            target = node.targets[0]
            if isinstance(target, ast.Subscript) and _is_environ(target.value):
                key, value = target.slice, node.value
        elif isinstance(node.func, ast.Attribute) and len(node.args) >= 2:
            func = node.func
            if (func.attr == "setdefault" and _is_environ(func.value)) or (
                func.attr == "putenv" and _is_os(func.value)
            ):
                key, value = node.args[0], node.args[1]
        if key is None:
            continue
        name = key.value if isinstance(key, ast.Constant) and isinstance(key.value, str) else ast.unparse(key)
        shown = repr(value.value) if isinstance(value, ast.Constant) else ast.unparse(value)[:60]
        out.append(
            make_finding(
                "env-set-at-runtime",
                "medium",
                view.path,
                node.lineno,
                [view.added[node.lineno].strip()],
                name=name,
                value=shown,
            )  # fmt: skip
        )
    return out
