"""Affected tests (pure): which of a selection's tests executed, on the base, a scope the patch
changes — those run first; the rest only after them, or not at all with ``--select affected``.

The changes are those of the patch on the state before it (base + the patches it needs) and those
of the patches it needs on the base, each mapped to the scopes of the older file
(``analysis/scopes``). The map (``testrun/covermap``) is of the bare base: a test that executed none of
the earlier patches' changes runs the same code on base + those patches as on the base, so a test
it leaves out executed no changed scope there either. A test is affected when it:

- executed a line of a changed function (``function``);
- executed any line of a file whose module-level code changed, or that is deleted (``module``) —
  its import (``collect:``) counts for every test of its module;
- lies in a test file the patch (or a patch it needs) changes or adds (``test-file``);
- or when a change touches a file the map cannot speak for — not Python, a ``conftest.py``, or a
  new or deleted module of an importable package (nobody executed it on the base, yet a registry,
  a plugin scan or a ``try: import`` may load it by name): then every test is (``everything``).

Only tests the map knows and proves unaffected are left out: a test the map does not know (new,
or a parameter the patch adds) always runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from patchkit.analysis.scopes import MODULE, changed_scopes
from patchkit.testrun.basedemand import file_of_test
from patchkit.testrun.overlaytree import Overlay
from patchkit.testrun.testselect import is_test_file

EVERYTHING = "<everything>"


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="replace")


def changes(base_read: Callable[[str], bytes | None], pre: Overlay, post: Overlay) -> dict[str, set[str]]:
    """file -> the scopes changed: the patch's (``pre`` -> ``post``, on the ``pre`` file) and the
    earlier patches' (base -> ``pre``, on the base file). A file that is not Python: {EVERYTHING}."""
    out: dict[str, set[str]] = {}
    pairs = [(p, pre[p] if p in pre else base_read(p), post[p]) for p in post]
    pairs += [(p, base_read(p), pre[p]) for p in pre]

    def exists(path: str) -> bool:  # in the base, or in the tree before or after the patch
        return base_read(path) is not None or any(tree.get(path) is not None for tree in (pre, post))

    for path, old, new in pairs:
        if old == new:
            continue
        out.setdefault(path, set()).update(scopes_of_change(path, old, new, exists))
    return out


def scopes_of_change(
    path: str, old: bytes | None, new: bytes | None, exists: Callable[[str], bool]
) -> set[str]:
    """The scopes of ``old`` a change of ``path`` touches. {EVERYTHING} where the map cannot speak:
    a file that is not Python, a ``conftest.py``, and a module of an importable package (its folder
    has an ``__init__.py``) that is new or deleted — on the older tree nobody executed it, yet code
    may import it by name (a registry, a plugin scan, ``try: import``), so no test is proven
    unaffected by it. A new or deleted test file is its own tests' (``test-file``)."""
    name = path.rsplit("/", 1)[-1]
    if not path.endswith(".py") or name == "conftest.py":
        return {EVERYTHING}
    if (old is None or new is None) and not is_test_file(path):
        folder = path.rsplit("/", 1)[0] if "/" in path else ""
        if folder and exists(f"{folder}/__init__.py"):
            return {EVERYTHING}
    return changed_scopes(_text(old), _text(new))


@dataclass
class Affected:
    """The selection split: tests the map proves unaffected (left for later, or out), and why the
    others run first (reason -> tests)."""

    unaffected: list[str] = field(default_factory=list)
    known: int = 0  # tests the map knows
    why: dict[str, int] = field(default_factory=dict)


def split(maps: dict[str, dict], changed: dict[str, set[str]]) -> Affected:
    """Which of the mapped tests are affected by ``changed`` (``changes``); ``maps``: selected path ->
    its map (``covermap``)."""
    tests: set[str] = set()
    hit: dict[str, set[str]] = {"function": set(), "module": set(), "test-file": set(), "everything": set()}
    test_files = {p for p in changed if is_test_file(p)}
    everything = any(EVERYTHING in s for p, s in changed.items() if p not in test_files)
    for value in maps.values():
        ids = value["tests"]
        tests.update(ids)
        if everything:
            hit["everything"].update(ids)
            continue
        hit["test-file"].update(t for t in ids if file_of_test(t) in test_files)
        for path, scopes in changed.items():
            executed = value["files"].get(path, {})
            if MODULE in scopes:
                hit["module"].update(ids[i] for indices in executed.values() for i in indices)
            for scope in scopes - {MODULE}:
                hit["function"].update(ids[i] for i in executed.get(scope, []))
    run = set().union(*hit.values())
    why, counted = {}, set()
    for reason in ("test-file", "function", "module", "everything"):  # each test under its first reason
        mine = hit[reason] - counted
        counted |= mine
        if mine:
            why[reason] = len(mine)
    return Affected(unaffected=sorted(tests - run), known=len(tests), why=why)
