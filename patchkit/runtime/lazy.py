"""Which names a module's ``__getattr__`` (PEP 562) can answer, where its body reads as a table.

Python calls a module's ``__getattr__`` for a name the module does not bind; whatever it does not
answer raises ``AttributeError``. The shapes read here (vLLM's lazy imports, ``vllm.envs``, the
platform): branches on ``name == "x"``, ``name in TABLE`` (a literal of strings bound once at the
module's top), ``name in globals()`` (a name the module binds, which the reader found before it got
here), each way round, ending in ``raise AttributeError``. Anything else: None, "cannot tell".
"""

from __future__ import annotations

import ast

from patchkit.analysis.bindings import last_binding

QUIET = (ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Pass)


def answers(function: ast.AST, module: list[ast.stmt]) -> frozenset[str] | None:
    """The names ``function`` (a module's ``__getattr__``) may answer; None when reading cannot tell."""
    if not isinstance(function, ast.FunctionDef) or not function.args.args:
        return None
    found = _answers(function.body, function.args.args[0].arg, module)
    return None if found is None else frozenset(found)


def _answers(body: list[ast.stmt], param: str, module: list[ast.stmt]) -> set[str] | None:
    for index, node in enumerate(body):
        if isinstance(node, QUIET) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            continue
        if isinstance(node, ast.Raise):
            return set() if _attribute_error(node) else None
        if not isinstance(node, ast.If) or (read := _test(node.test, param, module)) is None:
            return None
        names, negated = read
        if not negated:  # if name in T: (answers T) — else and after: the rest
            rest = _answers([*node.orelse, *body[index + 1 :]], param, module)
            return None if rest is None else names | rest
        closed = _answers(node.body, param, module)  # if name not in T: raise — then only T goes on
        return names if closed == set() else None
    return None  # falls off the end: returns None for every name


def _test(test: ast.expr, param: str, module: list[ast.stmt]) -> tuple[set[str], bool] | None:
    """(names the test is about, negated) for ``param == 'x'``, ``param in T`` and their negations."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        parts = [_test(v, param, module) for v in test.values]
        if any(p is None or p[1] for p in parts):
            return None
        return set().union(*(p[0] for p in parts if p is not None)), False
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Name)):
        return None
    if test.left.id != param:
        return None
    op, right = test.ops[0], test.comparators[0]
    if isinstance(op, (ast.Eq, ast.NotEq)):
        literal = _strings([right])
        return (literal, isinstance(op, ast.NotEq)) if literal is not None else None
    if not isinstance(op, (ast.In, ast.NotIn)):
        return None
    names = _table(right, module)
    return (names, isinstance(op, ast.NotIn)) if names is not None else None


def _table(node: ast.expr, module: list[ast.stmt]) -> set[str] | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("globals", "vars"):
        return set() if not node.args else None  # the module's own names: bound, so read before this
    if isinstance(node, ast.Name):
        binding = last_binding(module, node.id)
        if _mutated(node.id, module):
            return None
        if isinstance(binding, (ast.Assign, ast.AnnAssign)) and binding.value is not None:
            node = binding.value
    if isinstance(node, ast.Dict):
        return _strings(node.keys) if all(k is not None for k in node.keys) else None
    if isinstance(node, (ast.Set, ast.List, ast.Tuple)):
        return _strings(node.elts)
    return None


def _strings(nodes: list) -> set[str] | None:
    if all(isinstance(n, ast.Constant) and isinstance(n.value, str) for n in nodes):
        return {n.value for n in nodes}
    return None


def _attribute_error(node: ast.Raise) -> bool:
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return isinstance(exc, ast.Name) and exc.id == "AttributeError"


def _mutated(name: str, module: list[ast.stmt]) -> bool:
    """``name[k] = …``, ``name.update(…)`` and the like anywhere in the module: the table grows."""
    for stmt in module:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
                if isinstance(node.value, ast.Name) and node.value.id == name:
                    return True
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == name:
                if node.attr in ("update", "setdefault", "add", "append", "extend", "insert", "__setitem__"):
                    return True
    return False
