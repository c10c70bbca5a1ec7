"""Calls a patch adds or removes: a cache call gone, a call passing an argument its callee does not
accept (the "check every caller" finding pointing the other way: the call site changed)."""

from __future__ import annotations

import ast
import re

from patchkit.guide.behaviour import dotted
from patchkit.guide.findings import call_name, make_finding
from patchkit.guide.model import Finding
from patchkit.guide.view import FileView

_CACHE_NAME = re.compile(r"cache", re.I)


def cache_findings(view: FileView) -> list[Finding]:
    return _cache_calls_removed(view) if view.pre is not None else []


def _cache_calls_removed(view: FileView) -> list[Finding]:
    """A call or decorator with ``cache`` in its name on a removed line, gone from the file."""
    kept = "\n".join(view.added.values())
    out = []
    seen = set()
    for node in view.pre_nodes.of(ast.Call, ast.FunctionDef, ast.AsyncFunctionDef):
        nodes = node.decorator_list if not isinstance(node, ast.Call) else [node]
        for item in nodes:
            name = call_name(item) if isinstance(item, ast.Call) else (dotted(item) or [""])[-1]
            if item.lineno not in view.removed or not _CACHE_NAME.search(name) or name in seen:
                continue
            if re.search(rf"\b{re.escape(name)}\b", kept):
                continue
            seen.add(name)
            evidence = [view.removed[item.lineno].strip()]
            out.append(
                make_finding("cache-call-removed", "medium", view.path, item.lineno, evidence, name=name)
            )
    return out


def call_arg_findings(views: list[FileView]) -> list[Finding]:
    """An added call passes a keyword its callee (defined in the patch's files) does not accept."""
    defs: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    for view in views:
        for fn in view.post_nodes.of(ast.FunctionDef, ast.AsyncFunctionDef):
            defs.setdefault(fn.name, []).append(fn)
    out = []
    for view in views:
        own = {fn.name: [fn] for fn in view.post_nodes.of(ast.FunctionDef, ast.AsyncFunctionDef)}
        for node in view.post_nodes.of(ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                callees = defs.get(func.id, [])
            elif isinstance(func, ast.Attribute) and dotted(func.value) == ["self"]:
                callees = own.get(func.attr, [])  # a method of this file's classes
            else:
                continue
            if node.lineno not in view.added or not callees or not node.keywords:
                continue
            accepted = [
                {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
                for fn in callees
                if fn.args.kwarg is None
            ]
            if len(accepted) != len(callees):
                continue  # some callee takes **kwargs
            extra = [k.arg for k in node.keywords if k.arg and all(k.arg not in names for names in accepted)]
            if extra:
                evidence = [view.added[node.lineno].strip()]
                name = call_name(node)
                out.append(
                    make_finding(
                        "call-passes-unknown-arg",
                        "high",
                        view.path,
                        node.lineno,
                        evidence,
                        name=name,
                        args=", ".join(extra),
                    )
                )
    return out
