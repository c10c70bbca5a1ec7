"""What a patch needs first to work, not only to apply.

A series' ``depends_on`` says which earlier patches a patch is applied with when it is taken alone:
the apply gate's "alone" check, the tests gate's two sides (base + its needs, and that + the patch)
and a reviewer's cherry-pick all use it. ``depends.compute_dependencies`` finds the smallest set
with which the patch *applies*; the prefix check proves every prefix of the series works. Neither
sees a patch that applies alone and uses what an earlier, unneeded patch adds: a real partial pick
of vLLM 0.34.0 put ``vllm/v1/token_buffer.py`` (a new module) in patch 1 and its importers in
patches 2 and 3, and declared no needs, so the tests gate ran patch 3's tests on base + patch 3
alone, where ``import vllm.v1.structured_output`` fails.

``working_needs`` checks each patch's own state, base + its needs + the patch, with the same static
check and ruff rules as the prefix check (its touched files and the untouched files it can break,
``dependents``) against the series state base + patches[..k]. A problem only the alone state has is
caused by an earlier patch left out: the earlier patch (with its own needs) that removes most such
problems is added, the smallest and then the nearest first, until none is left or none helps.
"""

from __future__ import annotations

from collections.abc import Callable

from patchkit.analysis import undefined
from patchkit.analysis.dependents import dependents
from patchkit.analysis.static import Problem, first_party, tree_state
from patchkit.base.tree import BaseTree

Files = dict[str, "bytes | None"]
After = Callable[[tuple[int, ...]], "Files | None"]
Key = tuple[str, str, str, str]


def working_needs(base: BaseTree, count: int, after: After, needs: list[list[int]],
                  touched: Callable[[int], set[str]],
                  name: Callable[[int], str] = str) -> list[tuple[list[int], dict[int, str]]]:  # fmt: skip
    """For each patch ``k`` (0-based, in series order): its needs (``needs[k]``, grown to include
    the needs of its needs) plus the earlier patches without which base + needs + k has a problem
    that base + patches[..k] does not, and for each added one the problem it removes.

    ``after(order)`` is the files changed by applying the patches of ``order`` to the base, in that
    order, or None when one does not apply; ``touched(k)`` the paths patch ``k`` writes; ``name(i)``
    how the reasons name patch ``i`` (a patch added only because another added one needs it)."""
    out: list[tuple[list[int], dict[int, str]]] = []
    final: list[list[int]] = []
    memo: dict = {}
    for k in range(count):
        have = _closed(set(needs[k]), final)
        why: dict[int, str] = {}
        series = after(tuple(range(k + 1)))
        own = sorted(p for p in touched(k) if p.endswith(".py") and series is not None and series.get(p))
        so_far = {p for i in range(k + 1) for p in touched(i)}
        while own and len(have) < k:
            alone = after((*sorted(have), k))
            if alone is None:
                break  # it does not apply with these needs: the apply check's to say
            # its files and its needs' (a need's file can use what this patch removes), present in both
            paths = sorted({p for i in have for p in touched(i) if p.endswith(".py")} | set(own))
            paths = [p for p in paths if _present(base, alone, p) and _present(base, series, p)]  # type: ignore[arg-type]
            packages = first_party(so_far, lambda p, s=alone: s[p] if p in s else base.read(p))
            users = dependents(base, [alone], packages)
            extra = _problems(base, alone, paths, users, packages, memo)
            for key in _problems(base, series, paths, users, packages, memo):  # type: ignore[arg-type]
                extra.pop(key, None)
            if not extra:
                break
            best = _best_candidate(base, k, have, final, after, paths, users, packages, memo, extra)
            if best is None:
                break  # no earlier patch removes them: the prefix check reports what is left
            chosen, added, fixed = best
            why.setdefault(chosen, _reason([extra[key] for key in fixed], touched(chosen)))
            for i in sorted(added - have - {chosen}):
                why.setdefault(i, f"{name(chosen)} needs it")
            have |= added
        final.append(sorted(have))
        out.append((sorted(have), why))
    return out


def _present(base: BaseTree, files: Files, path: str) -> bool:
    return (files[path] if path in files else base.read(path)) is not None


def _reason(fixed: list[Problem], theirs: set[str]) -> str:
    """The problem to name for an added patch: one about a module that patch writes, if any."""
    for problem in fixed:
        module = (problem.target if problem.kind in ("name", "keyword") else problem.name).replace(".", "/")
        if problem.kind != "undefined" and {module + ".py", module + "/__init__.py"} & theirs:
            return problem.text()
    return fixed[0].text()


def _closed(start: set[int], final: list[list[int]]) -> set[int]:
    """``start`` with the needs of every patch in it, transitively (earlier patches are final)."""
    have, todo = set(start), list(start)
    while todo:
        i = todo.pop()
        for j in final[i] if i < len(final) else []:
            if j not in have:
                have.add(j)
                todo.append(j)
    return have


def _best_candidate(base: BaseTree, k: int, have: set[int], final: list[list[int]], after: After,
                    paths: list[str], users: list[str], packages: set[str], memo: dict,
                    extra: dict[Key, Problem]) -> tuple[int, set[int], list[Key]] | None:  # fmt: skip
    """The earlier patch whose addition (with its needs) removes most of ``extra``: (it, what is
    added with it, the problems removed); ties: fewer patches added, then the nearer one. None when
    none removes any."""
    best: tuple[tuple[int, int, int], int, set[int], list[Key]] | None = None
    for i in range(k - 1, -1, -1):
        if i in have:
            continue
        trial_have = _closed(have | {i}, final)
        trial = after((*sorted(trial_have), k))
        if trial is None:
            continue
        left = _problems(base, trial, paths, users, packages, memo)
        fixed = [key for key in extra if key not in left]
        if not fixed:
            continue
        rank = (-len(fixed), len(trial_have - have), k - i)
        if best is None or rank < best[0]:
            best = (rank, i, trial_have, fixed)
    return None if best is None else best[1:]


def _problems(base: BaseTree, files: Files, paths: list[str], users: list[str], packages: set[str],
              memo: dict) -> dict[Key, Problem]:  # fmt: skip
    """The static problems (imports, names, keywords) of ``paths`` and ``users`` in this state, and
    ruff's undefined names in ``paths``, by key."""
    state = tree_state(base, files, packages, memo)
    found = [q for p in [*paths, *users] for q in state.check(p)]
    try:
        found += undefined.check_one({p: files[p] if p in files else base.read(p) for p in paths})
    except undefined.NoRuff:
        pass  # the prefix check says the undefined-name rules could not run
    return {q.key: q for q in found}


__all__ = ["working_needs"]
