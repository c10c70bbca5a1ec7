"""Where a Python body binds a name, read from its ``ast``: the shared rules of ``resolve`` (vLLM's
tree) and ``sites`` (the plugin's modules)."""

from __future__ import annotations

import ast


def module_name(rel: str) -> str:
    path = rel.removesuffix(".py")
    return path.removesuffix("/__init__").replace("/", ".")


def absolute_module(node: ast.ImportFrom, module_name: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module_name.split(".")
    keep = len(parts) - node.level + (1 if is_package else 0)
    base = parts[: max(keep, 0)]
    return ".".join(base + ([node.module] if node.module else []))


def first_line(node: ast.AST) -> int:
    decorators = getattr(node, "decorator_list", None) or []
    return min([node.lineno, *(d.lineno for d in decorators)])


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of a body that may run at import, flattened through if / try / with."""
    out: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If):
            out += runtime_statements(node.orelse if is_type_checking(node.test) else node.body + node.orelse)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            handlers = [s for h in node.handlers for s in h.body]
            out += runtime_statements(node.body + handlers + node.orelse + node.finalbody)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            out += runtime_statements(node.body)
        else:
            out.append(node)
    return out


def binds(node: ast.stmt, name: str, in_class: bool) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    if isinstance(node, ast.Assign):
        return any(target_binds(t, name) for t in node.targets)
    if isinstance(node, ast.AnnAssign):
        return node.value is not None and target_binds(node.target, name)
    if isinstance(node, ast.Import) and not in_class:
        return any((a.asname or a.name.split(".")[0]) == name for a in node.names)
    if isinstance(node, ast.ImportFrom) and not in_class:
        return any((a.asname or a.name) == name for a in node.names if a.name != "*")
    return False


def target_binds(target: ast.expr, name: str) -> bool:
    if isinstance(target, ast.Name):
        return target.id == name
    if isinstance(target, (ast.Tuple, ast.List)):
        return any(target_binds(t, name) for t in target.elts)
    return False


def last_binding(body: list[ast.stmt], name: str, in_class: bool = False) -> ast.stmt | None:
    found = None
    for node in runtime_statements(body):
        if binds(node, name, in_class):
            found = node
    return found


def star_imports(body: list[ast.stmt]) -> list[ast.ImportFrom]:
    return [
        n
        for n in runtime_statements(body)
        if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names)
    ]


def definitions(module: ast.Module) -> list[tuple[ast.stmt, str]]:
    out: list[tuple[ast.stmt, str]] = []
    for node in runtime_statements(module.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((node, node.name))
        elif isinstance(node, ast.ClassDef):
            out.append((node, node.name))
            for inner in runtime_statements(node.body):
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    out.append((inner, f"{node.name}.{inner.name}"))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out += [(node, t.id) for t in targets if isinstance(t, ast.Name)]
    return out


def guard_texts(test: ast.expr) -> tuple[str, str]:
    """("if T", "if not (T)") for an ``if`` and its ``else``; ``if not X`` has the else ``if X``."""
    text = ast.unparse(test)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return f"if {text}", f"if {ast.unparse(test.operand)}"
    return f"if {text}", f"if not ({text})"
