"""A definition goes with the first patch that uses it.

Pattern rules claim lines by what they mention, not by the names they need. In the opt21-25
replay the tool-parser lines of ``cli_args.py`` call ``os.environ`` while the ``import os`` the
same commit added went to the serving patch, which comes later; and in ``anthropic/serving.py`` the
tool-parser lines use ``req``, which the anthropic-api lines of the same restructure define. Each
such patch alone leaves a name undefined (ruff F821) until a later patch arrives.

For every Python file this finds, per domain in series order, the names its added lines use that
only a *later* domain's added lines define (read from the lines: a block is a fragment of a file,
so strings and comments are stripped and imports, assignments, ``def``/``class``,
``for``/``with``/``except ... as`` and ``:=`` targets are recognised). Each candidate is then
confirmed on the real intermediate state with ``symtable``: the name must be an undefined global
there. The defining statement moves to the earlier domain (the whole change block when the
definition rewrites base lines, or when the statement alone does not parse there, so no patch
carries half an edit), and the move is kept only if the state then parses and binds the name. It
repeats until nothing moves (moves only go to earlier domains, so it ends). The step check still
parses every other state afterwards.

It only ever changes which patch carries a line: the split stays lossless and the proof still
checks it; what it cannot move, the ruff gate still reports per patch.
"""

from __future__ import annotations

import ast
import builtins
import keyword
import re
import symtable
import warnings
from collections.abc import Callable, Sequence

from patchkit.split.blocks import Block
from patchkit.split.rules import LineVerdict

_STRING = re.compile(
    r"""[rRbBuUfF]{0,2}(?:'''.*?'''|\"\"\".*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*")"""
)
_IDENT = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\b(?!\s*=(?!=))")
_KNOWN = set(keyword.kwlist) | set(keyword.softkwlist) | set(dir(builtins)) | {"self", "cls"}
_IMPORT = re.compile(r"\s*import\s+(.+)")
_FROM = re.compile(r"\s*from\s+[\w.]+\s+import\s+(.+)")
_DEF = re.compile(r"\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)")
_ASSIGN = re.compile(r"\s*([A-Za-z_][\w\s,()\[\]*]*?)\s*(?::[^=]+)?=(?!=)")
_AS = re.compile(r"\bas\s+([A-Za-z_]\w*)")
_FOR = re.compile(r"\s*(?:async\s+)?for\s+(.+?)\s+in\b")
_WALRUS = re.compile(r"([A-Za-z_]\w*)\s*:=")


def code_of(line: str) -> str:
    """The line without string literals and comments."""
    return _STRING.sub('""', line).split("#", 1)[0]


def used_names(line: str) -> set[str]:
    return _used(code_of(line))


def _used(code: str) -> set[str]:
    if _IMPORT.match(code) or _FROM.match(code):
        return set()
    if _DEF.match(code):  # a def line uses its annotations and defaults (``def f(x: New): ...``)
        return _signature_uses(code)
    return {n for n in _IDENT.findall(code) if n not in _KNOWN}


def _signature_uses(code: str) -> set[str]:
    """Names a ``def``/``class`` line reads: annotations, defaults, bases, the return annotation
    (parameter names are not reads). A signature cut over lines: what follows ``:``, ``=``, ``->``."""
    text = code.strip()
    try:
        tree = ast.parse(text + (" ..." if text.endswith(":") else ""))
        node = tree.body[0]
        reads = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            reads = [a.annotation for a in every if a is not None and a.annotation is not None]
            reads += [*args.defaults, *(d for d in args.kw_defaults if d is not None), node.returns]
        elif isinstance(node, ast.ClassDef):
            reads = [*node.bases, *(k.value for k in node.keywords)]
        return {n.id for r in reads if r is not None for n in ast.walk(r)
                if isinstance(n, ast.Name) and n.id not in _KNOWN}  # fmt: skip
    except (SyntaxError, ValueError, IndexError):
        pieces = re.findall(r"(?::|->|=)\s*([^,)=]+)", text.split("(", 1)[-1])
        return {n for p in pieces for n in _IDENT.findall(p) if n not in _KNOWN}


def defined_names(line: str, in_import: bool = False) -> set[str]:
    """Names a line binds; ``in_import``: the line continues a parenthesised ``from x import (``."""
    return _defined(code_of(line), in_import)


def _defined(code: str, in_import: bool) -> set[str]:
    if in_import:
        return _import_list(code)
    if m := _FROM.match(code):
        return _import_list(m.group(1))
    if m := _IMPORT.match(code):
        names = set()
        for part in m.group(1).split(","):
            words = part.split()
            if len(words) >= 3 and words[1] == "as":
                names.add(words[2])
            elif words:
                names.add(words[0].split(".")[0])
        return names
    names = set(_AS.findall(code)) | set(_WALRUS.findall(code))
    if m := _DEF.match(code):
        names.add(m.group(1))
        names |= _parameters(code)  # a function's parameters bind its locals
    elif m := _FOR.match(code):
        names |= set(re.findall(r"[A-Za-z_]\w*", m.group(1)))
    elif (m := _ASSIGN.match(code)) and "." not in m.group(1) and not _keyword_line(code, m):
        names |= {n for n in re.findall(r"[A-Za-z_]\w*", m.group(1)) if n not in _KNOWN}
    return names


def _keyword_line(code: str, m: re.Match) -> bool:
    """``kwargs=x,`` or ``key=value)``: a keyword argument inside a call, not an assignment."""
    text = code.rstrip()
    opens = sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")
    return m.group(1).strip().isidentifier() and (text.endswith(",") and opens <= 0 or opens < 0)


def _parameters(code: str) -> set[str]:
    text = code.strip()
    try:
        node = ast.parse(text + (" ..." if text.endswith(":") else "")).body[0]
    except (SyntaxError, ValueError, IndexError):
        return set()
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return set()
    args = node.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {a.arg for a in every if a is not None} - {"self", "cls"}


def _import_list(text: str) -> set[str]:
    names = set()
    for part in text.replace("(", " ").replace(")", " ").split(","):
        words = part.split()
        if len(words) >= 3 and words[1] == "as":
            names.add(words[2])
        elif words and words[0] != "\\":
            names.add(words[0])
    return {n for n in names if n.isidentifier()}


def statements(lines: Sequence[str], codes: Sequence[str] | None = None) -> list[tuple[int, int]]:
    """(start, stop) of each logical statement in consecutive lines, by bracket depth and ``\\``
    (``codes``: the lines already through ``code_of``)."""
    spans = []
    start, depth = 0, 0
    for i, line in enumerate(lines):
        code = codes[i] if codes is not None else code_of(line)
        depth = max(depth + sum(code.count(c) for c in "([{") - sum(code.count(c) for c in ")]}"), 0)
        if depth == 0 and not code.rstrip().endswith("\\"):
            spans.append((start, i + 1))
            start = i + 1
    if start < len(lines):
        spans.append((start, len(lines)))
    return spans


StateOf = Callable[[str, set[str]], "bytes | None"]  # (path, chosen domains) → file content


def follow_definitions(blocks: Sequence[Block], order: list[str], state_of: StateOf,
                       parsed: set[bytes] | None = None) -> list[str]:  # fmt: skip
    """Move definitions to the earliest domain that uses them; returns one note per move.

    ``state_of(path, chosen)`` gives a file with only the ``chosen`` domains' lines applied. A
    candidate found in the lines is confirmed on the user's state (the name is an undefined global
    there), and a move is kept only if that state then parses and binds the name; otherwise it is
    undone and the name left to the ruff gate. ``parsed`` collects the states found to parse.
    """
    rank = {name: i for i, name in enumerate(order)}
    notes: list[str] = []
    by_file: dict[str, list[Block]] = {}
    for block in blocks:
        if block.path.endswith(".py"):
            by_file.setdefault(block.path, []).append(block)
    for path, file_blocks in by_file.items():
        if len({v.domain for b in file_blocks for v in b.old_domains + b.new_domains}) < 2:
            continue
        analysis = _Analysis(path, file_blocks, order, state_of)
        if parsed is not None:
            analysis.parsed = parsed
        tried: set[tuple[str, str]] = set()
        while (found := analysis.next_move(rank, tried)) is not None:
            notes.append(found)
    return notes


class _Analysis:
    def __init__(self, path: str, blocks: list[Block], order: list[str], state_of: StateOf) -> None:
        self.path, self.blocks, self.order, self.state_of = path, blocks, order, state_of
        self._undefined: dict[bytes, set[str] | None] = {}
        self._facts: list[_Line] | None = None
        self.parsed: set[bytes] = set()

    def undefined(self, source: bytes | None) -> set[str] | None:
        if source is None:
            return set()
        if source not in self._undefined:
            self._undefined[source] = undefined_globals(source)
            if self._undefined[source] is not None:
                self.parsed.add(source)
        return self._undefined[source]

    def state_after(self, k: int) -> bytes | None:
        return self.state_of(self.path, set(self.order[: k + 1]))

    def next_move(self, rank: dict[str, int], tried: set[tuple[str, str]]) -> str | None:
        if self._facts is None:
            self._facts = _line_facts(self.blocks)
        for name, user, sites in _candidates(self._facts, rank):
            if (name, user) in tried:
                continue
            tried.add((name, user))
            missing = self.undefined(self.state_after(rank[user]))
            if missing is None or name not in missing:
                continue
            for whole in (False, True):
                saved = [(b, list(b.old_domains), list(b.new_domains)) for b in self.blocks]
                _move(name, user, sites, whole)
                # kept when the user's state now parses and binds the name
                missing = self.undefined(self.state_after(rank[user]))
                if missing is not None and name not in missing:
                    owners = ", ".join(sorted({d for *_, d in sites}))
                    return f"{self.path}: {name!r} is defined by {owners}, now by {user}, which uses it first"
                for block, old, new in saved:
                    block.old_domains[:], block.new_domains[:] = old, new
        return None


_MODULE_NAMES = {
    "__file__", "__name__", "__doc__", "__spec__", "__loader__", "__package__", "__builtins__",
    "__path__", "__annotations__", "__dict__", "__module__", "__qualname__",
}  # fmt: skip


def undefined_globals(source: bytes) -> set[str] | None:
    """Names the module reads as globals but never binds (pyflakes' F821, roughly); None when the
    source does not parse or a star import makes it unknowable."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            text = source.decode("utf-8", errors="surrogateescape")
            top = symtable.symtable(text, "<state>", "exec")
    except (SyntaxError, ValueError, UnicodeError):
        return None
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    read: set[str] = set()
    tables = [top]
    while tables:
        table = tables.pop()
        tables += table.get_children()
        for sym in table.get_symbols():
            if sym.is_declared_global() and sym.is_assigned():
                bound.add(sym.get_name())
            elif sym.is_referenced() and (table is top or sym.is_global()) and not sym.is_assigned():
                read.add(sym.get_name())
    return read - bound - _KNOWN - _MODULE_NAMES


class _Line:
    """One added line: where it is, its code, and what it uses and defines (read when asked)."""

    __slots__ = ("block", "start", "stop", "index", "code", "in_import", "_used", "_defined")

    def __init__(self, block: Block, start: int, stop: int, index: int, code: str, in_import: bool):
        self.block, self.start, self.stop, self.index = block, start, stop, index
        self.code, self.in_import = code, in_import
        self._used: set[str] | None = None
        self._defined: set[str] | None = None

    @property
    def domain(self) -> str:
        return self.block.new_domains[self.index].domain

    def used(self) -> set[str]:
        if self._used is None:
            self._used = _used(self.code)
        return self._used

    def defined(self) -> set[str]:
        if self._defined is None:
            self._defined = _defined(self.code, self.in_import)
        return self._defined


def _line_facts(blocks: list[Block]) -> list[_Line]:
    """Each added line with its code; moves change domains, not lines, so this is read once."""
    facts: list[_Line] = []
    for block in blocks:
        in_import = False
        codes = [code_of(line) for line in block.new]
        for start, stop in statements(block.new, codes):
            for i in range(start, stop):
                code = codes[i]
                facts.append(_Line(block, start, stop, i, code, in_import))
                if "import" in code and _FROM.match(code) and "(" in code and ")" not in code:
                    in_import = True
                elif in_import and ")" in code:
                    in_import = False
    return facts


def _candidates(facts: list[_Line], rank: dict[str, int]):
    """(name, user, sites): a name the user's added lines read that only later domains define.

    Only what can matter is read: no line of the file's last domain can use a later definition,
    and the first domain's definitions are read only when there is a candidate to rule out."""
    domains = [line.domain for line in facts]
    ranks = [rank.get(d, len(rank)) for d in domains]
    first, last = min(ranks, default=0), max(ranks, default=0)
    defs: dict[str, list[tuple[Block, int, int, str]]] = {}  # name → (block, start, stop, domain)
    uses: dict[str, set[str]] = {}  # domain → names its added lines use
    for line, domain, r in zip(facts, domains, ranks):
        if r < last:
            uses.setdefault(domain, set()).update(line.used())
        if r > first:
            for name in line.defined():
                defs.setdefault(name, []).append((line.block, line.start, line.stop, domain))
    found = []
    for user in sorted(uses, key=lambda d: rank.get(d, len(rank))):
        for name in sorted(uses[user]):
            sites = defs.get(name, [])
            if sites and all(rank[d] > rank[user] for *_, d in sites):
                found.append((name, user, sites))
    if found:  # a first-domain line that defines the name defines it in time for everyone
        early = set().union(*(line.defined() for line, r in zip(facts, ranks) if r == first))
        found = [item for item in found if item[0] not in early]
    return found


def _move(name: str, user: str, sites, whole: bool) -> None:
    """Give the defining statements (``whole``: every line of their owner in those blocks) to ``user``;
    a definition that rewrites base lines always moves with its whole change."""
    for block, start, stop, owner in sites:
        reason = LineVerdict(user, f"defines {name!r}, which {user} uses first (was {owner})")
        if whole or any(v.domain == owner for v in block.old_domains):
            for verdicts in (block.old_domains, block.new_domains):
                for i, v in enumerate(verdicts):
                    if v.domain == owner:
                        verdicts[i] = reason
        else:
            for i in range(start, stop):
                if block.new_domains[i].domain == owner:
                    block.new_domains[i] = reason
