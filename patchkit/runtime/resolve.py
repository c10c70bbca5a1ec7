"""Where a dotted name such as ``vllm.v1.core.kv_cache_utils.f`` lives in a source tree, found by
reading it (``ast``), never by importing it.

Python's own rules, as far as a reader can follow them: a module attribute is the last binding of
the name in the module body (def, class, assignment, import, ``from .. import``, star import; the
``if TYPE_CHECKING:`` branch never runs), else the submodule of that name; a class attribute is the
class body's, else what every class has (``pymodel``), else its bases' in order. A module the
plugin imports is found as the import system finds it — a file or package on the path, never
through the parent's ``__getattr__``. A module with ``__getattr__``, a class with a base from
another distribution, an attribute of a plain value: "unknown", never "absent".
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path

from patchkit.analysis import bindings
from patchkit.analysis.modfacts import dotted_name
from patchkit.runtime import lazy
from patchkit.runtime.built import compiled_modules
from patchkit.runtime.pymodel import (
    CLASS_OWN_ATTRIBUTES,
    MODULE_ATTRIBUTES,
    OBJECT_ATTRIBUTES,
    PACKAGE_ATTRIBUTES,
    function_attribute,
    wraps_its_argument,
)
from patchkit.runtime.resolution import Definition, Resolution, Unresolved
from patchkit.values import message

OUTSIDE = "may come from a base outside the tree: "
UNREAD = "may come from a base reading cannot follow: "
MAX_DEPTH = 40  # re-exports and bases followed for one name; deeper is a cycle we did not see


class SourceIndex:
    """A source tree's Python modules, parsed on first use (``root/<package>/...``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._parsed: dict[str, tuple[ast.Module, list[str]] | None] = {}
        self._cache: dict[str, Resolution] = {}
        self._imported: dict[str, Unresolved | None] = {}
        self._texts: dict[str, str] = {}

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

    def resolve(self, dotted: str, imports: frozenset[str] = frozenset()) -> Resolution:
        """``dotted`` as Python finds it; ``imports``: the modules the reader's import statements
        load (``import a.b`` loads a and a.b) — each found as the import system finds it."""
        for module in sorted(imports, key=len):  # parents are imported first
            if dotted == module or dotted.startswith(module + "."):
                if (gone := self.import_module(module)) is not None:
                    return Unresolved(dotted, gone.reason, gone.detail, gone.owner, gone.why)
        if dotted not in self._cache:
            self._cache[dotted] = self._resolve(dotted, 0)
        return self._cache[dotted]

    def import_module(self, dotted: str) -> Unresolved | None:
        """None when ``import dotted`` finds every module on the way; else why not. The import
        system looks for ``a.b`` in a's package directory: a's ``__getattr__`` is never asked."""
        if dotted in self._imported:
            return self._imported[dotted]
        parts = dotted.split(".")
        owner: Definition | None = None
        self._imported[dotted] = None
        for end in range(1, len(parts) + 1):
            name = ".".join(parts[:end])
            rel = self.module_file(name)
            if rel is None and name in self.compiled:  # the build makes it; no source to read
                self._imported[dotted] = self._compiled(dotted, name, owner)
                return self._imported[dotted]
            if rel is None or (end < len(parts) and not rel.endswith("__init__.py")):
                where = name if rel is None else ".".join(parts[: end + 1])
                gone = Unresolved(dotted, "absent", f"no module named {where!r}", owner,
                                  message("runtime.why.no-module", module=where))  # fmt: skip
                self._imported[dotted] = gone
                return gone
            owner = _module(name, rel)
        return None

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
            return Unresolved(dotted, "unknown", "too many re-exports or bases to follow", owner,
                              message("runtime.why.too-deep"))  # fmt: skip
        if owner.kind == "module":
            return self._module_member(owner, name, dotted, depth)
        if owner.kind == "class":
            return self._class_member(owner, name, dotted, depth)
        if owner.kind == "external":
            return Definition(dotted, "external", detail=f"{owner.detail}.{name}")
        if owner.kind == "function" and owner.node is not None:
            has = function_attribute(owner.node, name, self._wrapping(owner))
            if has is not None:
                return self._known(owner, name, dotted, has, "function")
        return Unresolved(dotted, "unknown", f"an attribute of a {owner.kind}", owner,
                          message("runtime.why.value-attribute", kind=owner.kind))  # fmt: skip

    def _module_member(self, owner: Definition, name: str, dotted: str, depth: int) -> Resolution:
        parsed = self.parsed(owner.file)
        if parsed is None:
            return Unresolved(dotted, "unknown", f"{owner.file} does not parse", owner,
                              message("runtime.why.no-parse", file=owner.file))  # fmt: skip
        module_name = bindings.module_name(owner.file)
        binding = bindings.last_binding(parsed[0].body, name)
        package = module_name if owner.file.endswith("__init__.py") else None
        if binding is None and name in (PACKAGE_ATTRIBUTES if package else MODULE_ATTRIBUTES):
            return Definition(dotted, "builtin", detail=f"module.{name}")  # every module has these
        if binding is not None:
            return self._binding(owner, binding, name, dotted, module_name, depth)
        if package is not None and (sub := self.module_file(f"{package}.{name}")) is not None:
            return _module(dotted, sub)
        for star in bindings.star_imports(parsed[0].body):
            source = bindings.absolute_module(star, module_name, package is not None)
            if (rel := self.module_file(source)) is not None:
                found = self.member(_module(source, rel), name, dotted, depth + 1)
                if isinstance(found, Definition):
                    return _via(found, f"{owner.file}:{star.lineno}")
        if package is not None and f"{package}.{name}" in self.compiled:
            return self._compiled(dotted, f"{package}.{name}", owner)
        if (hook := bindings.last_binding(parsed[0].body, "__getattr__")) is not None:
            answered = lazy.answers(hook, parsed[0].body)
            if answered is None or name in answered:
                return Unresolved(dotted, "unknown", f"{owner.file} defines __getattr__", owner,
                                  message("runtime.why.module-getattr", file=owner.file))  # fmt: skip
            return Unresolved(dotted, "absent", f"{owner.file}'s __getattr__ does not answer {name!r}", owner,
                              message("runtime.why.getattr-table", file=owner.file, name=name))  # fmt: skip
        return Unresolved(dotted, "absent", f"{owner.file} defines no {name!r}", owner,
                          message("runtime.why.no-name", file=owner.file, name=name))  # fmt: skip

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
                    own = self.module_file(f"{source}.{alias.name}") if source == module_name else None
                    if own is not None:  # ``from . import sub`` in a package: the import system loads sub
                        return _via(_module(f"{source}.{alias.name}", own), where)
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
        if name in CLASS_OWN_ATTRIBUTES:  # the class statement's and the metaclass's: no base hides them
            return Definition(dotted, "builtin", detail=f"type.{name}")
        outside: list[str] = []  # bases from another distribution (torch.nn.Module)
        unread: list[
            str
        ] = []  # bases reading cannot follow: vLLM values (a class a factory makes), expressions
        for base in node.bases:
            chain = dotted_name(base.value if isinstance(base, ast.Subscript) else base)  # Base[T] is Base
            if chain is None:
                unread.append(ast.unparse(base))
                continue
            base_def = self.class_base(owner, chain, depth)
            if isinstance(base_def, Definition) and base_def.kind == "class":
                found = self.member(base_def, name, dotted, depth + 1)
                if isinstance(found, Definition):
                    return _via(found, f"{owner.file}:{node.lineno} ({node.name}({chain}))")
                if found.reason == "unknown":
                    into = outside if found.detail.startswith(OUTSIDE) else unread
                    into.append(found.detail.removeprefix(OUTSIDE).removeprefix(UNREAD))
            elif isinstance(base_def, Definition) and base_def.kind == "external":
                outside.append(base_def.detail)
            elif isinstance(base_def, Definition):
                unread.append(f"{chain} ({base_def.kind} at {base_def.where})")
            else:
                unread.append(chain)
        if unread:
            return Unresolved(dotted, "unknown", UNREAD + unread[0], owner,
                              message("runtime.why.unread-base", base=unread[0]))  # fmt: skip
        if outside:
            return Unresolved(dotted, "unknown", OUTSIDE + outside[0], owner,
                              message("runtime.why.outside-base", base=outside[0]))  # fmt: skip
        if name in OBJECT_ATTRIBUTES:
            return Definition(dotted, "builtin", detail=f"object.{name}")
        return Unresolved(dotted, "absent", f"{node.name} and its bases define no {name!r}", owner,
                          message("runtime.why.no-class-name", cls=node.name, name=name))  # fmt: skip

    def _known(self, owner: Definition, name: str, dotted: str, has: bool, kind: str) -> Resolution:
        if has:
            return Definition(dotted, "builtin", detail=f"{kind}.{name}")
        return Unresolved(dotted, "absent", f"{owner.qualname} has no {name!r}", owner,
                          message("runtime.why.no-wrapped", function=owner.qualname, name=name))  # fmt: skip

    def _wrapping(self, owner: Definition) -> bool:
        """The def's one decorator is a def of its module whose result ``functools.wraps`` made."""
        decorators = getattr(owner.node, "decorator_list", [])
        if len(decorators) != 1 or (chain := dotted_name(decorators[0])) is None:
            return False
        found = self.class_base(owner, chain, 0)  # a name read in the def's module, as a base is
        return isinstance(found, Definition) and found.node is not None and wraps_its_argument(found.node)

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

    def named_elsewhere(
        self, name: str, package: str, limit: int = 8, classes: bool = False
    ) -> list[Definition]:
        """Top-level and class-level definitions called ``name`` anywhere under ``package`` (classes only)."""
        shapes = (
            rf"^\s*class\s+{re.escape(name)}\b"
            if classes
            else (rf"^\s*(?:async\s+def|def|class)\s+{re.escape(name)}\b|^{re.escape(name)}\s*[:=]")
        )
        pattern = re.compile(shapes, re.MULTILINE)
        found: list[Definition] = []
        for rel, tree in self.matching(pattern, package, name):
            module = bindings.module_name(rel)
            for node, qual in bindings.definitions(tree):
                if qual.split(".")[-1] == name and (not classes or isinstance(node, ast.ClassDef)):
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

    def matching(
        self, pattern: re.Pattern[str], package: str, needle: str
    ) -> Iterator[tuple[str, ast.Module]]:
        """(path, parsed module) of each file under ``package`` whose text holds ``needle`` and
        ``pattern`` finds (the plain substring first: it costs a fraction of the pattern)."""
        for rel in self.python_files(package):
            text = self._text(rel)
            if needle in text and pattern.search(text) and (parsed := self.parsed(rel)) is not None:
                yield rel, parsed[0]

    def _text(self, rel: str) -> str:
        """A file's text, read once: every search of the tree reads it again."""
        if rel not in self._texts:
            try:
                self._texts[rel] = (self.root / rel).read_text("utf-8", errors="replace")
            except OSError:
                self._texts[rel] = ""
        return self._texts[rel]

    @cached_property
    def compiled(self) -> frozenset[str]:
        return compiled_modules(self.root)

    def _compiled(self, dotted: str, module: str, owner: Definition | None) -> Unresolved:
        return Unresolved(dotted, "unknown", f"{module} is compiled by the build", owner,
                          message("runtime.why.compiled", module=module))  # fmt: skip

    @cached_property
    def _all_files(self) -> list[str]:
        files = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
            rel_dir = os.path.relpath(dirpath, self.root)
            files += [f"{rel_dir}/{f}".removeprefix("./") for f in sorted(filenames) if f.endswith(".py")]
        return files

    def python_files(self, package: str) -> list[str]:
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
