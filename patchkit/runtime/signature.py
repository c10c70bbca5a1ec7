"""Signatures read from source, in the shape ``inspect.signature`` gives them, and whether a
replacement accepts every call its original accepts.

A parameter is (name, kind, has a default); kinds are inspect's names. Between a replacement and its
original, annotations and default values are shown but not compared (a replacement may leave them
out), except the return type a replacement declares. The descriptor a def is made into
(``staticmethod``, ``classmethod``, ``property``) is part of the signature: Python binds each
differently. Between two pins, ``key`` is what ``inspect.Signature`` equality compares — names,
kinds, defaults, annotations, the return annotation — with the descriptor; annotations are compared
as the types they name (``Optional[List[int]]`` is ``list[int] | None``, PEP 585 and 604).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from patchkit.analysis.modfacts import dotted_name
from patchkit.runtime.annotations import annotation_key, canonical, fits
from patchkit.values import message

POSITIONAL_ONLY = "POSITIONAL_ONLY"
POSITIONAL_OR_KEYWORD = "POSITIONAL_OR_KEYWORD"
VAR_POSITIONAL = "VAR_POSITIONAL"
KEYWORD_ONLY = "KEYWORD_ONLY"
VAR_KEYWORD = "VAR_KEYWORD"

Param = tuple[str, str, bool]  # name, kind, has a default
DESCRIPTORS = {"staticmethod": "staticmethod", "classmethod": "classmethod", "property": "property",
               "cached_property": "property", "setter": "property", "getter": "property",
               "deleter": "property"}  # fmt: skip


def parameters(node: ast.AST) -> list[Param] | None:
    """The parameters of a def or lambda; None for anything else."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return None
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    first_default = len(positional) - len(args.defaults)
    out: list[Param] = []
    for index, arg in enumerate(positional):
        kind = POSITIONAL_ONLY if index < len(args.posonlyargs) else POSITIONAL_OR_KEYWORD
        out.append((arg.arg, kind, index >= first_default))
    if args.vararg is not None:
        out.append((args.vararg.arg, VAR_POSITIONAL, False))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        out.append((arg.arg, KEYWORD_ONLY, default is not None))
    if args.kwarg is not None:
        out.append((args.kwarg.arg, VAR_KEYWORD, False))
    return out


def text(node: ast.AST, made: str | None = None) -> str | None:
    """``@staticmethod (x: int = 3, *args, y, **kw) -> int`` for a def or lambda, as the source
    writes it; ``made``: the descriptor it ends up as, when that is not its own decorator's."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return None
    made = descriptor_text(node) if made is None else made
    rendered = ast.unparse(node.args)
    returns = getattr(node, "returns", None)
    prefix = f"@{made} " if made in DESCRIPTORS or made == "cached_property" else ""
    return f"{prefix}({rendered})" + (f" -> {ast.unparse(returns)}" if returns is not None else "")


def descriptor_text(node: ast.AST) -> str:
    """The decorator that makes a def a descriptor, as written (``cached_property``); '' for none."""
    for decorator in getattr(node, "decorator_list", []):
        last = (dotted_name(decorator) or "").rpartition(".")[2]
        if last in DESCRIPTORS:
            return "property" if last in ("setter", "getter", "deleter") else last
    return ""


def binding(made: str) -> str:
    """How Python binds a class attribute of that descriptor: method | staticmethod | classmethod |
    property (``cached_property`` reads as one) | bound (a method bound already)."""
    return DESCRIPTORS.get(made, made or "method")


def key(node: ast.AST | None) -> tuple | None:
    """What ``inspect.Signature`` equality compares, read from a def: each parameter's name, kind,
    default (as written) and annotation, the return annotation — and the descriptor it is made."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return None
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    rows = [(a, POSITIONAL_ONLY if i < len(args.posonlyargs) else POSITIONAL_OR_KEYWORD, d)
            for i, (a, d) in enumerate(zip(positional, defaults))]  # fmt: skip
    rows += [(args.vararg, VAR_POSITIONAL, None)] if args.vararg else []
    rows += [(a, KEYWORD_ONLY, d) for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    rows += [(args.kwarg, VAR_KEYWORD, None)] if args.kwarg else []
    params = tuple(
        (arg.arg, kind, ast.unparse(default) if default is not None else None, annotation_key(arg.annotation))
        for arg, kind, default in rows
    )
    return binding(descriptor_text(node)), params, annotation_key(getattr(node, "returns", None))


def returns_text(node: ast.AST | None) -> str | None:
    returns = getattr(node, "returns", None)
    return ast.unparse(returns) if returns is not None else None


def incompatibilities(original: list[Param], replacement: list[Param]) -> list[dict[str, Any]]:
    """Why a call the original accepts may fail (or bind differently) on the replacement; [] when none.

    Each reason is a catalogue message naming the parameter (``runtime.sig.*``)."""
    kinds = {kind for _, kind, _ in replacement}
    takes_args, takes_kwargs = VAR_POSITIONAL in kinds, VAR_KEYWORD in kinds
    if takes_args and takes_kwargs:
        return []  # a wrapper that passes everything on
    problems: list[dict[str, Any]] = []
    orig_pos = [p for p in original if p[1] in (POSITIONAL_ONLY, POSITIONAL_OR_KEYWORD)]
    repl_pos = [p for p in replacement if p[1] in (POSITIONAL_ONLY, POSITIONAL_OR_KEYWORD)]
    by_name = {p[0]: p for p in replacement}
    for index, (name, kind, default) in enumerate(orig_pos):
        if index >= len(repl_pos):
            if not takes_args:
                problems.append(message("runtime.sig.no-place", name=name))
            continue
        theirs = repl_pos[index]
        if kind == POSITIONAL_OR_KEYWORD and theirs[0] != name and not takes_kwargs and index > 0:
            problems.append(message("runtime.sig.renamed", index=index + 1, ours=name, theirs=theirs[0]))
        if default and not theirs[2]:
            problems.append(message("runtime.sig.lost-default", name=name))
    for name, kind, default in original:
        if kind == KEYWORD_ONLY:
            theirs = by_name.get(name)
            if theirs is None and not takes_kwargs:
                problems.append(message("runtime.sig.no-keyword", name=name))
            elif theirs is not None and default and not theirs[2]:
                problems.append(message("runtime.sig.lost-default", name=name))
    if any(k == VAR_POSITIONAL for _, k, _ in original) and not takes_args:
        problems.append(message("runtime.sig.no-args"))
    if any(k == VAR_KEYWORD for _, k, _ in original) and not takes_kwargs:
        problems.append(message("runtime.sig.no-kwargs"))
    orig_names = {p[0] for p in original}
    for index, (name, kind, default) in enumerate(replacement):
        if kind in (VAR_POSITIONAL, VAR_KEYWORD) or default:
            continue
        if name not in orig_names and not (kind != KEYWORD_ONLY and index < len(orig_pos)):
            problems.append(message("runtime.sig.extra-required", name=name))
    return problems


def shape(params: list[Param] | None) -> list[list[object]] | None:
    """The comparable form of a signature (what the real witness reports too)."""
    return None if params is None else [[name, kind, default] for name, kind, default in params]


def binding_problems(
    original: ast.AST, replacement: ast.AST, made: str, member: bool, class_reads_only: Callable[[], bool]
) -> list[dict[str, Any]]:
    """A class attribute (``member``) Python binds another way than its original, and a return type
    the replacement declares that is not the original's. A staticmethod and a plain function bind
    alike when read through the class: ``class_reads_only`` says whether vLLM reads it only so."""
    problems: list[dict[str, Any]] = []
    ours, theirs = binding(descriptor_text(original)), binding(made)
    alike = {ours, theirs} <= {"staticmethod", "method", "bound"} and "method" in {ours, theirs}
    if member and ours != theirs and not (alike and class_reads_only()):
        problems.append(message("runtime.sig.descriptor", original=message(f"runtime.descriptor.{ours}"),
                                replacement=message(f"runtime.descriptor.{theirs}")))  # fmt: skip
    declared, returns = _returns(replacement), _returns(original)
    if declared is not None and returns is not None and fits(declared, returns) is False:
        problems.append(
            message(
                "runtime.sig.return-differs", ours=returns_text(original), theirs=returns_text(replacement)
            )
        )
    return problems


def return_changed(old: ast.AST | None, new: ast.AST, replacement: ast.AST | None) -> list[dict[str, Any]]:
    """The original's declared return type changed between the pins to one a value of the older
    cannot be, and the replacement, written for the older, does not declare one that fits the new."""
    before, after = _returns(old), _returns(new)
    if before is None or after is None or fits(before, after) is not False:
        return []
    declared = _returns(replacement)
    if declared is not None:
        return []  # what it declares is checked against the new return by binding_problems
    return [message("runtime.sig.return-changed", old=returns_text(old), new=returns_text(new))]


def _returns(node: ast.AST | None) -> ast.expr | None:
    """The declared return type, as the type it names (``annotations.canonical``)."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.returns is None:
        return None
    return canonical(node.returns)
