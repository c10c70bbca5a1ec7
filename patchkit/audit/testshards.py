"""Merging test-level shards (``--shard I/N`` with the tests gate, ``testplan``): every shard ran
every patch's apply check and its own test files, and a patch's other gates ran on one shard (the
patch at series index ``k`` on shard ``k % N + 1``; the others say ``gate.other-shard``). The
merged record takes each other gate from the shard that ran it, decides each tests gate again from
the union of the shards' outcomes through the gate's own ``conclude``, and finishes each patch's
guide and the series lead from those gates as an unsharded audit does — the record an unsharded
audit writes, but for timings."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from patchkit import guide as guides
from patchkit.audit.gates.tests import conclude
from patchkit.audit.model import GUIDE_UNFINISHED, AuditResult, GateResult, PatchAudit
from patchkit.audit.verdict import decide_record, verdict_reasons, worst
from patchkit.errors import UserError
from patchkit.testrun.pytestrun import TestSettings
from patchkit.testrun.testplan import unpack
from patchkit.values import Message

OTHER_SHARD = "gate.tests.other-shard"  # this shard owns none of the patch's test files
ELSEWHERE = "gate.other-shard"  # this gate of the patch runs on another shard
EVERY_SHARD = ("apply", "tests")  # the gates every shard runs for every patch (tests: its own share)
UNFINISHED = GUIDE_UNFINISHED  # a shard's guide key: the patch's guide before the gates' findings


def gates_shard(index: int, count: int) -> int:
    """The shard that runs the gates (but apply and tests) of the patch at series index ``index``."""
    return index % count + 1


def elsewhere(gate: str, index: int, shard: tuple[int, int]) -> GateResult:
    """``gate`` of the patch at ``index`` is not run on this shard: the one that runs it, named."""
    i, n = shard
    where = {"shard": f"{i}/{n}", "runs_on": f"{gates_shard(index, n)}/{n}"}
    return GateResult(gate, "could-not-run", "", dict(where), message=Message(ELSEWHERE, where))


def is_test_sharded(results: list[AuditResult]) -> bool:
    return bool(results) and all(isinstance(r.environment.get("test_shards"), dict) for r in results)


def merge(results: list[AuditResult], created: str) -> AuditResult:
    """One record from the N test shards of one audit (same base, same plan, each shard once)."""
    plans = {r.environment["test_shards"].get("plan") for r in results}
    if len(plans) > 1:
        raise UserError(f"the shards were planned differently (plans {', '.join(sorted(map(str, plans)))}): "
                        "run every shard with the same series, base and test-durations.json")  # fmt: skip
    labels = [str(r.environment["test_shards"].get("shard")) for r in results]
    count = int(labels[0].split("/")[1])
    missing = [f"{i}/{count}" for i in range(1, count + 1) if f"{i}/{count}" not in labels]
    if missing or len(set(labels)) != len(labels):
        again = sorted({x for x in labels if labels.count(x) > 1})
        raise UserError(
            f"test shards: missing {', '.join(missing) or 'none'}; twice {', '.join(again) or 'none'}"
        )
    results = sorted(results, key=lambda r: int(str(r.environment["test_shards"]["shard"]).split("/")[0]))
    first = results[0]
    names = [pa.patch for pa in first.patches]
    if any([pa.patch for pa in r.patches] != names for r in results):
        raise UserError("test shards audited different patches: run every shard over the same series")
    listed = first.environment.get("optional_gates")
    optional = [g for g in listed if isinstance(g, str)] if isinstance(listed, list) else []
    patches = [_merge_patch([r.patches[k] for r in results], optional) for k in range(len(names))]
    info = {k: v for k, v in first.environment["test_shards"].items() if k not in ("shard", "mine")}
    environment = {**first.environment, "test_shards": info, "merged_shards": labels}
    lead = {"lead": guides.series_lead(patches)} if patches and _finished(results) else first.guide
    merged = AuditResult(first.series_dir, first.base, patches, worst([pa.verdict for pa in patches]),
                         environment, None, created, guide=lead)  # fmt: skip
    decide_record(merged)
    return merged


def _finished(results: list[AuditResult]) -> bool:
    """Whether every shard kept its patches' unfinished guides (so the merge finishes them)."""
    return all(UNFINISHED in pa.guide for r in results for pa in r.patches)


def _ran(parts: list[GateResult]) -> GateResult:
    """A gate from the shard that ran it (the first, if none says it ran elsewhere)."""
    return next((g for g in parts if g.message is None or g.message.key != ELSEWHERE), parts[0])


def _merge_patch(audits: list[PatchAudit], optional: list[str]) -> PatchAudit:
    first = audits[0]
    gates = [
        merge_tests([a.gates[k] for a in audits]) if g.gate == "tests" else _ran([a.gates[k] for a in audits])
        for k, g in enumerate(first.gates)
    ]
    verdict, reasons = verdict_reasons(gates, optional)  # words: patchkit report fills them
    if all(UNFINISHED in a.guide for a in audits):  # as the engine does: the gates' findings, the lead
        merged = replace(first, gates=gates, guide=dict(first.guide[UNFINISHED]), verdict=verdict, reasons=[],
                         reason_messages=reasons)  # fmt: skip
        merged.guide = guides.finish(merged)
        return merged
    guide = dict(first.guide)  # shards of an older patchkit: the first shard's guide, every finding
    findings = list(guide.get("findings", []))
    seen = {(f.get("kind"), f.get("file"), f.get("line")) for f in findings}
    for other in audits[1:]:  # a finding only a shard's tests saw (a removed test)
        for f in other.guide.get("findings", []):
            if (f.get("kind"), f.get("file"), f.get("line")) not in seen:
                seen.add((f.get("kind"), f.get("file"), f.get("line")))
                findings.append(f)
    guide["findings"] = findings
    return replace(first, gates=gates, guide=guide, verdict=verdict, reasons=[], reason_messages=reasons)


def merge_tests(parts: list[GateResult]) -> GateResult:
    """One patch's tests gate from its shards' parts."""
    mine = [p for p in parts if p.message is None or p.message.key != OTHER_SHARD]
    raw = [p.details.get("shard_part") for p in mine]
    if not mine:
        return replace(parts[0], details={k: v for k, v in parts[0].details.items() if k != "shard_part"})
    if any(not isinstance(r, dict) or r.get("patched") is None for r in raw):  # a part did not conclude
        worst_part = max(mine, key=lambda g: (g.status == "failed", g.status == "could-not-run"))
        return replace(worst_part, details={k: v for k, v in worst_part.details.items() if k != "shard_part"})
    base, patched, known = {}, {}, set()
    for r in raw:
        base.update(unpack(r["base"]))
        patched.update(unpack(r["patched"]))
        known |= set(r["known"])
    stats: dict = {}
    for p in mine:
        for k, v in p.details.get("base_on_demand", {}).items():
            stats[k] = round(stats.get(k, 0) + v, 3) if isinstance(v, int | float) else v
    confirmed: dict = {}  # the failures each shard ran again (testrun/confirm.py), summed
    for p in mine:
        for k, v in p.details.get("confirmed", {}).items():
            if isinstance(v, bool):
                confirmed[k] = confirmed.get(k, True) and v
            elif isinstance(v, int):
                confirmed[k] = confirmed.get(k, 0) + v
            else:
                confirmed.setdefault(k, v)
    selection = raw[0]["selection"]
    env_info = mine[0].details.get("environment", {})
    cached = sum(p.details.get("baseline_cached_paths", 0) for p in mine)
    details = {"selection": selection, "environment": env_info, "baseline_cached": cached == len(selection),
               "baseline_cached_paths": cached, "base_on_demand": stats,
               **({"confirmed": confirmed} if confirmed else {})}  # fmt: skip
    elsewhere = [SimpleNamespace(path=e["path"], accelerator=e["device"])
                 for e in mine[0].details.get("expected_could_not_run", [])]  # fmt: skip
    settings = TestSettings(python=str(env_info.get("interpreter", "")), base_root=Path("."), base_hash="")
    result = conclude(selection, elsewhere, env_info, base, patched, known, details, settings, 0.0)
    duration = sum(p.duration for p in mine)
    return replace(result, duration=duration, cached=all(p.cached for p in mine))
