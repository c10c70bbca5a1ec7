"""Two repairs of the cross-file pass (``crossfile.resolve``), for prefix problems no name move fixes.

* ``mend_syntax``: a prefix state that does not parse because one statement's change was cut between
  two domains (1Cat-vLLM v1.2.1..v1.2.2: ``if (`` turned into ``x = (`` by one commit, its condition
  and body rewritten by another): the nearest such block goes whole to one of them.
* ``mend_removal``: a file no domain of the prefix changes uses what the prefix removes, and a later
  domain updates it: that domain goes first, else the removal waits for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from patchkit.analysis.static import Problem
from patchkit.split.blocks import Block
from patchkit.split.rules import LineVerdict


class Checker(Protocol):
    """What the repairs need of ``crossfile.CrossFile``: the prefix problems of an order, and a
    file's state with some domains applied."""

    def problems(self, order: list[str]) -> list[tuple[int, Problem]]: ...

    def state_of(self, path: str, chosen: set[str]) -> bytes | None: ...


Found = list[tuple[int, Problem]]


def mend_syntax(check: Checker, blocks: Sequence[Block], order: list[str], k: int, problem: Problem,
                 problems: Found) -> tuple[Found, dict] | None:  # fmt: skip
    """A prefix state that does not parse: one statement's change was cut between domains (vLLM's
    ``if (`` turned into ``x = (`` by one commit and its condition and body rewritten by another).
    The blocks of that file with a later domain's lines, nearest to the error first, are tried
    whole: first the later lines go to the domain of the prefix nearest to them, then the block's
    prefix lines wait for its latest domain; the first after which this state of the file parses,
    or fails only further down, and no other state stops parsing is kept."""
    chosen = set(order[: k + 1])
    rank = {name: i for i, name in enumerate(order)}
    mine = sorted((b for b in blocks if b.path == problem.file), key=lambda b: b.old_index)
    lines = _prefix_lines(mine, chosen)
    early = [(lines[id(b)], d) for b in mine for d in b.domains() if d in chosen]
    later = [b for b in mine if any(d not in chosen for d in b.domains())]
    later.sort(key=lambda b: abs(lines[id(b)] - problem.line))
    before = {(j, q.file): q.line for j, q in problems if q.kind == "syntax"}
    size = _lines(check, problem.file, chosen)
    for block in later[:6]:
        targets = []
        if early:
            targets.append(min(early, key=lambda e: abs(e[0] - lines[id(block)]))[1])
        own = [d for d in block.domains() if d in rank]
        if any(d in chosen for d in own):
            targets.append(max(own, key=lambda d: rank[d]))
        for target in dict.fromkeys(targets):
            saved = (list(block.old_domains), list(block.new_domains))
            why = f"a part of this change alone leaves {problem.file} unparsable ({problem.name})"
            verdict = LineVerdict(target, f"merged into {target}: {why}")
            for verdicts in (block.old_domains, block.new_domains):
                for i, v in enumerate(verdicts):
                    if v.domain != target:
                        verdicts[i] = verdict
            after = check.problems(order)
            now = {(j, q.file): q for j, q in after if q.kind == "syntax"}
            # progress: this state of this file parses, or fails at another statement (a second cut
            # the parser reached only now: not the same error where the merge's lines moved it),
            # and no other state or file stops parsing; what a file that parses again shows besides
            # (its own problems, hidden while it did not parse) is for the rounds that follow
            here = now.get((k, problem.file))
            shift = _lines(check, problem.file, chosen) - size  # the lines the merge added or took
            same = here is not None and here.line in (problem.line, problem.line + shift)
            if not (same and _message(here.name) == _message(problem.name)) and now.keys() <= before.keys():
                note = {"step": "merge", "file": problem.file, "line": problem.line, "name": problem.name,
                        "kind": "syntax", "domain": target, "from": ", ".join(sorted(set(own) - {target})),
                        "why": why}  # fmt: skip
                return after, note
            block.old_domains[:], block.new_domains[:] = saved
    return None


def mend_removal(check: Checker, blocks: Sequence[Block], order: list[str], k: int, problem: Problem,
                  problems: Found) -> tuple[list[str], Found, dict] | None:  # fmt: skip
    """A file no domain of the prefix changes uses what the prefix removes (a function gone, a
    keyword dropped), and a later domain updates that file: that domain goes before the one that
    removes (reorder), else the removal waits for it (its lines in the removed-from file merge
    into the updating domain); kept only when the problems go down and every state still parses."""
    chosen = order[: k + 1]
    updaters = [d for d in order[k + 1 :] if any(d in b.domains() for b in blocks if b.path == problem.file)]
    target = problem.name if problem.kind == "module" else problem.target
    owner = target.replace(".", "/")
    owned = {owner + ".py", owner + "/__init__.py"}
    if problem.kind == "keyword":  # the callable's module
        owned |= {owner.rpartition("/")[0] + ".py", owner.rpartition("/")[0] + "/__init__.py"}
    removers = [d for d in chosen if any(d in b.domains() for b in blocks if b.path in owned)]
    if not updaters or not removers:
        return None
    syntax = {q.key for _, q in problems if q.kind == "syntax"}
    why = f"{problem.file} uses {problem.name!r}, which {removers[0]} removes and {updaters[0]} stops using"
    for updater in updaters:
        trial = [d for d in order if d != updater]
        trial.insert(trial.index(removers[0]), updater)
        after = check.problems(trial)
        if len(after) < len(problems) and not {q.key for _, q in after if q.kind == "syntax"} - syntax:
            note = {"step": "reorder", "file": problem.file, "line": problem.line, "name": problem.name,
                    "kind": problem.kind, "domain": updater, "from": removers[0], "why": why}  # fmt: skip
            return trial, after, note
        saved = [(b, list(b.old_domains), list(b.new_domains)) for b in blocks if b.path in owned]
        reason = LineVerdict(updater, f"merged into {updater}: {why}")
        for block, _, _ in saved:
            for verdicts in (block.old_domains, block.new_domains):
                for i, v in enumerate(verdicts):
                    if v.domain in removers:
                        verdicts[i] = reason
        after = check.problems(order)
        if len(after) < len(problems) and not {q.key for _, q in after if q.kind == "syntax"} - syntax:
            note = {"step": "merge", "file": problem.file, "line": problem.line, "name": problem.name,
                    "kind": problem.kind, "domain": updater, "from": ", ".join(removers),
                    "why": why}  # fmt: skip
            return list(order), after, note
        for block, old, new in saved:
            block.old_domains[:], block.new_domains[:] = old, new
    return None


def _lines(check: Checker, path: str, chosen: set[str]) -> int:
    return len((check.state_of(path, chosen) or b"").splitlines())


def _message(error: str) -> str:
    """A syntax error's message without its line number (``line 5: expected ':'``)."""
    return error.partition(": ")[2] or error


def _prefix_lines(blocks: list[Block], chosen: set[str]) -> dict[int, int]:
    """Each block's first line (1-based) in the state with only the ``chosen`` domains applied."""
    out, shift = {}, 0
    for block in blocks:
        out[id(block)] = block.old_index + shift + 1
        shift += sum(v.domain in chosen for v in block.new_domains)
        shift -= sum(v.domain in chosen for v in block.old_domains)
    return out


__all__ = ["Found", "mend_removal", "mend_syntax"]
