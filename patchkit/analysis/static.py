"""Does a tree state import and call its own package correctly? A static check, no interpreter.

For the Python files asked about, in a state given as ``read(path) -> bytes | None``:

(a) the file parses (what only the compiler refuses, such as ``return`` outside a function, is
    ruff's F701/F702/F704/F706 in ``analysis.undefined`` and real ``compile()`` in ``analysis.syntax``);
(b) every first-party import resolves: ``import pkg.x`` needs the module, ``from pkg.x import Y``
    needs ``Y`` defined, imported or re-exported by ``pkg.x`` (or a submodule ``pkg.x.Y``), relative
    imports likewise; a module with a module-level ``__getattr__`` or a star import is "dynamic"
    and not a failure. ``mod.NAME`` on an imported first-party module is read the same way, and
    for a dynamic module whose ``__getattr__`` serves the keys of a module-level dict (vLLM's
    ``envs.py``) an upper-case ``NAME`` must be one of those keys;
(c) no call passes a keyword argument to a first-party function or class whose definition in that
    state does not accept it (plain functions without ``**kwargs``; classes with their own
    ``__init__`` or plain ``@dataclass`` classes without bases).

Imports inside ``try`` blocks that catch ``ImportError`` are optional and not checked. First-party
packages are the top-level packages of the files asked about. Module facts are parsed once per
content, so checking many states of one tree costs one parse per distinct file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from patchkit.analysis.modfacts import Facts, facts_of, module_name, uses_of
from patchkit.base.tree import BaseTree

Read = Callable[[str], "bytes | None"]
Files = dict[str, "bytes | None"]


@dataclass(frozen=True)
class Problem:
    file: str
    line: int
    kind: str  # syntax | module | name | keyword | undefined (ruff F821/F822/F823: ``analysis.undefined``)
    name: str  # what is missing: the module, the name, the keyword (or the syntax error)
    target: str = ""  # where it was looked up: module or callable

    @property
    def key(self) -> tuple[str, str, str, str]:
        """The same problem in another state (line numbers move)."""
        return (self.file, self.kind, self.name, self.target)

    def text(self) -> str:
        if self.kind == "syntax":
            return f"{self.file}:{self.line}: does not compile: {self.name}"
        if self.kind == "module":
            return f"{self.file}:{self.line}: imports {self.name}, which does not exist"
        if self.kind == "keyword":
            return f"{self.file}:{self.line}: passes {self.name}= to {self.target}, which does not accept it"
        if self.kind == "undefined":
            return f"{self.file}:{self.line}: name {self.name!r} is undefined ({self.target})"
        return f"{self.file}:{self.line}: {self.target} has no name {self.name!r}"

    def to_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "kind": self.kind, "name": self.name,
                "target": self.target, "text": self.text()}  # fmt: skip


_CHECKS: dict[tuple, list[tuple[dict, list[Problem]]]] = {}


class State:
    """One tree state: ``read`` gives a file's content (None = absent), ``is_dir`` a directory."""

    def __init__(self, read: Read, is_dir: Callable[[str], bool], first_party: set[str],
                 shared: tuple[dict, Callable[[str], bool]] | None = None) -> None:  # fmt: skip
        self.read, self.is_dir, self.first_party = read, is_dir, first_party
        self._shared = shared  # (lookups of the base, is this path in the overlay?): see tree_state
        self._modules: dict[str, tuple[str | None, Facts | None]] = {}
        self._found: dict[str, tuple[str | None, bytes | None]] = {}
        self._trace: dict[str, tuple[str | None, bytes | None]] | None = None

    def module(self, name: str) -> tuple[str | None, Facts | None]:
        """(path, facts) of a module; (dir, None) for a namespace package; (None, None) if absent."""
        if name not in self._modules:
            path, source = self._find(name)
            self._modules[name] = (path, facts_of(path, source) if path and source is not None else None)
        elif self._trace is not None:
            self._find(name)
        return self._modules[name]

    def _find(self, name: str) -> tuple[str | None, bytes | None]:
        if name not in self._found:
            self._found[name] = self._locate(name)
        if self._trace is not None:
            self._trace[name] = self._found[name]
        return self._found[name]

    def _locate(self, name: str) -> tuple[str | None, bytes | None]:
        base = name.replace(".", "/")
        if self._shared is not None and not self._shared[1](base):  # as on the base: shared
            lookups = self._shared[0]
            if name not in lookups:
                lookups[name] = self._probe(base)
            return lookups[name]
        return self._probe(base)

    def _probe(self, base: str) -> tuple[str | None, bytes | None]:
        for path in (base + ".py", base + "/__init__.py"):
            source = self.read(path)
            if source is not None:
                return path, source
        return (base, None) if self.is_dir(base) else (None, None)

    def exists(self, name: str) -> bool:
        return self._find(name)[0] is not None

    def has_name(self, module: str, name: str) -> bool | None:
        """True / False, or None when the module is dynamic."""
        path, facts = self.module(module)
        if path is None:
            return False
        if self.exists(f"{module}.{name}"):
            return True
        if facts is None:
            return False
        if facts.error:
            return None
        if name in facts.names:
            return True
        return None if facts.dynamic else False

    def signature(self, module: str, name: str, depth: int = 0) -> tuple[str, frozenset[str] | None]:
        """Where ``name`` of ``module`` is defined and the keywords it accepts (None = any)."""
        path, facts = self.module(module)
        if facts is None or depth > 6:
            return module, None
        if name in facts.signatures:
            return f"{module}.{name}", facts.signatures[name]
        if name in facts.origins:
            origin, original = facts.origins[name]
            if origin.split(".")[0] in self.first_party:
                return self.signature(origin, original, depth + 1)
        return module, None

    def check(self, path: str) -> list[Problem]:
        """The file's problems in this state; a result is reused while the file and every module
        it looked up are the same bytes (checking many states of a series is then cheap)."""
        source = self.read(path)
        if source is None or not path.endswith(".py"):
            return []
        key = (path, source, frozenset(self.first_party))
        for looked_up, problems in _CHECKS.get(key, []):
            if all(self._find(name) == seen for name, seen in looked_up.items()):
                return problems
        self._trace = {}
        try:
            problems = self._check(path, source)
            entries = _CHECKS.setdefault(key, [])
            entries.append((self._trace, problems))
            del entries[:-8]
        finally:
            self._trace = None
        if len(_CHECKS) > 4000:
            _CHECKS.clear()
        return problems

    def _check(self, path: str, source: bytes) -> list[Problem]:
        facts = uses_of(path, source)
        if facts.error:
            return [Problem(path, _line(facts.error), "syntax", facts.error)]
        problems: list[Problem] = []
        for line, module, name in facts.imports:
            if module.split(".")[0] not in self.first_party:
                continue
            if not self.exists(module):
                problems.append(Problem(path, line, "module", module))
            elif name is not None and self.has_name(module, name) is False:
                problems.append(Problem(path, line, "name", name, module))
        for line, local, attr in facts.attributes:
            target = facts.modules.get(local)
            if target is None and "." in local:  # ``m.Cls.attr``: a class of a first-party module
                owner, _, cls = local.rpartition(".")
                module = self._module_of(facts, owner)
                if module is not None and "." not in cls:
                    problems += self._class_attribute(path, line, module, cls, attr)
                continue
            if target is None or target.split(".")[0] not in self.first_party:
                continue
            if self.exists(target):  # a module
                problems += self._attribute(path, line, target, attr)
            elif local in facts.origins and local not in facts.class_attrs:  # an imported class
                problems += self._class_attribute(path, line, *facts.origins[local], attr)
        me = module_name(path)
        for line, local, keywords in facts.calls:
            if local in facts.signatures:
                where, accepted = f"{me}.{local}", facts.signatures[local]
            elif local in facts.origins and facts.origins[local][0].split(".")[0] in self.first_party:
                where, accepted = self.signature(*facts.origins[local])
            elif "." in local and self._module_of(facts, local.rpartition(".")[0]):  # m.f(kw=)
                owner, _, name = local.rpartition(".")
                where, accepted = self.signature(self._module_of(facts, owner) or "", name)
            else:
                continue
            if accepted is not None:
                problems += [Problem(path, line, "keyword", k, where) for k in keywords if k not in accepted]
        return problems

    def _module_of(self, facts: Facts, local: str) -> str | None:
        """The first-party module ``local`` (a name or a dotted chain) stands for here, if any."""
        target = facts.modules.get(local)
        if target is None or target.split(".")[0] not in self.first_party or not self.exists(target):
            return None
        path, module_facts = self.module(target)
        return target if path is not None and module_facts is not None else None

    def _class_attribute(self, path: str, line: int, module: str, name: str, attr: str) -> list[Problem]:
        where, _ = self.signature(module, name)
        owner, _, cls = where.rpartition(".")
        _, facts = self.module(owner) if owner else (None, None)
        attrs = facts.class_attrs.get(cls, None) if facts is not None and cls in facts.signatures else None
        if attrs is None or attr in attrs or attr.startswith("__"):
            return []
        return [Problem(path, line, "name", attr, where)]

    def _attribute(self, path: str, line: int, target: str, attr: str) -> list[Problem]:
        mod_path, facts = self.module(target)
        if mod_path is None or facts is None or facts.error or self.exists(f"{target}.{attr}"):
            return []
        if attr in facts.names:
            return []
        if facts.dynamic and not (facts.keys and attr.isupper() and attr not in facts.keys):
            return []
        return [Problem(path, line, "name", attr, target)]


def _survives(where: os.PathLike, path: str, gone: set[str]) -> bool:
    """Does a file of the base directory ``path`` stay when the ``gone`` files are deleted (git
    removes a directory with its last file: no namespace package is left behind)?"""
    for root, _, names in os.walk(where):
        rel = os.path.relpath(root, where)
        for name in names:
            inner = name if rel == "." else f"{rel}/{name}".replace(os.sep, "/")
            if f"{path}/{inner}" not in gone:
                return True
    return False


def _line(error: str) -> int:
    try:
        return int(error.split(":")[0].removeprefix("line "))
    except ValueError:
        return 0


def first_party(paths: Iterable[str], read: Read) -> set[str]:
    """Top-level packages of these Python files (a directory with ``__init__.py``)."""
    tops = {p.split("/")[0] for p in paths if p.endswith(".py") and "/" in p}
    return {t for t in tops if read(f"{t}/__init__.py") is not None}


_BASE_READS: dict[tuple[str, str], bytes | None] = {}  # a base tree is read-only: read once
_BASE_LOOKUPS: dict[str, dict] = {}  # per base root: module name → (path, source) on the base


def tree_state(base: BaseTree, files: Files, packages: set[str], memo: dict | None = None) -> State:
    memo = {} if memo is None else memo
    root = str(base.root)

    def read(path: str) -> bytes | None:
        if path in files:
            return files[path]
        key = (root, path)
        if key not in _BASE_READS:  # one stat for the many probes that find nothing
            present = ".." not in path.split("/") and os.path.isfile(os.path.join(root, path))
            _BASE_READS[key] = base.read(path) if present else None
        return _BASE_READS[key]

    dirs = {"/".join(p.split("/")[:i]) for p, data in files.items() if data is not None
            for i in range(1, p.count("/") + 1)}  # fmt: skip

    gone = {p for p, data in files.items() if data is None}

    def is_dir(path: str) -> bool:
        if path in dirs:
            return True
        key = ("dir", path)
        if key not in memo:
            memo[key] = ".." not in path.split("/") and os.path.isdir(base.root / path)
        if memo[key] and any(p.startswith(path + "/") for p in gone):
            return _survives(base.root / path, path, gone)  # a package whose files all go is gone
        return memo[key]

    def overlaid(base_path: str) -> bool:  # does the overlay decide this module's lookup?
        return base_path in dirs or base_path + ".py" in files or base_path + "/__init__.py" in files

    return State(read, is_dir, packages, (_BASE_LOOKUPS.setdefault(root, {}), overlaid))
