"""One ``RuntimeTarget`` per vLLM object a plugin module replaces, resolved in the pinned tree (and,
with an older pin, compared with it)."""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass

from patchkit.analysis.modfacts import dotted_name
from patchkit.audit.model import RuntimeTarget
from patchkit.runtime import signature
from patchkit.runtime.access import class_reads_only
from patchkit.runtime.registry import items_for
from patchkit.runtime.resolve import Definition, Resolution, SourceIndex, Unresolved
from patchkit.runtime.since import compare
from patchkit.runtime.sites import ModuleScan, Site, expand
from patchkit.values import message

WRAPPERS = ("staticmethod", "classmethod", "property", "cached_property")  # what a def is wrapped into


@dataclass
class Trees:
    """The pinned tree, the older pin's (``--since``) and the plugin's own sources."""

    base: SourceIndex
    plugin: SourceIndex
    old: SourceIndex | None = None


def module_targets(scan: ModuleScan, trees: Trees, registry: dict | None) -> list[RuntimeTarget]:
    groups: dict[str, list[Site]] = {}
    for site in scan.sites:
        handed = trees.base.resolve(site.handed) if site.handed else None
        if handed is not None and not (isinstance(handed, Definition) and handed.kind == "module"):
            continue  # @register("vllm.x.f") names what the def replaces; its first parameter is its own
        groups.setdefault(site.target, []).append(site)
    own = {id(node) for node in ast.walk(scan.tree)}
    out = []
    for target, sites in groups.items():
        found = trees.base.resolve(target, scan.imports)
        if (
            all(s.decorator_module for s in sites)
            and isinstance(found, Definition)
            and found.kind == "module"
        ):
            continue  # @register("vllm.x"): the module is handed to the def; its assignments are the sites
        out.append(_target(scan, target, sites, found, trees, registry, own))
    for owner, line in scan.unnamed:  # setattr(vllm_object, computed_name, ours)
        out.append(
            RuntimeTarget(
                target=f"{owner}.?",
                kind="setattr",
                lines=[line],
                status="unknown",
                reason=message("runtime.why.setattr-name"),
            )
        )
    return out


def _target(
    scan: ModuleScan,
    target: str,
    sites: list[Site],
    found: Resolution,
    trees: Trees,
    registry: dict | None,
    own: set[int],
) -> RuntimeTarget:
    first = sites[0]
    replacement = replacement_node(scan, first, trees.plugin)
    made = replacement_made(first, replacement)
    record = RuntimeTarget(
        target=target,
        kind=first.kind,
        lines=sorted({s.line for s in sites}),
        status="present",
        replacement=first.replacement_text,
        guard=list(first.guard),
        captured=sorted(scan.captures.get(target, [])),
        original_kind=found.kind,
        registry=items_for(registry, target),
    )
    if isinstance(found, Definition):
        record.defined_in, record.via = found.where, list(found.via)
        record.source_sha256 = _sha(trees.base.source(found)) if found.file and found.kind != "module" else ""
        if found.kind == "class" and isinstance(replacement, ast.ClassDef):
            record.kind = "class-swap"
        _signatures(record, found, replacement, made, scan, trees.base)
    else:
        record.status, record.reason = found.reason, found.why
        if found.reason == "absent":
            elsewhere = named_elsewhere(trees.base, found, target)
            record.moved_to = [f"{path} ({d.file}:{d.line})" for path, d in elsewhere]
            record.status = absent_status(scan, record, sites, found, trees.base, [d for _, d in elsewhere])
    if trees.old is not None:
        old = trees.old.resolve(target, scan.imports)
        if isinstance(old, Definition):
            record.old_defined_in = old.where
            record.old_signature = _signature_text(old, trees.old) or ""
            if isinstance(found, Definition) and record.replacement_signature and found.node is not None:
                record.signature_problems += signature.return_changed(old.node, found.node, replacement)
        status, record.upstream_diff = compare(target, old, found, trees.old, trees.base)
        if status == "absent":  # in neither pin: the plugin adds it, or it never reached vLLM
            status = record.status
        record.status = status
    if replacement is not None and id(replacement) in own:
        record.uses = _uses_within(scan, replacement, trees.base)
    return record


def _signatures(
    record: RuntimeTarget,
    found: Definition,
    replacement: ast.AST | None,
    made: str,
    scan: ModuleScan,
    base: SourceIndex,
) -> None:
    record.signature = _signature_text(found, base) or ""
    original = _original_params(found, base)
    record.parameters = signature.shape(original)
    if original is None or replacement is None:
        return
    if isinstance(replacement, ast.ClassDef):
        init = next(
            (n for n in replacement.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None
        )
        if init is None:
            if _subclasses(scan, replacement, record.target):
                record.replacement_signature = record.signature
            return
        replacement = init
    theirs = signature.parameters(replacement)
    if theirs is None:
        return
    record.replacement_signature = signature.text(replacement, made) or ""
    record.signature_problems = signature.incompatibilities(original, theirs)
    if found.kind == "function" and found.node is not None:
        member = "." in found.qualname  # a class attribute: Python binds it by its descriptor
        owner, name = found.qualname.rpartition(".")[0], found.qualname.rpartition(".")[2]
        only = lambda: class_reads_only(base, owner, name)  # noqa: E731 - read the tree only if it matters
        record.signature_problems[:0] = signature.binding_problems(
            found.node, replacement, made, member, only
        )


def _original_params(found: Definition, index: SourceIndex) -> list[signature.Param] | None:
    if found.kind == "class":
        init = index.member(found, "__init__", f"{found.path}.__init__")
        return signature.parameters(init.node) if isinstance(init, Definition) and init.node else None
    return signature.parameters(found.node) if found.node is not None else None


def _signature_text(found: Definition, index: SourceIndex) -> str | None:
    if found.kind == "class":
        init = index.member(found, "__init__", f"{found.path}.__init__")
        return signature.text(init.node) if isinstance(init, Definition) and init.node else None
    return signature.text(found.node) if found.node is not None else None


def _subclasses(scan: ModuleScan, node: ast.ClassDef, target: str) -> bool:
    return any(expand(scan.aliases, base) == target for base in node.bases)


def replacement_made(site: Site, node: ast.AST | None) -> str:
    """The descriptor the replacement is once set: ``staticmethod(f)``, a decorated def, or a def
    read through its class (a staticmethod's function is plain then, a classmethod's bound)."""
    value = site.replacement
    if isinstance(value, ast.Call) and (dotted_name(value.func) or "").rpartition(".")[2] in WRAPPERS:
        return (dotted_name(value.func) or "").rpartition(".")[2]
    made = signature.descriptor_text(node) if node is not None else ""
    if isinstance(value, ast.Attribute) and made in ("staticmethod", "classmethod"):
        return "" if made == "staticmethod" else "bound"
    return made


def replacement_node(scan: ModuleScan, site: Site, plugin: SourceIndex) -> ast.AST | None:
    """The def, class or lambda that replaces the target, where the plugin's source shows it."""
    node = site.replacement
    if (
        isinstance(node, ast.Call)
        and (dotted_name(node.func) or "").rpartition(".")[2] in WRAPPERS
        and node.args
    ):
        node = node.args[0]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
        return node
    chain = dotted_name(node) if node is not None else None
    if chain is None:
        return None
    root, _, rest = chain.partition(".")
    if root in scan.defs and not rest:
        return scan.defs[root]
    if root in scan.defs and isinstance(scan.defs[root], ast.ClassDef) and "." not in rest:
        for inner in scan.defs[root].body:  # Ours.method, in this module
            if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) and inner.name == rest:
                return inner
    if root in scan.defs:
        found = plugin.resolve(f"{scan.module}.{chain}")
        if isinstance(found, Definition) and found.node is not None:
            return found.node
        return scan.defs[root] if not rest else None
    if (full := expand(scan.aliases, node)) is not None and not full.startswith("vllm."):
        found = plugin.resolve(full)
        if isinstance(found, Definition) and found.node is not None and found.kind in ("function", "class"):
            return found.node
    if not rest:  # a def nested in a function (registered patches build their replacement inside)
        for inner in ast.walk(scan.tree):
            if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) and inner.name == root:
                return inner
    return None


def absent_status(
    scan: ModuleScan,
    record: RuntimeTarget,
    sites: list[Site],
    found: Unresolved,
    base: SourceIndex,
    elsewhere: list[Definition],
) -> str:
    """missing (vLLM should have it) or added (the plugin's own attribute) for a target the pin lacks.

    missing: the plugin reads the original first, or its registry names the target, or the owner is
    a module and vLLM defines that name at module level elsewhere (an import the module lost);
    added: the plugin sets it only ``if not hasattr(...)``, keeps a vLLM original there or reads the
    attribute itself, or none of that."""
    if adds_when_absent(record):
        return "added"
    if record.captured or record.registry:
        return "missing"
    for site in sites:
        if site.replacement_path and isinstance(base.resolve(site.replacement_path), Definition):
            return "added"
    parent, _, name = record.target.rpartition(".")
    if name in scan.read_attributes:
        return "added"
    owner = found.owner
    if owner is not None and owner.kind == "module" and owner.path == parent:
        if any("." not in d.qualname for d in elsewhere):
            return "missing"
    return "added"


def adds_when_absent(record: RuntimeTarget) -> bool:
    """The site runs only ``if not hasattr(owner, "name")``: the plugin adds what vLLM lacks."""
    name = re.escape(record.target.rpartition(".")[2])
    pattern = re.compile(rf"if not hasattr\([^,]+,\s*['\"]{name}['\"]\)")
    return any(pattern.fullmatch(guard) for guard in record.guard)


def named_elsewhere(base: SourceIndex, missing: Unresolved, target: str) -> list[tuple[str, Definition]]:
    """Same-named definitions elsewhere in the pin, for the first part of ``target`` that is gone, or
    (a gone module) for the first later part whose same-named definition carries the rest of the
    path: (the target's path through it, the definition). A path with parts after the definition is
    kept only where it resolves in the pin (``vllm.attention.layer.Attention.forward`` is not at a
    method named ``attention``)."""
    owner = missing.owner.path if missing.owner is not None else ""
    rest = target[len(owner) + 1 :] if owner and target.startswith(owner + ".") else target
    parts = rest.split(".")
    for index, name in enumerate(parts):
        tail = parts[index + 1 :]
        if index and not tail:
            break  # the last name alone, after a gone module: any method of that name, no move
        out = []
        for found in base.named_elsewhere(name, "vllm", classes=bool(tail)):  # a def carries no path
            path = ".".join([found.path, *tail])
            if path != target and (not tail or isinstance(base.resolve(path), Definition)):
                out.append((path, found))
        if out:
            return out
    return []


def _uses_within(scan: ModuleScan, node: ast.AST, base: SourceIndex) -> list[dict]:
    start, end = getattr(node, "lineno", 0), getattr(node, "end_lineno", 0) or 0
    out = []
    for use in scan.uses:
        if start <= use.line <= end:
            status = use_status(base.resolve(use.name, scan.imports))
            out.append({"name": use.name, "line": use.line, "status": status})
    return out


def use_status(found: Resolution) -> str:
    """ok | absent | unknown"""
    return "ok" if isinstance(found, Definition) else found.reason


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest() if text else ""
