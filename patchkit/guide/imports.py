"""Added imports of names that exist nowhere: a light static check over the tree after the patch.

``from vllm.a.b import x`` on an added line: ``vllm/a/b.py`` (or its package ``__init__.py``) must
define ``x`` at module level (def, class, assignment, import) or be a package with a submodule
``x``. A module with ``__getattr__`` or a star import is not judged. Modules outside the package
roots the tree holds (third-party ones) are not judged either.
"""

from __future__ import annotations

import ast

from patchkit.guide.findings import make_finding
from patchkit.guide.model import Finding
from patchkit.guide.view import FileView, Source


def _module_file(module: str, read: Source) -> tuple[str | None, bytes | None]:
    base = module.replace(".", "/")
    for path in (f"{base}.py", f"{base}/__init__.py"):
        data = read(path)
        if data is not None:
            return path, data
    return None, None


def _defined(tree: ast.Module) -> set[str] | None:
    """Names a module defines at top level (into if/try blocks); None: it cannot be judged."""
    names: set[str] = set()
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name == "__getattr__":
                return None
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for part in ("body", "orelse", "finalbody", "handlers"):
                for item in getattr(node, part, []):
                    todo += item.body if isinstance(item, ast.ExceptHandler) else [item]
    return names


def _absolute(view: FileView, node: ast.ImportFrom) -> str | None:
    if not node.level:
        return node.module
    parts = view.path[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    parts = parts[: len(parts) - node.level] if node.level <= len(parts) else []
    return ".".join(parts + ([node.module] if node.module else [])) or None


def import_findings(views: list[FileView], post: Source, roots: tuple[str, ...] = ("vllm",)) -> list[Finding]:
    out = []
    cache: dict[str, set[str] | None] = {}
    for view in views:
        for node in view.post_nodes.of(ast.ImportFrom):
            module = _absolute(view, node) if node.lineno in view.added else None
            if not module or module.split(".")[0] not in roots:
                continue
            path, data = _module_file(module, post)
            if data is None:
                if module.rsplit(".", 1)[-1].startswith("_"):
                    continue  # a compiled or generated module (vllm._C, vllm._version)
                missing = [module]
            else:
                if module not in cache:
                    try:
                        cache[module] = _defined(ast.parse(data.decode("utf-8", "replace")))
                    except (SyntaxError, ValueError):
                        cache[module] = None
                defined = cache[module]
                if defined is None:
                    continue
                missing = [
                    a.name
                    for a in node.names
                    if a.name not in defined and _module_file(f"{module}.{a.name}", post)[1] is None
                ]
            for name in missing:
                evidence = [view.added[node.lineno].strip()[:160]]
                out.append(
                    make_finding(
                        "import-missing", "high", view.path, node.lineno, evidence, name=name, module=module
                    )
                )
    return out
