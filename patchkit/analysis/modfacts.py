"""What one Python module's source tells the static check: its top-level names and signatures
(``facts_of``: what other modules look up in it) and what it imports, calls and reads
(``uses_of``: for a file being checked). Parsed once per content, kept in the persistent cache."""

from __future__ import annotations

import ast
import hashlib
import re
import warnings
from dataclasses import dataclass, field, fields

from patchkit import cache

_DATACLASS = {"dataclass", "config", "dataclasses.dataclass", "pydantic.dataclasses.dataclass"}
_OPTIONAL = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


@dataclass
class Facts:
    """What one module's source tells: its top-level names and what it imports and calls."""

    error: str | None = None
    names: set[str] = field(default_factory=set)
    dynamic: bool = False
    keys: set[str] = field(default_factory=set)  # string keys of module-level dict literals
    origins: dict[str, tuple[str, str]] = field(default_factory=dict)  # imported name → (module, name)
    signatures: dict[str, frozenset[str] | None] = field(default_factory=dict)
    class_attrs: dict[str, list[str] | None] = field(default_factory=dict)  # None: has bases
    imports: list[tuple[int, str, str | None]] = field(default_factory=list)  # (line, module, name)
    modules: dict[str, str] = field(default_factory=dict)  # local name → first-party module it binds
    calls: list[tuple[int, str, list[str]]] = field(default_factory=list)  # (line, local, keywords)
    attributes: list[tuple[int, str, str]] = field(default_factory=list)  # (line, local, attr)

    def to_json(self) -> dict:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, set):
                value = sorted(value)
            elif f.name == "signatures":
                value = {k: sorted(v) if v is not None else None for k, v in value.items()}
            out[f.name] = value
        return out

    @classmethod
    def from_json(cls, data: dict) -> Facts:
        facts = cls(**data)
        facts.names, facts.keys = set(facts.names), set(facts.keys)
        facts.origins = {k: tuple(v) for k, v in facts.origins.items()}
        facts.signatures = {k: frozenset(v) if v is not None else None for k, v in facts.signatures.items()}
        facts.class_attrs = {k: list(v) if v is not None else None for k, v in facts.class_attrs.items()}
        facts.imports = [tuple(i) for i in facts.imports]
        facts.calls = [tuple(c) for c in facts.calls]
        facts.attributes = [tuple(a) for a in facts.attributes]
        return facts


_CACHE_KIND = "static-facts-4"  # bump when what ``Facts`` records changes
_FACTS: dict[tuple[str, bytes], Facts] = {}
_USES: dict[tuple[str, bytes], Facts] = {}
_TREES: dict[tuple[str, bytes], ast.Module | str] = {}


def _tree(path: str, source: bytes) -> ast.Module | str:
    key = (path, source)
    if key not in _TREES:
        if len(_TREES) > 2000:
            _TREES.clear()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _TREES[key] = ast.parse(source, path)
        except SyntaxError as exc:
            _TREES[key] = f"line {exc.lineno}: {exc.msg}"
        except ValueError as exc:
            _TREES[key] = str(exc)
    return _TREES[key]


def facts_of(path: str, source: bytes) -> Facts:
    """A module's top-level names and signatures (what other modules look up in it)."""
    key = (path, source)
    if key not in _FACTS:
        if len(_FACTS) > 4000:
            _FACTS.clear()
        _FACTS[key] = _load(path, source, uses=False) or _exports(path, source)
    return _FACTS[key]


def _exports(path: str, source: bytes) -> Facts:
    facts = Facts()
    tree = _tree(path, source)
    if isinstance(tree, str):
        facts.error = tree
    else:
        _top(tree.body, facts, path)
        facts.names |= {n.strip() for found in _GLOBAL.findall(source) for n in found.decode().split(",")}
    _store(path, source, facts, uses=False)
    return facts


_GLOBAL = re.compile(rb"^[ \t]+global[ \t]+([\w, \t]+)$", re.M)


def _cache_key(path: str, source: bytes, uses: bool) -> str:
    digest = hashlib.sha256(path.encode() + b"\0" + source).hexdigest()
    return f"{digest}-{'uses' if uses else 'top'}"


def _load(path: str, source: bytes, uses: bool) -> Facts | None:
    """Facts of this exact content from the persistent cache (a base module is parsed once, ever)."""
    try:
        data = cache.get_json(_CACHE_KIND, _cache_key(path, source, uses))
        return Facts.from_json(data) if isinstance(data, dict) else None
    except (TypeError, ValueError, AttributeError, OSError):
        return None


def _store(path: str, source: bytes, facts: Facts, uses: bool) -> None:
    try:
        cache.put_json(_CACHE_KIND, _cache_key(path, source, uses), facts.to_json())
    except OSError:
        pass  # a read-only cache only costs time


def uses_of(path: str, source: bytes) -> Facts:
    """``facts_of`` plus what the module imports, calls and reads (for a file being checked)."""
    key = (path, source)
    if key not in _USES:
        if len(_USES) > 2000:
            _USES.clear()
        facts = _load(path, source, uses=True)
        if facts is None:
            facts = Facts(**{f.name: getattr(facts_of(path, source), f.name) for f in fields(Facts)})
            facts.imports, facts.modules, facts.calls, facts.attributes = [], {}, [], []
            tree = _tree(path, source)
            if not isinstance(tree, str):
                _uses(tree, facts, path)
            _store(path, source, facts, uses=True)
        _USES[key] = facts
    return _USES[key]


def module_name(path: str) -> str:
    parts = path[:-3].split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _absolute(path: str, level: int, module: str | None) -> str:
    if not level:
        return module or ""
    package = path.split("/")[:-1]
    package = package[: len(package) - (level - 1)] if level > 1 else package
    return ".".join([*package, *([module] if module else [])])


def _top(body: list[ast.stmt], facts: Facts, path: str) -> None:
    """Module-level bindings, through if/try/with/for bodies (not into defs or classes)."""
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            facts.names.add(node.name)
            facts.signatures[node.name] = _accepts(node)
            if node.name == "__getattr__":
                facts.dynamic = True
        elif isinstance(node, ast.ClassDef):
            facts.names.add(node.name)
            facts.signatures[node.name] = _class_accepts(node)
            facts.class_attrs[node.name] = None if node.bases or node.keywords else _class_names(node)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                facts.names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(path, node.level, node.module)
            for alias in node.names:
                if alias.name == "*":
                    facts.dynamic = True
                else:
                    facts.names.add(alias.asname or alias.name)
                    facts.origins[alias.asname or alias.name] = (module, alias.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                facts.names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
            if isinstance(node.value, ast.Dict):
                facts.keys |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)
                               and isinstance(k.value, str)}  # fmt: skip
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            facts.names |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        for child in ("body", "orelse", "finalbody"):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                _top(getattr(node, child, []) or [], facts, path)
        if isinstance(node, ast.With):
            facts.names |= {n.id for item in node.items if item.optional_vars is not None
                            for n in ast.walk(item.optional_vars) if isinstance(n, ast.Name)}  # fmt: skip
        for handler in getattr(node, "handlers", []):
            _top(handler.body, facts, path)


def _accepts(node: ast.FunctionDef | ast.AsyncFunctionDef, skip_first: bool = False) -> frozenset[str] | None:
    args = node.args
    if args.kwarg is not None or node.decorator_list:  # a decorator may change the signature
        return None
    names = [a.arg for a in args.args] + [a.arg for a in args.kwonlyargs]
    if skip_first and names:
        names = names[1:]
    return frozenset(names)


def _class_names(node: ast.ClassDef) -> list[str]:
    names = set()
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(item.name)
        elif isinstance(item, (ast.Assign, ast.AnnAssign)):
            targets = item.targets if isinstance(item, ast.Assign) else [item.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return sorted(names)


def _class_accepts(node: ast.ClassDef) -> frozenset[str] | None:
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == "__init__":
            return _accepts(item, skip_first=True)
    decorators = {ast.unparse(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list}
    if node.bases or node.keywords or not decorators or not decorators <= _DATACLASS:
        return None  # inherited or generated __init__ we do not model: anything goes
    fields = set()
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            if "ClassVar" not in ast.unparse(item.annotation):
                fields.add(item.target.id)
    return frozenset(fields)


def _uses(tree: ast.Module, facts: Facts, path: str) -> None:
    optional: list[tuple[int, int]] = []  # line spans of try bodies that catch ImportError
    nodes = list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.Try) and node.body:
            caught = {ast.unparse(h.type) if h.type else "Exception" for h in node.handlers}
            names = {n.strip("() ") for c in caught for n in c.split(",")}
            if names & _OPTIONAL:
                optional.append((node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno))
    scopes = [_scope(node) for node in nodes if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]

    def shadowed(name: str, line: int) -> bool:  # bound locally in a function around the line
        return any(a <= line <= b and name in local for a, b, local in scopes)

    for node in nodes:
        if isinstance(node, ast.Import):
            if any(a <= node.lineno <= b for a, b in optional):
                continue
            for alias in node.names:
                facts.imports.append((node.lineno, alias.name, None))
                if alias.asname:
                    facts.modules[alias.asname] = alias.name
                elif "." in alias.name:  # ``import a.b.c``: ``a.b.c.NAME`` reads module a.b.c
                    parts = alias.name.split(".")
                    for cut in range(2, len(parts) + 1):
                        facts.modules.setdefault(".".join(parts[:cut]), ".".join(parts[:cut]))
        elif isinstance(node, ast.ImportFrom):
            if any(a <= node.lineno <= b for a, b in optional):
                continue
            module = _absolute(path, node.level, node.module)
            for alias in node.names:
                if alias.name != "*":
                    facts.imports.append((node.lineno, module, alias.name))
                    facts.modules[alias.asname or alias.name] = f"{module}.{alias.name}"
        elif isinstance(node, ast.Call) and node.keywords and dotted_name(node.func):
            # ``f(kw=)``, and ``m.f(kw=)`` / ``a.b.f(kw=)`` through a module (``static`` decides)
            keywords = [k.arg for k in node.keywords if k.arg is not None]
            name = dotted_name(node.func) or ""
            if keywords and not shadowed(name.split(".")[0], node.lineno):
                facts.calls.append((node.lineno, name, keywords))
        elif isinstance(node, ast.Attribute) and dotted_name(node.value):
            name = dotted_name(node.value) or ""
            if isinstance(node.ctx, ast.Load) and not shadowed(name.split(".")[0], node.lineno):
                facts.attributes.append((node.lineno, name, node.attr))


def dotted_name(node: ast.AST) -> str | None:
    """``a`` or ``a.b.c`` for a name or a chain of attributes on a name; None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _scope(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int, set[str]]:
    """A function's line span and the names it binds itself (arguments, assignments, imports)."""
    args = node.args
    local = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    local |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
            local.add(child.id)
        elif isinstance(child, (ast.Import, ast.ImportFrom)):
            local |= {(a.asname or a.name).split(".")[0] for a in child.names}
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and child is not node:
            local.add(child.name)
    return node.lineno, node.end_lineno or node.lineno, local
