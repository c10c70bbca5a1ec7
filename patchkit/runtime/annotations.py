"""Annotations read as the types they name, and whether a value of one type is certainly not one of
another — what a return type a replacement declares, or a return type that changed between pins,
is judged by.

``Optional[List[int]]``, ``Union[None, list[int]]`` and ``list[int] | None`` are one type (PEP 585,
PEP 604; union members are unordered, as ``typing.Union`` compares them); a string annotation is
read as the expression it holds; ``typing.X`` is ``X``.
"""

from __future__ import annotations

import ast
import copy

from patchkit.analysis.modfacts import dotted_name

TYPING = {"List": "list", "Dict": "dict", "Set": "set", "FrozenSet": "frozenset", "Tuple": "tuple",
          "Type": "type", "Deque": "deque", "DefaultDict": "defaultdict"}  # fmt: skip
ANY = {"Any", "object"}  # every value is one
BUILTIN = {
    "tuple",
    "list",
    "dict",
    "set",
    "frozenset",
    "int",
    "float",
    "complex",
    "str",
    "bytes",
    "bool",
    "None",
}
NUMERIC = {
    ("bool", "int"),
    ("bool", "float"),
    ("int", "float"),
    ("bool", "complex"),
    ("int", "complex"),
    ("float", "complex"),
}  # fmt: skip - PEP 484's numeric tower


def annotation_key(node: ast.AST | None) -> str | None:
    """An annotation as the type it names: typing's aliases and ``Optional``/``Union`` in the
    builtin and ``|`` spelling, union members sorted, a string annotation parsed."""
    return None if node is None else ast.unparse(canonical(node))


def canonical(node: ast.AST) -> ast.expr:
    """The annotation rewritten as ``annotation_key`` reads it (a new tree; ``node`` is kept)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value.strip(), mode="eval").body
        except SyntaxError:
            return node  # type: ignore[return-value]
    return _Canonical().visit(copy.deepcopy(node))


class _Canonical(ast.NodeTransformer):
    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, str):  # a forward reference inside an annotation
            try:
                return self.visit(ast.parse(node.value.strip(), mode="eval").body)
            except SyntaxError:
                return node
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        chain = dotted_name(node) or ""
        if chain.partition(".")[0] in ("typing", "typing_extensions"):
            return self.visit(ast.Name(chain.rpartition(".")[2], ast.Load()))
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Name(TYPING.get(node.id, node.id), ast.Load())

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        node = self.generic_visit(node)  # type: ignore[assignment]
        head = node.value.id if isinstance(node.value, ast.Name) else ""
        members = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head == "Optional":
            return _union([*members, ast.Constant(None)])
        if head == "Union":
            return _union(members)
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        node = self.generic_visit(node)  # type: ignore[assignment]
        return _union([node.left, node.right]) if isinstance(node.op, ast.BitOr) else node


def _union(members: list[ast.expr]) -> ast.expr:
    flat: dict[str, ast.expr] = {}
    for member in members:
        parts = (
            [member.left, member.right]
            if isinstance(member, ast.BinOp) and isinstance(member.op, ast.BitOr)
            else [member]
        )
        for part in parts:
            flat.setdefault(ast.unparse(part), part)
    ordered = [flat[k] for k in sorted(flat)]
    out = ordered[0]
    for member in ordered[1:]:
        out = ast.BinOp(out, ast.BitOr(), member)
    return out


def fits(theirs: ast.expr, ours: ast.expr) -> bool | None:
    """Is every value of type ``theirs`` one of type ``ours``? True, False (certainly not: builtin
    types the other is not, e.g. ``int`` is no ``tuple[int, int]``) or None (reading cannot tell: a
    class from elsewhere may subclass another, or be a protocol). Both canonical."""
    verdicts = []
    for mine in _members(theirs):
        answers = [_member_fits(mine, other) for other in _members(ours)]
        verdicts.append(True if True in answers else None if None in answers else False)
    return False if False in verdicts else None if None in verdicts else True


def _members(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return [*_members(node.left), *_members(node.right)]
    return [node]


def _head(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and node.value is None:
        return "None"
    return dotted_name(node.value if isinstance(node, ast.Subscript) else node) or ast.unparse(node)


def _member_fits(mine: ast.expr, other: ast.expr) -> bool | None:
    head, their_head = _head(mine), _head(other)
    if their_head in ANY or head == "Any" or ast.dump(mine) == ast.dump(other):
        return True
    if head == their_head:
        if not (isinstance(mine, ast.Subscript) and isinstance(other, ast.Subscript)):
            return True  # a bare generic is its every parametrisation
        args = [_args(mine), _args(other)]
        if len(args[0]) != len(args[1]) or any(
            isinstance(a, ast.Constant) and a.value is ... for a in args[0]
        ):
            return None
        inner = [fits(a, b) for a, b in zip(*args)]
        return False if False in inner else None if None in inner else True
    if (head, their_head) in NUMERIC:
        return True
    return False if head in BUILTIN and their_head in BUILTIN else None


def _args(node: ast.Subscript) -> list[ast.expr]:
    return list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
