"""Where a dotted name such as ``vllm.v1.core.kv_cache_utils.f`` lives in a source tree, found by
reading it (``ast``), never by importing it.

Python's own rules, as far as a reader can follow them: a module attribute is the last binding of
the name in the module body (def, class, assignment, import, ``from .. import``, star import; the
``if TYPE_CHECKING:`` branch never runs), else the submodule of that name; a class attribute is the
class body's, else its bases' in order. A module with ``__getattr__``, a class with a base from
another distribution, an attribute of a plain value: "unknown", never "absent".
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from patchkit.analysis import bindings
from patchkit.analysis.modfacts import dotted_name
from patchkit.values import message

OBJECT_ATTRIBUTES = frozenset(dir(object)) | {"__init_subclass__", "__class_getitem__"}
MODULE_ATTRIBUTES = frozenset({"__name__", "__file__", "__doc__", "__dict__", "__spec__", "__loader__",
                               "__package__", "__path__", "__builtins__", "__cached__"})  # fmt: skip
OUTSIDE = "may come from a base outside the tree: "
MAX_DEPTH = 40  # re-exports and bases followed for one name; deeper is a cycle we did not see


@dataclass(frozen=True)
class Definition:
    """A name that resolves. kind: module | class | function | value | external | builtin."""

    path: str  # the dotted name asked for
    kind: str
    file: str = ""  # repo-relative file holding the definition ('' for external / builtin)
    line: int = 0  # first line, decorators included
    end: int = 0
    qualname: str = ""  # 'Cls.method' inside ``file``; '' for a module
    via: tuple[str, ...] = ()  # the re-exports and bases followed to get here ('file:line')
    detail: str = ""  # external: the dotted name outside the tree
    node: ast.AST | None = field(default=None, compare=False, repr=False)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.file and self.line else self.file or self.detail


@dataclass(frozen=True)
class Unresolved:
    """A name that does not resolve. reason: absent (nothing defines it) | unknown (cannot tell)."""

    path: str
    reason: str
    detail: str = ""  # what stopped the search: the missing module, the external base, __getattr__
    owner: Definition | None = None  # the last part that did resolve
    why: dict[str, Any] = field(default_factory=dict, compare=False)  # ``detail`` as a catalogue message

    kind = "unresolved"


Resolution = Definition | Unresolved


class SourceIndex:
    """A source tree's Python modules, parsed on first use (``root/<package>/...``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._parsed: dict[str, tuple[ast.Module, list[str]] | None] = {}
        self._cache: dict[str, Resolution] = {}

    # ---------------------------------------------------------------- files

    def module_file(self, dotted: str) -> str | None:
        """'vllm/a/b.py' or 'vllm/a/b/__init__.py' for ``vllm.a.b``; None when neither exists."""
        if not dotted or not all(part.isidentifier() for part in dotted.split(".")):
            return None
        rel = dotted.replace(".", "/")
        for candidate in (f"{rel}.py", f"{rel}/__init__.py"):
            if (self.root / candidate).is_file():
                return candidate
        return None

    def parsed(self, rel: str) -> tuple[ast.Module, list[str]] | None:
        if rel not in self._parsed:
            try:
                text = (self.root / rel).read_text("utf-8", errors="replace")
                self._parsed[rel] = (ast.parse(text, rel), text.splitlines())
            except (OSError, SyntaxError, ValueError):
                self._parsed[rel] = None
        return self._parsed[rel]

    def source(self, found: Definition) -> str:
        """The definition's own lines (decorators included), as the file has them."""
        parsed = self.parsed(found.file) if found.file else None
        if parsed is None or not found.line:
            return ""
        return "\n".join(parsed[1][found.line - 1 : found.end]) + "\n"

    # ---------------------------------------------------------------- lookup

    def resolve(self, dotted: str) -> Resolution:
        if dotted not in self._cache:
            self._cache[dotted] = self._resolve(dotted, 0)
        return self._cache[dotted]

    def _resolve(self, dotted: str, depth: int) -> Resolution:
        parts = dotted.split(".")
        top = self.module_file(parts[0])
        if top is None:
            return Definition(dotted, "external", detail=dotted)
        current: Resolution = _module(parts[0], top)
        for index, name in enumerate(parts[1:], 2):
            assert isinstance(current, Definition)
            current = self.member(current, name, ".".join(parts[:index]), depth)
            if isinstance(current, Unresolved):
                return (
                    current
                    if index == len(parts)
                    else Unresolved(dotted, current.reason, current.detail, current.owner, current.why)
                )
        return current

    def member(self, owner: Definition, name: str, dotted: str, depth: int = 0) -> Resolution:
        """``owner.name``: the binding in a module or class body (re-exports, aliases, bases followed)."""
        if depth > MAX_DEPTH:
            return Unresolved(
                dotted,
                "unknown",
                "too many re-exports or bases to follow",
                owner,
                message("runtime.why.too-deep"),
            )
        if owner.kind == "module":
            return self._module_member(owner, name, dotted, depth)
        if owner.kind == "class":
            return self._class_member(owner, name, dotted, depth)
        if owner.kind == "external":
            return Definition(dotted, "external", detail=f"{owner.detail}.{name}")
        return Unresolved(
            dotted,
            "unknown",
            f"an attribute of a {owner.kind}",
            owner,
            message("runtime.why.value-attribute", kind=owner.kind),
        )

    def _module_member(self, owner: Definition, name: str, dotted: str, depth: int) -> Resolution:
        parsed = self.parsed(owner.file)
        if parsed is None:
            return Unresolved(
                dotted,
                "unknown",
                f"{owner.file} does not parse",
                owner,
                message("runtime.why.no-parse", file=owner.file),
            )
        module_name = bindings.module_name(owner.file)
        binding = bindings.last_binding(parsed[0].body, name)
        if binding is None and name in MODULE_ATTRIBUTES:  # every module has these
            return Definition(dotted, "builtin", detail=f"module.{name}")
        if binding is not None:
            return self._binding(owner, binding, name, dotted, module_name, depth)
        package = module_name if owner.file.endswith("__init__.py") else None
        if package is not None and (sub := self.module_file(f"{package}.{name}")) is not None:
            return _module(dotted, sub)
        for star in bindings.star_imports(parsed[0].body):
            source = bindings.absolute_module(star, module_name, package is not None)
            if (rel := self.module_file(source)) is not None:
                found = self.member(_module(source, rel), name, dotted, depth + 1)
                if isinstance(found, Definition):
                    return _via(found, f"{owner.file}:{star.lineno}")
        if bindings.last_binding(parsed[0].body, "__getattr__") is not None:
            return Unresolved(
                dotted,
                "unknown",
                f"{owner.file} defines __getattr__",
                owner,
                message("runtime.why.module-getattr", file=owner.file),
            )
        return Unresolved(
            dotted,
            "absent",
            f"{owner.file} defines no {name!r}",
            owner,
            message("runtime.why.no-name", file=owner.file, name=name),
        )

    def _binding(
        self, owner: Definition, node: ast.stmt, name: str, dotted: str, module_name: str, depth: int
    ) -> Resolution:
        where = f"{owner.file}:{node.lineno}"
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            qual = f"{owner.qualname}.{node.name}" if owner.qualname else node.name
            return Definition(
                dotted,
                kind,
                owner.file,
                bindings.first_line(node),
                node.end_lineno or node.lineno,
                qual,
                node=node,
            )
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (alias.asname or alias.name.split(".")[0]) == name:
                    target = alias.name if alias.asname else alias.name.split(".")[0]
                    return _via(self._resolve(target, depth + 1), where)
        if isinstance(node, ast.ImportFrom):
            package = owner.file.endswith("__init__.py")
            source = bindings.absolute_module(node, module_name, package)
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return _via(self._resolve(f"{source}.{alias.name}", depth + 1), where)
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            chain = dotted_name(node.value)
            if chain is not None and owner.kind == "module" and chain.split(".")[0] != name:
                followed = self.member(owner, chain.split(".")[0], f"{owner.path}.{chain}", depth + 1)
                for part in chain.split(".")[1:]:
                    if isinstance(followed, Definition):
                        followed = self.member(followed, part, f"{followed.path}.{part}", depth + 1)
                if isinstance(followed, Definition) and followed.kind != "value":
                    return _via(followed, where)
        qual = f"{owner.qualname}.{name}" if owner.qualname else name
        return Definition(
            dotted, "value", owner.file, node.lineno, node.end_lineno or node.lineno, qual, node=node
        )

    def _class_member(self, owner: Definition, name: str, dotted: str, depth: int) -> Resolution:
        node = owner.node
        assert isinstance(node, ast.ClassDef)
        binding = bindings.last_binding(node.body, name, in_class=True)
        if binding is not None:
            return self._binding(owner, binding, name, dotted, bindings.module_name(owner.file), depth)
        outside: list[str] = []
        for base in node.bases:
            chain = dotted_name(base)
            if chain is None:
                outside.append(ast.unparse(base))
                continue
            base_def = self.class_base(owner, chain, depth)
            if isinstance(base_def, Definition) and base_def.kind == "class":
                found = self.member(base_def, name, dotted, depth + 1)
                if isinstance(found, Definition):
                    return _via(found, f"{owner.file}:{node.lineno} ({node.name}({chain}))")
                if found.reason == "unknown":
                    outside.append(found.detail.removeprefix(OUTSIDE))
            elif isinstance(base_def, Definition):
                outside.append(base_def.detail or f"{chain} ({base_def.kind} at {base_def.where})")
            else:
                outside.append(chain)
        if outside:
            return Unresolved(
                dotted,
                "unknown",
                OUTSIDE + outside[0],
                owner,
                message("runtime.why.outside-base", base=outside[0]),
            )
        if name in OBJECT_ATTRIBUTES:
            return Definition(dotted, "builtin", detail=f"object.{name}")
        return Unresolved(
            dotted,
            "absent",
            f"{node.name} and its bases define no {name!r}",
            owner,
            message("runtime.why.no-class-name", cls=node.name, name=name),
        )

    def class_base(self, owner: Definition, chain: str, depth: int) -> Resolution:
        """A base class expression of ``owner``, resolved in the module that defines ``owner``."""
        module = bindings.module_name(owner.file)
        module_def = _module(module, owner.file)
        first, *rest = chain.split(".")
        found = self.member(module_def, first, f"{module}.{first}", depth + 1)
        for part in rest:
            if not isinstance(found, Definition):
                break
            found = self.member(found, part, f"{found.path}.{part}", depth + 1)
        return found

    # ---------------------------------------------------------------- moves

    def named_elsewhere(self, name: str, package: str, limit: int = 8) -> list[Definition]:
        """Top-level and class-level definitions called ``name`` anywhere under ``package``."""
        pattern = re.compile(
            rf"^\s*(?:async\s+def|def|class)\s+{re.escape(name)}\b|^{re.escape(name)}\s*[:=]", re.MULTILINE
        )
        found: list[Definition] = []
        for rel in self._python_files(package):
            try:
                text = (self.root / rel).read_text("utf-8", errors="replace")
            except OSError:
                continue
            if not pattern.search(text) or (parsed := self.parsed(rel)) is None:
                continue
            module = bindings.module_name(rel)
            for node, qual in bindings.definitions(parsed[0]):
                if qual.split(".")[-1] == name:
                    kind = "class" if isinstance(node, ast.ClassDef) else "function"
                    if isinstance(node, (ast.Assign, ast.AnnAssign)):
                        kind = "value"
                    found.append(
                        Definition(
                            f"{module}.{qual}",
                            kind,
                            rel,
                            bindings.first_line(node),
                            node.end_lineno or node.lineno,
                            qual,
                            node=node,
                        )
                    )
            if len(found) >= limit:
                break
        return found[:limit]

    @cached_property
    def _all_files(self) -> list[str]:
        files = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
            rel_dir = os.path.relpath(dirpath, self.root)
            files += [f"{rel_dir}/{f}".removeprefix("./") for f in sorted(filenames) if f.endswith(".py")]
        return files

    def _python_files(self, package: str) -> list[str]:
        prefix = package.replace(".", "/") + "/"
        return [f for f in self._all_files if f.startswith(prefix)]


# --------------------------------------------------------------------------- results


def _module(dotted: str, rel: str) -> Definition:
    return Definition(dotted, "module", rel, 1, 0)


def _via(found: Resolution, where: str) -> Resolution:
    if isinstance(found, Definition):
        return Definition(
            found.path,
            found.kind,
            found.file,
            found.line,
            found.end,
            found.qualname,
            (where, *found.via),
            found.detail,
            found.node,
        )
    return found
