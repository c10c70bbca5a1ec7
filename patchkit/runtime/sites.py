"""Where a plugin module replaces something of vLLM's at run time, found by reading it (``ast``).

Shapes: ``vllm.x.f = ours`` (through ``import vllm.x`` / ``import vllm.x as m`` / ``from vllm import x``),
``Cls.method = ours`` (``from vllm.x import Cls``; a module-level alias ``T = Cls`` too),
``setattr(target, "name", ours)`` (the name a literal or a module-level string constant), a captured
original (``_orig = vllm.x.f``), ``module.Cls = OurSubclass`` (a class swap: decided once the
target is known to be a class), a registry decorator whose first argument names a vLLM object
(``@register("vllm.x.f")``: the decorated def replaces it; ``@register("vllm.x")``: the def gets the
module as its first parameter and its assignments to that parameter are the sites) and a registry
call ``register("vllm.x.f", ours)``. Targets outside vLLM (torch, triton) are listed, not checked.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from patchkit.analysis.bindings import absolute_module, guard_texts
from patchkit.analysis.modfacts import dotted_name

TOP = "vllm"


@dataclass
class Site:
    target: str  # dotted: vllm.x.y.f
    kind: str  # assign | setattr | decorator | registry (class-swap is decided against the base)
    line: int
    replacement: ast.AST | None  # the value assigned (or the decorated def)
    guard: tuple[str, ...] = ()  # enclosing ``if`` tests and functions, outermost first
    decorator_module: bool = False  # @register("vllm.x"): may name a module whose def gets it
    replacement_path: str | None = None  # the value is itself a vLLM object (a saved original)
    handed: str | None = None  # reached through a parameter a registry decorator hands over

    @property
    def replacement_text(self) -> str:
        node = self.replacement
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return node.name
        return ast.unparse(node) if node is not None else ""


@dataclass
class Use:
    """A vLLM name the module reads: an import, or an attribute of an imported vLLM module or class."""

    name: str
    line: int


@dataclass
class ModuleScan:
    rel: str  # path inside the plugin dir
    module: str  # the plugin's dotted module name
    tree: ast.Module
    sites: list[Site] = field(default_factory=list)
    outside: list[Site] = field(default_factory=list)  # torch.x = ..., not vLLM's
    captures: dict[str, list[int]] = field(default_factory=dict)  # vLLM path -> lines reading it into a name
    uses: list[Use] = field(default_factory=list)
    aliases: dict[str, str] = field(default_factory=dict)  # name -> dotted (vLLM, plugin or other)
    defs: dict[str, ast.AST] = field(default_factory=dict)  # module-level def / class by name
    read_attributes: set[str] = field(default_factory=set)  # every ``x.name`` the module reads
    unnamed: list[tuple[str, int]] = field(default_factory=list)  # setattr(vLLM object, unreadable name)
    imports: frozenset[str] = frozenset()  # the vLLM modules its import statements load (a, a.b for a.b)


def scan_module(rel: str, module: str, source: str, is_package: bool = False) -> ModuleScan:
    """The sites, captures and vLLM uses of one plugin module (a SyntaxError propagates)."""
    tree = ast.parse(source, rel)
    scan = ModuleScan(rel, module, tree)
    strings: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scan.defs[node.name] = node
    for node in ast.walk(tree):  # a name for an attribute: every string it is ever given
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant):
            if isinstance(node.value.value, str):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name) and node.value.value not in strings.setdefault(t.id, []):
                        strings[t.id].append(node.value.value)
    _collect_imports(scan, tree, module, is_package)
    _collect_aliases(scan, tree)
    _SiteVisitor(scan, strings).visit(tree)
    _collect_uses(scan, tree)
    targets = {s.target for s in scan.sites}
    scan.captures = {k: v for k, v in scan.captures.items() if k in targets}
    return scan


def _collect_imports(scan: ModuleScan, tree: ast.Module, module: str, is_package: bool) -> None:
    loaded: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                loaded |= _parents(alias.name)
                if alias.asname:
                    scan.aliases[alias.asname] = alias.name
                else:
                    scan.aliases.setdefault(alias.name.split(".")[0], alias.name.split(".")[0])
                if _is_vllm(alias.name):
                    scan.uses.append(Use(alias.name, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            source = absolute_module(node, module, is_package)
            loaded |= _parents(source)
            for alias in node.names:
                if alias.name == "*":
                    continue
                scan.aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
                if _is_vllm(source):
                    scan.uses.append(Use(f"{source}.{alias.name}", node.lineno))
    scan.imports = frozenset(name for name in loaded if _is_vllm(name))


def _parents(module: str) -> set[str]:
    """``a.b.c`` and the packages the import system loads before it: a, a.b."""
    parts = module.split(".") if module else []
    return {".".join(parts[:end]) for end in range(1, len(parts) + 1)}


def _collect_aliases(scan: ModuleScan, tree: ast.Module) -> None:
    """``T = vllm_thing`` anywhere: a name for a vLLM object (and, when it is a target, a capture)."""
    for _ in range(2):  # an alias of an alias
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                full = expand(scan.aliases, node.value)
                if full is not None and _is_vllm(full):
                    name = node.targets[0].id
                    scan.aliases.setdefault(name, full)
                    lines = scan.captures.setdefault(full, [])
                    if node.lineno not in lines:
                        lines.append(node.lineno)


def expand(aliases: dict[str, str], node: ast.AST | None) -> str | None:
    """The dotted name an expression stands for through the module's imports and aliases."""
    chain = dotted_name(node) if node is not None else None
    if chain is None:
        return None
    root, _, rest = chain.partition(".")
    if root not in aliases:
        return None
    return aliases[root] + (f".{rest}" if rest else "")


class _SiteVisitor(ast.NodeVisitor):
    def __init__(self, scan: ModuleScan, strings: dict[str, list[str]]) -> None:
        self.scan = scan
        self.strings = strings
        self.guard: list[str] = []
        self.shadowed: list[set[str]] = []  # names local to each enclosing function
        self.bound: list[dict[str, str]] = []  # @register("vllm.x") parameters, local vLLM names
        self.decorated: list[dict[str, str]] = []  # @register("vllm.x") parameters only

    # --------------------------------------------------------------- scopes

    def visit_If(self, node: ast.If) -> None:
        then, otherwise = guard_texts(node.test)
        self.visit(node.test)
        self._within(then, node.body)
        self._within(otherwise, node.orelse)

    def _within(self, guard: str, body: list[ast.stmt]) -> None:
        self.guard.append(guard)
        for stmt in body:
            self.visit(stmt)
        self.guard.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        bound: dict[str, str] = {}
        for decorator in node.decorator_list:
            registered = _registered_name(decorator)
            if registered is None:
                continue
            self._site(registered, "decorator", decorator.lineno, node, module_maybe=True)
            params = node.args.posonlyargs + node.args.args
            if params:
                bound[params[0].arg] = registered
        for decorator in node.decorator_list:
            self.visit(decorator)
        local = _local_names(node) - set(bound)
        self.shadowed.append(local)
        self.bound.append(dict(bound))
        self.decorated.append(bound)
        self._within(f"in {node.name}()", node.body)
        self.shadowed.pop()
        self.bound.pop()
        self.decorated.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    # --------------------------------------------------------------- sites

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._assigned(target, node.value, node.lineno)
        read = self._expand(node.value)
        if read is not None and _is_vllm(read):
            if self.bound and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.bound[-1][node.targets[0].id] = read  # a local name for a vLLM object
            lines = self.scan.captures.setdefault(read, [])
            if node.lineno not in lines:
                lines.append(node.lineno)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._assigned(node.target, node.value, node.lineno)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = dotted_name(node.func)
        if name == "setattr" and len(node.args) == 3:
            owner = self._expand(node.args[0])
            attr = node.args[1]
            labels = [attr.value] if isinstance(attr, ast.Constant) and isinstance(attr.value, str) else []
            if not labels and isinstance(attr, ast.Name):
                labels = self.strings.get(attr.id, [])
            for label in labels if owner is not None else []:
                self._site(
                    f"{owner}.{label}",
                    "setattr",
                    node.lineno,
                    node.args[2],
                    handed=self._handed(node.args[0]),
                )
            if owner is not None and not labels and _is_vllm(owner):
                self.scan.unnamed.append((owner, node.lineno))
        elif len(node.args) >= 2 and (registered := _literal_vllm(node.args[0])) is not None:
            replacement = node.args[1]
            if isinstance(replacement, ast.Name) and replacement.id in self.scan.defs:
                self._site(registered, "registry", node.lineno, self.scan.defs[replacement.id])
        self.generic_visit(node)

    def _assigned(self, target: ast.expr, value: ast.expr, line: int) -> None:
        if isinstance(target, ast.Attribute) and (full := self._expand(target)) is not None:
            self._site(full, "assign", line, value, handed=self._handed(target))

    def _handed(self, node: ast.AST) -> str | None:
        """The registered name when ``node``'s root is a parameter a registry decorator hands over."""
        root = (dotted_name(node) or "").partition(".")[0]
        for decorated in reversed(self.decorated):
            if root in decorated:
                return decorated[root]
        return None

    def _expand(self, node: ast.AST) -> str | None:
        chain = dotted_name(node)
        if chain is None:
            return None
        root, _, rest = chain.partition(".")
        for bound in reversed(self.bound):
            if root in bound:
                return bound[root] + (f".{rest}" if rest else "")
        if any(root in names for names in self.shadowed):
            return None
        return expand(self.scan.aliases, node)

    def _site(
        self,
        target: str,
        kind: str,
        line: int,
        replacement: ast.AST | None,
        module_maybe: bool = False,
        handed: str | None = None,
    ) -> None:
        read = self._expand(replacement) if replacement is not None else None
        site = Site(
            target,
            kind,
            line,
            replacement,
            tuple(self.guard),
            module_maybe,
            read if read is not None and _is_vllm(read) else None,
            handed,
        )
        if _is_vllm(target):
            self.scan.sites.append(site)
        elif "." in target:
            self.scan.outside.append(site)


def _collect_uses(scan: ModuleScan, tree: ast.Module) -> None:
    """Names imported from vLLM as they are read, and attribute chains read through an imported vLLM
    module or class (the outermost chain only)."""
    inner: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if isinstance(node.ctx, ast.Load):
                scan.read_attributes.add(node.attr)
            if isinstance(node.value, ast.Attribute):
                inner.add(id(node.value))
    roots = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    for node in ast.walk(tree):
        loaded = isinstance(node, ast.Attribute) and id(node) not in inner and isinstance(node.ctx, ast.Load)
        loaded |= isinstance(node, ast.Name) and id(node) not in roots and isinstance(node.ctx, ast.Load)
        if loaded:
            full = expand(scan.aliases, node)
            if full is not None and _is_vllm(full):
                scan.uses.append(Use(full, node.lineno))


def _local_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    names = {a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]}
    names |= {a.arg for a in (node.args.vararg, node.args.kwarg) if a is not None}
    declared: set[str] = set()
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
            names.add(inner.id)
        elif isinstance(inner, (ast.Global, ast.Nonlocal)):
            declared |= set(inner.names)
        elif isinstance(inner, (ast.Import, ast.ImportFrom)):
            continue  # a local import of a vLLM name is an alias, not a shadow
    return names - declared


def _registered_name(decorator: ast.expr) -> str | None:
    if isinstance(decorator, ast.Call) and decorator.args:
        return _literal_vllm(decorator.args[0])
    return None


def _literal_vllm(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and _is_vllm(node.value):
        parts = node.value.split(".")
        return node.value if all(p.isidentifier() for p in parts) and len(parts) > 1 else None
    return None


def _is_vllm(dotted: str) -> bool:
    return dotted == TOP or dotted.startswith(TOP + ".")
