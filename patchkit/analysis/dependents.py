"""Files a change does not touch but can break: the modules of the tree that use what it takes away.

The prefix check and the imports gate read the files a series touches. A patch that removes a
function, a class, a module, a keyword a function accepted, an attribute of a plain class or a key
of an ``envs``-style module also breaks every untouched file that still uses it:
1Cat-style cherry-picks and partial upstream ranges do this (vLLM 0.34.0's
``vllm/v1/structured_output/utils.py`` drops ``apply_grammar_bitmask``, which 0.33.0's untouched
``vllm/v1/worker/gpu_model_runner.py`` imports at module level, so ``import`` of the worker fails).

``lost`` reads what each touched module of a state no longer offers against the base (by
``modfacts``, the same facts ``static`` checks with); ``dependents`` finds the untouched files of
the base that mention such a name and the module it lived in (one ``git grep --no-index``, any
directory), which the callers then check with ``static`` in that state. Nothing is searched when
nothing is lost, which is the common case.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from patchkit import git
from patchkit.analysis.modfacts import facts_of, module_name
from patchkit.base.tree import BaseTree
from patchkit.proc import TimeoutExpired

Files = dict[str, "bytes | None"]
Read = Callable[[str], "bytes | None"]
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HITS: dict[tuple[str, frozenset[str]], list[str]] = {}
_LOST: dict[tuple[str, bytes, bytes, frozenset[str]], frozenset[str]] = {}


def lost(read_base: Read, files: Files, packages: set[str]) -> dict[str, set[str]]:
    """Touched module path → the names it no longer offers against the base: top-level names gone,
    functions and classes that accept fewer keywords, plain classes with fewer attributes, keys gone
    from a module-level dict; a deleted module loses its own name. A name the module only imported
    from outside ``packages`` (``import os``, ``from typing import Any``) is nobody's to import from
    it: not counted."""
    out: dict[str, set[str]] = {}
    for path, new in files.items():
        if not path.endswith(".py"):
            continue
        old = read_base(path)
        if old is None or old == new:
            continue
        if new is None:
            out[path] = {_stem(path)}
            continue
        key = (path, old, new, frozenset(packages))  # the same contents come back state after state
        if key not in _LOST:
            if len(_LOST) > 4096:
                _LOST.clear()
            _LOST[key] = _lost_names(path, old, new, packages)
        if _LOST[key]:
            out[path] = set(_LOST[key])
    return out


def _lost_names(path: str, old: bytes, new: bytes, packages: set[str]) -> frozenset[str]:
    """What one module no longer offers against the base (see ``lost``)."""
    before, after = facts_of(path, old), facts_of(path, new)
    if before.error or after.error:
        return frozenset()  # a file that does not parse is the touched file's own problem
    gone = before.names - after.names
    for name, accepted in before.signatures.items():
        now = after.signatures.get(name, accepted)
        if now is not None and (accepted is None or accepted - now):
            gone.add(name)
    for name, attrs in before.class_attrs.items():
        now_attrs = after.class_attrs.get(name)
        if attrs is not None and now_attrs is not None and set(attrs) - set(now_attrs):
            gone.add(name)
    gone |= before.keys - after.keys
    if gone:  # rare: only then the imports it merely passed on are worth reading
        foreign = {n for n, (origin, _) in before.origins.items() if origin.split(".")[0] not in packages}
        foreign |= {n for n in _plain_imports(old) if n not in packages}
        gone = {n for n in gone - foreign if _NAME.match(n)}
    return frozenset(gone)


_IMPORT = re.compile(rb"^[ \t]*import[ \t]+([\w. \t,]+?)[ \t]*(?:#.*)?$", re.M)


def _plain_imports(source: bytes) -> set[str]:
    """Names ``import a.b`` / ``import a as b`` binds at any level of a module."""
    out = set()
    for found in _IMPORT.findall(source):
        for part in found.decode("utf-8", "replace").split(","):
            words = part.split()
            if len(words) == 3 and words[1] == "as":
                out.add(words[2])
            elif words:
                out.add(words[0].split(".")[0])
    return out


def _stem(path: str) -> str:
    """The name a module is imported by last (a package's ``__init__.py``: its directory)."""
    return module_name(path).rpartition(".")[2]


def dependents(base: BaseTree, states: Iterable[Files], packages: set[str],
               exclude: set[str] | None = None) -> list[str]:  # fmt: skip
    """The Python files of the base (anywhere in the tree: a root script and an ``__init__``-less
    ``tests/`` count) that mention a name some state's touched module of ``packages`` lost, and that
    module's own name (an import of it, or a relative one): the files to check in each state besides
    the touched ones. ``exclude``: files not to list (default: every file a state touches; a caller
    checking several states passes what it checks anyway per state). Sorted; empty when nothing is
    lost."""
    states = list(states)
    touched = set().union(*(set(files) for files in states)) if states else set()
    touched = touched if exclude is None else exclude
    by_module: dict[str, set[str]] = {}
    for files in states:
        for path, names in lost(base.read, files, packages).items():
            by_module.setdefault(path, set()).update(names)
    if not by_module or not packages:
        return []
    names = frozenset(n for found in by_module.values() for n in found)
    found = _grep(base, names)
    out = []
    for path in found:
        if path in touched or not path.endswith(".py"):
            continue
        data = base.read(path)
        if data is None:
            continue
        for module_path, gone in by_module.items():
            if _refers_to(path, data, module_path) and any(_mentions(data, n) for n in gone):
                out.append(path)
                break
    return sorted(out)


_RELATIVE = re.compile(rb"(?m)^[ \t]*from[ \t]+(\.+)([\w.]*)[ \t]+import\b")


def _refers_to(path: str, data: bytes, module_path: str) -> bool:
    """Can the file at ``path`` import from the module? Its dotted name (``a.b.c``), its package's
    with its own name (``from a.b import c``), or a relative import that resolves to either."""
    dotted = module_name(module_path)
    parent, _, stem = dotted.rpartition(".")
    if _mentions(data, dotted):
        return True
    if not _mentions(data, stem):
        return False
    if parent and _mentions(data, parent):
        return True
    here = module_name(path).split(".")
    package = here if path.endswith("/__init__.py") else here[:-1]
    for dots, name in _RELATIVE.findall(data):
        up = package[: len(package) - (len(dots) - 1)] if len(dots) > 1 else package
        absolute = ".".join([*up, *([name.decode()] if name else [])])
        if absolute in (dotted, parent):
            return True
    return False


def _mentions(data: bytes, name: str) -> bool:
    """``name`` (a word or a dotted name) in ``data``, not as part of a longer word (``x.name``
    counts: an attribute is a use)."""
    word = name.encode()
    if word not in data:  # the plain search first: the pattern below is slow on large files
        return False
    return re.search(rb"(?<![\w])" + re.escape(word) + rb"(?![\w])", data) is not None


def _grep(base: BaseTree, names: frozenset[str]) -> list[str]:
    """The tree's Python files that contain one of ``names`` as a word: one ``git grep --no-index``
    (any directory, git's own threads), remembered per base and question."""
    key = (str(base.root), names)
    if key not in _HITS:
        if len(_HITS) > 64:
            _HITS.clear()
        argv = ["grep", "--no-index", "-l", "-w", "-F", "-I"]
        for name in sorted(names):
            argv += ["-e", name]
        argv += ["--", "*.py"]
        try:
            proc = git.call(argv, base.root, timeout=120, own_group=False)
        except (OSError, TimeoutExpired):
            _HITS[key] = _scan(base, names)
        else:
            if proc.returncode in (0, 1):  # 1: nothing found
                lines = proc.stdout.decode("utf-8", "surrogateescape").splitlines()
                _HITS[key] = sorted(line for line in lines if line and not line.startswith(".git/"))
            else:
                _HITS[key] = _scan(base, names)
    return _HITS[key]


def _scan(base: BaseTree, names: frozenset[str]) -> list[str]:
    """The same question without git (no git, or it failed): read the tree's Python files."""
    out = []
    for file in sorted(base.root.rglob("*.py")):
        rel = file.relative_to(base.root).as_posix()
        if rel.startswith(".git/") or not file.is_file() or file.is_symlink():
            continue
        data = base.read(rel)
        if data is not None and any(n.encode() in data and _mentions(data, n) for n in names):
            out.append(rel)
    return out


__all__ = ["dependents", "lost"]
