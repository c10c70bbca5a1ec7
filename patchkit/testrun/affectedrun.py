"""The patched side in groups: the tests affected by the patch first (``testrun/affected``), then the
rest of the selection — or, with ``--select affected``, not the rest (the record says how many
were left out and why).

Upstream CI's selection (``select = "upstream"``, the default) runs in full: grouped when the cache
holds the base's coverage map of every selected path, else in one run as before — the default
never builds a map. ``--select affected`` builds a missing map on the base (said in the record);
when it cannot, it runs the full selection and says why: it never runs fewer tests silently.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from patchkit import timing
from patchkit.testrun import basesides, carry, covermap
from patchkit.testrun.affected import changes, split
from patchkit.testrun.basedemand import file_of_test
from patchkit.testrun.overlaytree import Overlay
from patchkit.testrun.pytestrun import NoReport, TestSettings
from patchkit.values import Message


def patched_side(settings: TestSettings, pre: Overlay, post: Overlay, selection: list[str], env_info: dict,
                 work: Path, who: str, progress: Callable[..., None]):  # fmt: skip
    """(outcomes or NoReport, what the groups were: None when the selection ran in one run)."""
    affected_only = settings.select == "affected"
    maps = covermap.load(settings, env_info, selection)
    info: dict = {"select": settings.select, "map": "cached" if len(maps) == len(selection) else "missing"}
    if len(maps) < len(selection) and affected_only:
        missing = [p for p in selection if p not in maps]
        built = covermap.build(settings, env_info, missing, work / "map", progress, who)
        if isinstance(built, NoReport):  # no map: the full selection, and the record says why
            info.update(map="failed", error=built.message.to_dict())
        else:
            maps.update(built)
            info.update(map="built", built_paths=len(missing))
    if len(maps) < len(selection):
        side = basesides.run_side(settings, post, selection, env_info, work, "patch", who, progress)
        basesides.record_as_base(settings, post, selection, env_info, side, who)
        if affected_only:
            info.update(first=_count(side), rest=0, left_out=0)
        return side, info if affected_only else None
    started = time.perf_counter()
    base_read = basesides.base_reader(settings.base_root)
    chosen = split(maps, changes(base_read, pre, post))
    info.update(known=chosen.known, why=chosen.why)
    later = chosen.unaffected
    if affected_only and settings.use_cache:  # recorded under coverage: a later revision carries from it
        return _recorded(settings, post, selection, env_info, work, who, progress, later, base_read,
                         info, started)  # fmt: skip
    first = basesides.run_side(
        settings, post, selection, env_info, work, "patch", who, progress, (later, []), invert=True
    )
    info["first"] = _count(first)
    if not affected_only and not later:  # the first group was the whole selection
        basesides.record_as_base(settings, post, selection, env_info, first, who)
    if isinstance(first, NoReport) or affected_only or not later:
        info.update(rest=0, left_out=len(later) if affected_only else 0)
        _tell(who, info, started)
        return first, info
    files = sorted({file_of_test(t) for t in later})
    rest = basesides.run_side(settings, post, files, env_info, work, "patch-rest", who, progress, (later, []))
    info.update(rest=_count(rest), left_out=0)
    _tell(who, info, started)
    if isinstance(rest, NoReport):
        return rest, info
    whole = {**rest, **first}  # every test of every selected path: a run of base + post
    basesides.record_as_base(settings, post, selection, env_info, whole, who)
    return whole, info


def _recorded(settings: TestSettings, post: Overlay, selection: list[str], env_info: dict, work: Path,
              who: str, progress: Callable[..., None], later: list[str], base_read, info: dict,
              started: float):  # fmt: skip
    """``--select affected``: the affected tests, less those a recorded run of a tree that differs
    from this one only in code they did not execute already gives (``testrun/carry``), run under
    coverage and recorded for the next revision."""
    carried = carry.carry(settings, env_info, post, selection, base_read, exclude=set(later))
    skip = sorted(set(later) | set(carried.outcomes))
    run = covermap.measured(settings, env_info, post, selection, work, "patch", who, progress, (skip, []),
                            invert=True, need_map=False)  # fmt: skip
    if isinstance(run, NoReport):
        first: dict | NoReport = run
        info.update(first=0)
    else:
        fresh, fresh_maps, _ = run
        carry.remember(settings, env_info, post, fresh_maps, fresh, carried)
        first = {**carried.outcomes, **fresh}
        info.update(first=len(fresh), recorded=bool(fresh_maps))
    if carried.count:
        info.update(carried=carried.count, carried_from=carried.sources)
    info.update(rest=0, left_out=len(later))
    _tell(who, info, started)
    return first, info


def _count(side) -> int:
    return len(side) if isinstance(side, dict) else 0


def _tell(who: str, info: dict, started: float) -> None:
    why = ", ".join(f"{k} {v}" for k, v in info.get("why", {}).items()) or "none"
    later = (
        f"left out {info['left_out']}" if info["select"] == "affected" else f"then the rest: {info['rest']}"
    )
    carried = f"; carried {info['carried']} from a recorded run" if info.get("carried") else ""
    detail = f"{who}: affected first: {info['first']} test(s) ({why}){carried}; {later}; map {info['map']}"
    timing.record("tests.affected", time.perf_counter() - started, detail, started)


def noted(summary: Message, groups: dict | None, base: dict | None = None) -> Message:
    """The gate's summary with what ``--select affected`` left out and why, a map it had to build
    or could not, and the outcomes carried from a recorded run (``base``: the base side's counts)."""
    if not groups or groups.get("select") != "affected":
        return summary
    parts = list(summary.params.get("parts", []))
    if (base or {}).get("carried"):
        parts.append(Message("tests.part.carried-base", _carried_params(base)).to_dict())
    if groups.get("map") == "built":
        parts.append(Message("tests.part.map-built", {"count": groups.get("built_paths", 0)}).to_dict())
    if groups.get("map") == "failed":
        parts.append(Message("tests.part.map-failed", {"error": groups.get("error", "")}).to_dict())
    if groups.get("carried"):  # outcomes kept from a recorded run (testrun/carry), and what changed since
        parts.append(Message("tests.part.carried", _carried_params(groups)).to_dict())
    if groups.get("map") != "failed" and groups.get("left_out"):
        why = [
            Message(f"tests.affected.{k}", {"count": v}).to_dict() for k, v in groups.get("why", {}).items()
        ]
        params = {"count": groups["left_out"], "known": groups.get("known", 0), "ran": groups.get("first", 0),
                  "why": why or [Message("tests.affected.none").to_dict()]}  # fmt: skip
        parts.append(Message("tests.part.left-out", params).to_dict())
    return Message(summary.key, {**summary.params, "parts": parts})


def _carried_params(counts: dict) -> dict:
    sources = counts.get("carried_from", {})
    changed = sorted({f for source in sources.values() for f in source.get("changed", [])})
    return {"count": counts["carried"], "paths": len(sources), "changed": ", ".join(changed) or "-"}


def carried_evidence(groups: dict | None, base: dict | None) -> dict | None:
    """The evidence for carried outcomes, as the tests gate's ``witness`` takes it: the recorded runs
    (coverage.py, a context per test) they come from, per side; None when nothing was carried."""
    sides = [(side, counts) for side, counts in (("patched", groups or {}), ("base", base or {}))
             if counts.get("carried")]  # fmt: skip
    if not sides:
        return None
    told = "; ".join(
        f"{side}: {counts['carried']} outcome(s) from recorded run(s) of "
        + ", ".join(
            f"{path} (tree {s['tree']}, changed since: {', '.join(s['changed']) or 'nothing'})"
            for path, s in sorted(counts.get("carried_from", {}).items())
        )  # fmt: skip
        for side, counts in sides
    )
    paths = sorted({p for _, counts in sides for p in counts.get("carried_from", {})})
    return {"tool": "coverage.py (per-test contexts of a recorded run)", "outcome": told, "inputs": paths,
            "counts": {side: int(counts["carried"]) for side, counts in sides}}  # fmt: skip
