"""Names one patch uses that a later patch introduces, across files; and locals split in a function.

``names`` keeps a definition with its first use inside one file. Across files the same mistake
leaves a prefix of the series that does not import: patch 1 imports a class only patch 6 defines,
reads ``envs.VLLM_X`` that only a later patch adds to ``envs.py``, passes a keyword to a dataclass
whose field comes later, imports a module file a later patch creates. Each prefix state
(base + the first k domains) is checked with ``static``; for each problem the state of the
replay itself does not have, the lines that introduce the missing name are found in the change
blocks and resolved, in this order:

1. **move** the defining statements (a new file: all of it) to the domain that uses them first;
2. **reorder**: put the defining domain before the user;
3. **merge** the user's lines in that file into the defining domain (the use waits for it).

A step is kept only if the problems of the series go down. Inside one change block, a name that
one domain's lines bind and another domain's lines read (``local = expr`` and ``return local``)
merges those lines into the earlier domain first: half of such a statement split leaves dead code
or a function returning None. What stays unresolved is a dependency: ``semantic_needs`` lists it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from patchkit.analysis import undefined
from patchkit.analysis.dependents import dependents
from patchkit.analysis.static import Problem, first_party, tree_state
from patchkit.base.tree import BaseTree
from patchkit.split.blocks import Block
from patchkit.split.mend import mend_removal, mend_syntax
from patchkit.split.names import code_of, defined_names, statements, used_names
from patchkit.split.rules import LineVerdict

StateOf = Callable[[str, set[str]], "bytes | None"]
StatesOf = Callable[[str, list[set[str]]], "list[bytes | None]"]


@dataclass
class Need:
    """Domain ``user`` needs ``definer`` first: ``problem`` shows in the states between them."""

    user: str
    definer: str
    problem: Problem


def merge_split_locals(blocks: Sequence[Block], order: list[str]) -> list[dict]:
    """One change block whose domains bind and read the same local: its lines go to the earlier."""
    rank = {name: i for i, name in enumerate(order)}
    notes = []
    for block in blocks:
        if not block.path.endswith(".py") or len(block.domains()) < 2:
            continue
        bound: dict[str, set[str]] = {}
        read: dict[str, set[str]] = {}
        rebinds: dict[str, set[str]] = {}
        for line, verdict in zip(block.new, block.new_domains):
            if not line[:1].isspace():
                continue  # module level: ``names`` and the cross-file pass handle those
            binds, reads = defined_names(line), used_names(line)
            bound.setdefault(verdict.domain, set()).update(binds)
            read.setdefault(verdict.domain, set()).update(reads)
            # ``kwargs = kwargs + ...`` rebinds: it reads the binding, so it cannot stand in for it
            rebinds.setdefault(verdict.domain, set()).update(binds & reads)
        for definer, names in bound.items():
            for user, uses in read.items():
                shared = sorted(names & uses - (bound.get(user, set()) - rebinds.get(user, set())))
                if user == definer or not shared:
                    continue
                first, other = sorted((definer, user), key=lambda d: rank.get(d, len(rank)))
                reason = f"merged with {other}: both write the statements using {shared[0]!r}"
                for verdicts in (block.old_domains, block.new_domains):
                    for i, v in enumerate(verdicts):
                        if v.domain == other:
                            verdicts[i] = LineVerdict(first, reason)
                why = f"a local split inside one function ({block.path})"
                notes.append({"step": "merge", "file": block.path, "name": shared[0], "domain": first,
                              "from": other, "why": why})  # fmt: skip
                break
            else:
                continue
            break
    return notes


class CrossFile:
    """The prefix states of a split in progress, checked with ``static``."""

    def __init__(self, base: BaseTree, blocks: Sequence[Block], state_of: StateOf,
                 states_of: StatesOf | None = None) -> None:  # fmt: skip
        self.base, self.blocks, self.state_of = base, blocks, state_of
        self.states_of = states_of or (lambda path, chosens: [state_of(path, c) for c in chosens])
        self.by_path: dict[str, list[Block]] = {}
        for block in blocks:
            self.by_path.setdefault(block.path, []).append(block)
        self.paths = sorted(self.by_path)
        self.memo: dict = {}
        every = {d for b in blocks for d in b.domains()}
        final = {p: state_of(p, every) for p in self.paths}
        self.packages = first_party(self.paths, lambda p: final[p] if p in final else base.read(p))
        self.final = final
        py = [p for p in self.paths if p.endswith(".py")]
        # ruff's undefined names of the base and the final state are not the split's: its process
        # runs beside the static checks below (undefined.check_async)
        self.ends: list = [{p: final[p] for p in py}, {p: base.read(p) for p in py}]
        self.pending = undefined.check_async(self.ends)
        end = tree_state(base, final, self.packages, self.memo)
        start = tree_state(base, {}, self.packages, self.memo)
        self.known = {q.key for p in py for q in end.check(p)} | {q.key for p in py for q in start.check(p)}
        self.ruff = True

    def problems(self, order: list[str]) -> list[tuple[int, Problem]]:
        """Every prefix state's problems the base and the final state do not have: static ones
        and ruff's undefined names (one ruff process for all the states)."""
        out = []
        asked, states = [], []
        chosens = [set(order[: k + 1]) for k in range(len(order) - 1)]
        # each file's domains and its state after every prefix, read once per call (lines only
        # move between calls)
        mine = {p: {d for b in self._of(p) for d in b.domains()} for p in self.paths}
        every = {p: self.states_of(p, chosens) for p in self.paths}
        for k, chosen in enumerate(chosens):
            touched = [p for p in self.paths if mine[p] & chosen]
            files = {p: every[p][k] for p in touched}
            states.append((k, touched, files))
            asked.append({p: d for p, d in files.items() if p.endswith(".py")})
        answer = None
        if self.ruff:  # ruff's process runs while the static checks below run
            try:
                if self.pending is not None:
                    self.pending, wait = None, self.pending
                    wait()
            except undefined.NoRuff:
                self.ruff = False
            else:
                answer = undefined.check_async(self.ends + asked)
        for k, touched, files in states:
            state = tree_state(self.base, files, self.packages, self.memo)
            for path in touched + self._users(files, touched):
                if path.endswith(".py"):
                    out += [(k, q) for q in state.check(path) if q.key not in self.known]
        if answer is not None:
            try:
                found = answer()
            except undefined.NoRuff:
                self.ruff = False
                return out
            if self.ends:
                self.known |= {q.key for q in found[0] + found[1]}
            found, self.ends = found[len(self.ends) :], []
            for k, problems in enumerate(found):
                out += [(k, q) for q in problems if q.key not in self.known]
        return out

    def _of(self, path: str) -> list[Block]:
        return self.by_path.get(path, [])

    def _users(self, files: dict, touched: list[str]) -> list[str]:
        """Files a later domain changes, still the base's in this state, that use what the state
        removes (``dependents``): a caller updated only after its callee went."""
        later = [p for p in self.paths if p.endswith(".py") and p not in files]
        if not later:
            return []
        found = set(dependents(self.base, [files], self.packages, exclude=set(touched)))
        return [p for p in later if p in found]

    def sites(self, problem: Problem, later: set[str]) -> list[tuple[Block, int, int]]:
        """(block, start, stop) of the added statements of ``later`` domains that introduce the name."""
        if problem.kind == "undefined":  # per file: the statements of that file that bind it
            return [
                (b, start, stop)
                for b in self._of(problem.file)
                for start, stop in statements(b.new)
                if any(b.new_domains[i].domain in later for i in range(start, stop))
                and _binds(problem.name, b.new[start:stop])
            ]
        if problem.kind == "module":
            base = problem.name.replace(".", "/")
            own = (base + ".py", base + "/__init__.py")
            paths = [p for p in self.paths if p in own or p.startswith(base + "/")]
            return [(b, 0, len(b.new)) for p in paths for b in self._of(p) if set(b.domains()) & later]
        owner = problem.target.rsplit(".", 1)[0]
        targets = [owner] if problem.kind == "keyword" else [problem.target, owner]
        word = re.compile(rf"\b{re.escape(problem.name)}\b")
        found = []
        files = [t.replace(".", "/") + end for t in targets for end in (".py", "/__init__.py")]
        for path in dict.fromkeys(files):
            for block in self._of(path):
                for start, stop in statements(block.new):
                    lines = block.new[start:stop]
                    if not any(block.new_domains[i].domain in later for i in range(start, stop)):
                        continue
                    if problem.kind == "name" and (
                        any(problem.name in defined_names(ln) for ln in lines)
                        or any(f'"{problem.name}"' in ln for ln in lines)
                    ):
                        found.append((block, start, stop))
                    elif problem.kind == "keyword" and any(word.search(code_of(ln)) for ln in lines):
                        found.append((block, start, stop))
        return found


def resolve(base: BaseTree, blocks: Sequence[Block], order: list[str], state_of: StateOf, rounds: int = 64,
            check: CrossFile | None = None) -> tuple[list[str], list[dict], list[Need]]:  # fmt: skip
    """Move, reorder, merge until no prefix problem is left that a step can fix.

    Returns the (possibly reordered) domain order, one record per step taken, and what is left.
    ``check``: a ``CrossFile`` of these blocks from an earlier round (what it read of the base and
    the final state does not change when lines move)."""
    notes = merge_split_locals(blocks, order)
    check = check or CrossFile(base, blocks, state_of)  # the base and the final state: fixed
    problems = check.problems(order)
    tried: set[tuple] = set()
    for _ in range(rounds):
        todo = [(k, q) for k, q in problems if (q.key, order[k]) not in tried]
        if not todo:
            break
        k, problem = todo[0]
        tried.add((problem.key, order[k]))
        if problem.kind == "syntax":  # a change cut between domains: one of its blocks goes whole
            mended = mend_syntax(check, blocks, order, k, problem, problems)
            if mended is not None:
                problems, note = mended
                notes.append(note)
            continue
        user = _user_of(problem, order, k, blocks)
        if not any(d in order[: k + 1] for b in blocks if b.path == problem.file for d in b.domains()):
            mended = mend_removal(check, blocks, order, k, problem, problems)  # a user still the base's
            if mended is not None:
                order, problems, note = mended
                notes.append(note)
            continue
        later = set(order[order.index(user) + 1 :])
        sites = check.sites(problem, later)
        if not sites:
            continue
        definer = next(v.domain for b, s, e in sites for v in b.new_domains[s:e] if v.domain in later)
        tried.discard(("move", True))
        why = f"{problem.file} ({user}) needs {problem.name!r} ({problem.kind}), which {definer} introduces"
        saved = [(b, list(b.old_domains), list(b.new_domains)) for b in blocks]
        for step in ("move", "move", "reorder", "merge"):
            trial = list(order)
            if step == "move":  # the statements; then, if that does not parse, their whole blocks
                _give(sites, definer, user, whole=problem.kind == "module" or (step, True) in tried)
                tried.add((step, True))
            elif step == "reorder":
                trial.remove(definer)
                trial.insert(trial.index(user), definer)
            else:
                _merge_file(blocks, problem.file, user, definer)
            after = check.problems(trial)
            broken = {q.key for _, q in after if q.kind == "syntax"} - {q.key for _, q in problems}
            if len(after) < len(problems) and not broken:
                order, problems = trial, after
                notes.append({"step": step, "file": problem.file, "line": problem.line, "name": problem.name,
                              "kind": problem.kind, "domain": user if step == "move" else definer,
                              "from": definer if step == "move" else user, "why": why})  # fmt: skip
                break
            for block, old, new in saved:
                block.old_domains[:], block.new_domains[:] = old, new
    needs = []
    for k, problem in problems:
        user = _user_of(problem, order, k, blocks)
        sites = check.sites(problem, set(order[order.index(user) + 1 :]))
        definer = next((v.domain for b, s, e in sites for v in b.new_domains[s:e]
                        if order.index(v.domain) > order.index(user)), None)  # fmt: skip
        if definer is not None:
            needs.append(Need(user, definer, problem))
    return order, notes, needs


def _binds(name: str, lines: list[str]) -> bool:
    """Does this statement bind ``name``: as code, or as a parameter line of a signature cut over
    lines (``    name: Type,`` / ``    name,``)?"""
    if name in defined_names(" ".join(code_of(ln).strip() for ln in lines)):
        return True
    param = re.compile(rf"^\s*\*{{0,2}}{re.escape(name)}\s*(?::[^=]|,\s*$|\)|:$)")
    return any(param.match(code_of(ln)) for ln in lines)


def _user_of(problem: Problem, order: list[str], k: int, blocks: Sequence[Block]) -> str:
    """The earliest domain (up to k) with lines in the problem's file: the one that brought the use."""
    mine = {d for b in blocks if b.path == problem.file for d in b.domains()}
    return next((d for d in order[: k + 1] if d in mine), order[k])


def _give(sites, definer: str, user: str, whole: bool) -> None:
    reason = LineVerdict(user, f"introduces what {user} uses first (was {definer})")
    for block, start, stop in sites:
        rewrites = any(v.domain == definer for v in block.old_domains)
        for verdicts, span in ((block.old_domains, None), (block.new_domains, (start, stop))):
            for i, v in enumerate(verdicts):
                inside = whole or rewrites or span is None or span[0] <= i < span[1]
                if v.domain == definer and inside and (span is not None or whole or rewrites):
                    verdicts[i] = reason


def _merge_file(blocks: Sequence[Block], path: str, user: str, definer: str) -> None:
    reason = LineVerdict(definer, f"merged into {definer}: entangled with what it introduces (was {user})")
    for block in blocks:
        if block.path == path:
            for verdicts in (block.old_domains, block.new_domains):
                for i, v in enumerate(verdicts):
                    if v.domain == user:
                        verdicts[i] = reason


__all__ = ["CrossFile", "Need", "merge_split_locals", "resolve"]
