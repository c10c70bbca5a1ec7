"""Every prefix of a series is a working tree: base + patches[1..k] compiles, imports and calls its
own package correctly (``static``), for every k, not only the last.

A problem of a prefix state that the replay's own final state has too is the replay's, not the
split's: it is reported as a finding of the replay. One that the base already has is not counted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from patchkit.analysis import undefined
from patchkit.analysis.dependents import dependents
from patchkit.analysis.static import Problem, State, first_party, tree_state, uses_of
from patchkit.base.tree import BaseTree
from patchkit.series.files import SeriesEntry
from patchkit.split.proof import apply_entries

Files = dict[str, "bytes | None"]


@dataclass
class PrefixResult:
    states: int = 0
    files_checked: int = 0  # (state, file) pairs
    imports_checked: int = 0
    failures: list[dict] = field(default_factory=list)  # the split's: exit 1
    replay_findings: list[dict] = field(default_factory=list)  # the replay's final state has them too
    seconds: float = 0.0
    undefined_names: str = "not checked"  # "ruff F821,F822,F823,F405", or "could not run: why"
    dependents: list[str] = field(default_factory=list)  # untouched files that use what a state removes

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict:
        return {
            "ok": self.ok, "states": self.states, "files_checked": self.files_checked,
            "imports_checked": self.imports_checked, "failures": self.failures,
            "replay_findings": self.replay_findings, "undefined_names": self.undefined_names,
            "dependents": self.dependents,
            "method": "each state base + patches[1..k] re-applied from the written series; every "
            "touched Python file, and every untouched one that uses a name a state removes, "
            "compiled, its first-party imports and keyword arguments resolved statically against "
            "that state",
        }  # fmt: skip


def check_states(base: BaseTree, states: list[tuple[str, Files]], final: Files,
                 touched_of: Callable[[int], set[str]] | None = None) -> PrefixResult:  # fmt: skip
    """``states``: (patch name, touched files after it); ``final``: touched files of base + replay."""
    started = time.perf_counter()
    result = PrefixResult(states=len(states))
    touched_all = set(final).union(*(set(files) for _, files in states)) if states else set(final)
    packages = first_party(touched_all, lambda p: final.get(p) if p in final else base.read(p))
    memo: dict[str, bytes | None] = {}  # base files, read once for every state
    end = tree_state(base, final, packages, memo)
    start = tree_state(base, {}, packages, memo)
    known = {p.key for path in final if path.endswith(".py") for p in end.check(path)}
    on_base = {p.key for path in final if path.endswith(".py") for p in start.check(path)}
    # untouched files that use what a state takes away (a removed function, module, keyword)
    # (a file a later state touches is still the base's in the states before it: listed, and checked
    # as a dependent in every state that leaves it untouched)
    seen: set[tuple[str, str, str, str]] = set()
    touched: set[str] = set()
    touched_at: list[set[str]] = []
    for k, (_, files) in enumerate(states):
        touched |= touched_of(k) if touched_of else set(files)
        touched_at.append(set(touched))
    users = dependents(base, [files for _, files in states] + [final], packages, exclude=set())
    result.dependents = [p for p in users if not touched_at or p not in touched_at[0]]
    known |= {p.key for path in result.dependents for p in end.check(path)}
    on_base |= {p.key for path in result.dependents for p in start.check(path)}
    undefined = _undefined(base, states, final, touched_at, result)
    known |= undefined[1]
    on_base |= undefined[0]
    for k, (name, files) in enumerate(states):
        touched = touched_at[k]
        state = tree_state(base, files, packages, memo)
        users = [p for p in result.dependents if p not in touched]
        for path in sorted(p for p in touched if p.endswith(".py")) + users:
            result.files_checked += 1
            source = state.read(path)
            if source is None:
                continue
            problems = state.check(path) + undefined[2][k].get(path, [])
            result.imports_checked += _imports(state, path)
            for problem in problems:
                if problem.key in on_base or problem.key in seen:
                    continue  # reported once, at the first patch whose state has it
                seen.add(problem.key)
                record = {"patch": name, **problem.to_dict()}
                (result.replay_findings if problem.key in known else result.failures).append(record)
    result.seconds = time.perf_counter() - started
    return result


def _undefined(base: BaseTree, states: list[tuple[str, Files]], final: Files, touched_at: list[set[str]],
               result: PrefixResult) -> tuple[set, set, list[dict[str, list[Problem]]]]:  # fmt: skip
    """ruff F821/F822/F823 on every state's touched files, the base's and the final state's, in
    one ruff process: (keys on the base, keys in the final state, each state's problems by path)."""
    every = set().union(*touched_at) if touched_at else set()
    py = sorted(p for p in every | set(final) if p.endswith(".py"))

    def side(files: Files, paths) -> Files:
        return {p: files[p] if p in files else base.read(p) for p in paths}

    asked = [side({}, py), side(final, py)]
    asked += [
        side(files, sorted(p for p in touched_at[k] if p.endswith(".py")))
        for k, (_, files) in enumerate(states)
    ]
    try:
        found = undefined.check(asked)
    except undefined.NoRuff as exc:
        result.undefined_names = f"could not run: {exc}"
        return set(), set(), [{} for _ in states]
    result.undefined_names = "ruff " + ",".join(undefined.CODES)
    per_state: list[dict[str, list[Problem]]] = []
    for problems in found[2:]:
        by_path: dict[str, list[Problem]] = {}
        for q in problems:
            by_path.setdefault(q.file, []).append(q)
        per_state.append(by_path)
    return {q.key for q in found[0]}, {q.key for q in found[1]}, per_state


def check_prefixes(base: BaseTree, entries: list[SeriesEntry], final: Files | None = None) -> PrefixResult:
    """THE check of every prefix state of a series (base + patches[1..k], for each k): compiles,
    first-party imports and keywords (``static``), undefined names (ruff, ``undefined``); a
    problem the base has is not counted, one the final state has too is the replay's
    (``replay_findings``), every other one is a failure. ``final``: the touched files after the
    whole replay (default: after the whole series)."""
    states = series_states(base, entries)
    if final is None:
        final = dict(states[-1][1]) if states else {}
    return check_states(base, states, final)


def _imports(state: State, path: str) -> int:
    source = state.read(path)
    return len(uses_of(path, source).imports) if source is not None else 0


class _Overlaid:
    """The base with the files a series prefix changed (what ``apply_entries`` reads from)."""

    def __init__(self, base: BaseTree, tree: dict) -> None:
        self.base, self.tree = base, tree

    def read(self, path: str) -> bytes | None:
        return self.tree[path][0] if path in self.tree else self.base.read(path)

    def mode(self, path: str) -> str | None:
        return self.tree[path][1] if path in self.tree else self.base.mode(path)


def series_states(base: BaseTree, entries: list[SeriesEntry]) -> list[tuple[str, Files]]:
    """(patch name, touched files) after each patch with the overlays listed after it; each
    patch is applied once, on the state the ones before it left."""
    groups: list[list[SeriesEntry]] = []
    for entry in entries:
        if entry.overlay is None or not groups:
            groups.append([entry])
        else:
            groups[-1].append(entry)
    out = []
    tree: dict = {}
    for group in groups:
        changed, _ = apply_entries(_Overlaid(base, tree), group)  # type: ignore[arg-type]
        tree = {**tree, **changed}
        out.append((group[0].name, {path: data for path, (data, _) in tree.items()}))
    return out


def check_series(base: BaseTree, entries: list[SeriesEntry], final: Files) -> PrefixResult:
    return check_states(base, series_states(base, entries), final)


def problem_text(record: dict) -> str:
    return f"{record['patch']}: {record['text']}"


__all__ = [
    "PrefixResult",
    "Problem",
    "check_prefixes",
    "check_series",
    "check_states",
    "problem_text",
    "series_states",
]
