"""The patched side in groups: the tests affected by the patch first (``audit/affected``), then the
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
from patchkit.audit import basesides, covermap
from patchkit.audit.affected import changes, split
from patchkit.audit.basedemand import file_of_test
from patchkit.audit.gates import Overlay
from patchkit.audit.pytestrun import NoReport, TestSettings
from patchkit.values import Message

SELECTIONS = ("upstream", "affected")


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
        if affected_only:
            info.update(first=_count(side), rest=0, left_out=0)
        return side, info if affected_only else None
    started = time.perf_counter()
    chosen = split(maps, changes(lambda p: _base_bytes(settings.base_root / p), pre, post))
    info.update(known=chosen.known, why=chosen.why)
    later = chosen.unaffected
    first = basesides.run_side(
        settings, post, selection, env_info, work, "patch", who, progress, (later, []), invert=True
    )
    info["first"] = _count(first)
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
    return {**rest, **first}, info


def _count(side) -> int:
    return len(side) if isinstance(side, dict) else 0


def _tell(who: str, info: dict, started: float) -> None:
    why = ", ".join(f"{k} {v}" for k, v in info.get("why", {}).items()) or "none"
    later = (
        f"left out {info['left_out']}" if info["select"] == "affected" else f"then the rest: {info['rest']}"
    )
    detail = f"{who}: affected first: {info['first']} test(s) ({why}); {later}; map {info['map']}"
    timing.record("tests.affected", time.perf_counter() - started, detail, started)


def _base_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def noted(summary: Message, groups: dict | None) -> Message:
    """The gate's summary with what ``--select affected`` left out and why, and a map it had to
    build or could not."""
    if not groups or groups.get("select") != "affected":
        return summary
    parts = list(summary.params.get("parts", []))
    if groups.get("map") == "built":
        parts.append(Message("tests.part.map-built", {"count": groups.get("built_paths", 0)}).to_dict())
    if groups.get("map") == "failed":
        parts.append(Message("tests.part.map-failed", {"error": groups.get("error", "")}).to_dict())
    elif groups.get("left_out"):
        why = [
            Message(f"tests.affected.{k}", {"count": v}).to_dict() for k, v in groups.get("why", {}).items()
        ]
        params = {"count": groups["left_out"], "known": groups.get("known", 0), "ran": groups.get("first", 0),
                  "why": why or [Message("tests.affected.none").to_dict()]}  # fmt: skip
        parts.append(Message("tests.part.left-out", params).to_dict())
    return Message(summary.key, {**summary.params, "parts": parts})
