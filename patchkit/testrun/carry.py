"""Outcomes carried between two runs of a test path on trees that differ only in code the test did
not execute — pytest-testmon's rule, with the scopes of ``analysis/scopes`` (``--select affected``).

Each patched run under ``--select affected`` is recorded under coverage (``covermap.measured``): per
selected path, the tree it ran on (base + overlay, the overlay kept once per tree), each test's
outcome and which scopes of which files it executed. A later run of the same path on another tree
(the next revision of a patch after an edit, or a later patch's base side, base + the edited
patches) looks up the recorded trees of that path (the last ``KEEP``), takes the changes between
the recorded tree and its own (``affected.changes`` of the two overlays over the base) and, by the
affected rule (``affected.split``: a changed function it executed, module-level code of a file it
executed, its own test file changed, or a change the map cannot speak for), keeps the recorded
outcome of every test the record proves unaffected. The others run. A test the record does not
know runs; so does a test with no measured line (its coverage was lost, e.g. a worker killed), so
a lost measurement never passes for "executed nothing".

What it relies on, as the base map does: a test's outcome depends only on the code it executes in
the tree and on what the key holds (base, environment, per-test timeout, the installed vLLM). Each
record is checksummed in the cache; a corrupt or foreign record is a miss (the test runs).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field

from patchkit import cache
from patchkit.testrun.affected import scopes_of_change, split
from patchkit.testrun.basesides import base_key, base_reader, overlay_digest
from patchkit.testrun.basesides import key_digest as _key
from patchkit.testrun.overlaytree import Overlay
from patchkit.testrun.pytestrun import TestSettings
from patchkit.testrun.testselect import Outcome

RECORD, INDEX, TREE = "audit-carry", "audit-carry-index", "audit-carry-tree"
FORMAT = 1
KEEP = 6  # recorded trees kept per path (the newest)


@dataclass
class Carried:
    """What the records give a run: outcomes proven unaffected, and per path where they came from."""

    outcomes: dict[str, Outcome] = field(default_factory=dict)
    maps: dict[str, dict] = field(default_factory=dict)  # path -> the carried tests' part of its record
    sources: dict[str, dict] = field(default_factory=dict)  # path -> {tree, carried, changed files}

    @property
    def count(self) -> int:
        return len(self.outcomes)


def _common(settings: TestSettings, env_info: dict) -> tuple:
    return ("carry", FORMAT, *base_key(settings, {}, env_info))


def _encode(overlay: Overlay) -> dict[str, str | None]:
    return {p: None if d is None else base64.b64encode(d).decode() for p, d in sorted(overlay.items())}


def _decode(files: dict) -> Overlay:
    return {p: None if d is None else base64.b64decode(d) for p, d in files.items()}


def measured_only(value: dict) -> dict:
    """A map with only the tests that have a measured line (a test always executes its own body)."""
    seen = {i for scopes in value["files"].values() for ids in scopes.values() for i in ids}
    keep = [i for i in range(len(value["tests"])) if i in seen]
    return _subset(value, keep)


def _subset(value: dict, keep: list[int]) -> dict:
    new = {old: n for n, old in enumerate(keep)}
    files: dict[str, dict[str, list[int]]] = {}
    for rel, scopes in value["files"].items():
        for name, ids in scopes.items():
            mine = [new[i] for i in ids if i in new]
            if mine:
                files.setdefault(rel, {})[name] = mine
    return {"tests": [value["tests"][i] for i in keep], "files": files}


def merge(a: dict, b: dict) -> dict:
    """Two maps of one path (``a`` wins for a test in both)."""
    tests = list(a["tests"]) + [t for t in b["tests"] if t not in set(a["tests"])]
    index = {t: i for i, t in enumerate(tests)}
    files: dict[str, dict[str, set[int]]] = {}
    for value, skip in ((a, set()), (b, set(a["tests"]))):
        for rel, scopes in value["files"].items():
            for name, ids in scopes.items():
                mine = {index[value["tests"][i]] for i in ids if value["tests"][i] not in skip}
                if mine:
                    files.setdefault(rel, {}).setdefault(name, set()).update(mine)
    return {"tests": tests, "files": {r: {n: sorted(i) for n, i in s.items()} for r, s in files.items()}}


def remember(settings: TestSettings, env_info: dict, overlay: Overlay, maps: dict[str, dict],
             outcomes: dict[str, Outcome], carried: Carried | None = None) -> None:  # fmt: skip
    """Record a run on base + ``overlay``: per path its measured tests' outcomes and scopes, with the
    outcomes it carried (and their scopes: they executed nothing that changed)."""
    if not settings.use_cache:
        return
    common, digest = _common(settings, env_info), overlay_digest(overlay)
    cache.put_json(TREE, _key(common, "tree", digest), {"files": _encode(overlay)})
    known = {**{t: vars(o) for t, o in (carried.outcomes if carried else {}).items()},
             **{t: vars(o) for t, o in outcomes.items()}}  # fmt: skip
    for path, value in maps.items():
        mine = measured_only(value)
        if carried is not None and path in carried.maps:
            mine = merge(mine, carried.maps[path])
        record = {**mine, "format": FORMAT, "tree": digest,
                  "outcomes": {t: known[t] for t in mine["tests"] if t in known}}  # fmt: skip
        cache.put_json(RECORD, _key(common, "record", path, digest), record)
        index_key = _key(common, "index", path)
        trees = (cache.get_json(INDEX, index_key) or {}).get("trees", [])
        trees = [d for d in trees if isinstance(d, str) and d != digest][-(KEEP - 1) :] + [digest]
        cache.put_json(INDEX, index_key, {"trees": trees})


def between(base_read: Callable[[str], bytes | None], old: Overlay, new: Overlay) -> dict[str, set[str]]:
    """file -> the scopes (of the ``old`` tree's file) that differ between base + ``old`` and base +
    ``new`` (``affected.scopes_of_change``: {EVERYTHING} where the map cannot speak for a change)."""
    out: dict[str, set[str]] = {}

    def read(tree: Overlay, path: str) -> bytes | None:
        return tree[path] if path in tree else base_read(path)

    def exists(path: str) -> bool:
        return read(old, path) is not None or read(new, path) is not None

    for path in sorted(set(old) | set(new)):
        before, after = read(old, path), read(new, path)
        if before != after:
            out[path] = scopes_of_change(path, before, after, exists)
    return out


def _valid(record: object, digest: str) -> bool:
    return (isinstance(record, dict) and record.get("format") == FORMAT and record.get("tree") == digest
            and isinstance(record.get("tests"), list) and isinstance(record.get("files"), dict)
            and isinstance(record.get("outcomes"), dict))  # fmt: skip


def carry(settings: TestSettings, env_info: dict, overlay: Overlay, paths: list[str],
          base_read: Callable[[str], bytes | None], exclude: set[str] = frozenset(),
          wanted: Callable[[str], bool] | None = None) -> Carried:  # fmt: skip
    """The recorded outcomes a run of ``paths`` on base + ``overlay`` may keep: per path, from the
    recorded tree that leaves most tests unaffected (``exclude``: tests not to carry; ``wanted``:
    only the tests it accepts)."""
    out = Carried()
    if not settings.use_cache:
        return out
    common = _common(settings, env_info)
    for path in paths:
        best: tuple[int, dict, str, dict] | None = None
        for digest in reversed((cache.get_json(INDEX, _key(common, "index", path)) or {}).get("trees", [])):
            record = cache.get_json(RECORD, _key(common, "record", path, digest))
            tree = cache.get_json(TREE, _key(common, "tree", digest))
            if not _valid(record, digest) or not isinstance(tree, dict) or "files" not in tree:
                continue
            delta = between(base_read, _decode(tree["files"]), overlay)
            free = set(split({path: record}, delta).unaffected) if delta else set(record["tests"])
            keep = [i for i, t in enumerate(record["tests"]) if t in free and t in record["outcomes"]
                    and t not in exclude and (wanted is None or wanted(t))]  # fmt: skip
            if best is None or len(keep) > best[0]:
                best = (len(keep), record, digest, {"keep": keep, "changed": sorted(delta)})
        if best is None or not best[0]:
            continue
        _, record, digest, what = best
        for i in what["keep"]:
            test = record["tests"][i]
            out.outcomes[test] = Outcome(**record["outcomes"][test])
        out.maps[path] = _subset(record, what["keep"])
        out.sources[path] = {"tree": digest[:12], "carried": best[0], "changed": what["changed"]}
    return out


def base_side(settings: TestSettings, env_info: dict, pre: Overlay, selection: list[str],
              ids: set[str]) -> tuple[dict[str, Outcome], dict[str, dict]]:  # fmt: skip
    """The base side's carried outcomes of the demanded ``ids`` on base + ``pre``, and where from."""
    got = carry(settings, env_info, pre, selection, base_reader(settings.base_root), wanted=ids.__contains__)
    return got.outcomes, got.sources
