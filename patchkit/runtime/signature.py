"""Signatures read from source, in the shape ``inspect.signature`` gives them, and whether a
replacement accepts every call its original accepts.

A parameter is (name, kind, has a default); kinds are inspect's names. Annotations and default values
are shown but never compared: the real interpreter evaluates them, a reader cannot.
"""

from __future__ import annotations

import ast
from typing import Any

from patchkit.values import message

POSITIONAL_ONLY = "POSITIONAL_ONLY"
POSITIONAL_OR_KEYWORD = "POSITIONAL_OR_KEYWORD"
VAR_POSITIONAL = "VAR_POSITIONAL"
KEYWORD_ONLY = "KEYWORD_ONLY"
VAR_KEYWORD = "VAR_KEYWORD"

Param = tuple[str, str, bool]  # name, kind, has a default


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


def text(node: ast.AST) -> str | None:
    """``(self, x: int = 3, *args, y, **kw) -> int`` for a def or lambda, as the source writes it."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return None
    rendered = ast.unparse(node.args)
    returns = getattr(node, "returns", None)
    return f"({rendered})" + (f" -> {ast.unparse(returns)}" if returns is not None else "")


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
