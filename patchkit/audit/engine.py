"""``patchkit audit``'s engine: load a series, run the gates per patch, decide verdicts.

Sharding (``--shard I/N``): with the tests gate, by test file across the whole audit
(``testplan``: balanced by recorded durations); a patch's other gates run on the shard its
0-based series index ``k`` belongs to, ``k % N + 1`` (every shard also runs its apply check, which
the tests gate needs), and say so on the others (``testshards.ELSEWHERE``); ``testshards`` merges
them. Without the tests gate, the patch at index ``k`` belongs to shard ``k % N + 1``. Either way
every shard is deterministic and shards 1..N cover the work once.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cache as memoised
from pathlib import Path
from typing import Any

from patchkit import cache, guide
from patchkit.audit import shardplan, testshards
from patchkit.audit.focus import focused_tests, patch_labels, patch_owner_lines, patch_reviewers
from patchkit.audit.gates import (
    GateContext,
    PatchUnderAudit,
    SeriesState,
    Trees,
    apply_files,
    not_applied,
)
from patchkit.audit.gates.apply import series_states
from patchkit.audit.gates.registry import GATES, REGISTRY
from patchkit.audit.model import AuditResult, GateResult, PatchAudit, ProgressEvent
from patchkit.audit.verdict import checked, decide_record, verdict_reasons, worst
from patchkit.base.tree import BaseTree
from patchkit.diff.hunks import HunkMismatch, render_diff
from patchkit.diff.model import FilePatch
from patchkit.diff.pairs import diff_sides
from patchkit.errors import UserError
from patchkit.series.files import load_entries, load_split_json
from patchkit.split.model import Domain
from patchkit.split.rules import Classifier
from patchkit.upstream.meta import UpstreamMeta, read_upstream
from patchkit.values import Pin

GATE_RESULT_FORMAT = 4  # bump when a cached GateResult's shape or meaning changes (4: evidence, cause)


# --------------------------------------------------------------------------- pure logic


def parse_shard(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match or not 1 <= int(match.group(1)) <= int(match.group(2)):
        raise UserError(f"--shard {text!r}: expected I/N with 1 <= I <= N, e.g. 2/4")
    return int(match.group(1)), int(match.group(2))


def in_shard(index: int, shard: tuple[int, int] | None) -> bool:
    return shard is None or index % shard[1] == shard[0] - 1


def merge_results(results: list[AuditResult]) -> AuditResult:
    """One result from the shards of one series audit (same base); patches in series order."""
    if not results:
        raise UserError("no audit result to merge")
    hashes = {r.base.tree_hash for r in results}
    if len(hashes) > 1:
        raise UserError(f"audit results are against different bases: {sorted(map(str, hashes))}")
    if testshards.is_test_sharded(results):  # shards by test file: each patch in every shard
        return testshards.merge(results, _now())
    seen: dict[str, PatchAudit] = {}
    for result in results:
        for pa in result.patches:
            if pa.patch in seen:
                raise UserError(f"patch {pa.patch} appears in more than one audit result")
            seen[pa.patch] = pa
    order = results[0].environment.get("series_patches") or sorted(seen)
    patches = sorted(seen.values(), key=lambda pa: order.index(pa.patch) if pa.patch in order else len(order))
    merged = AuditResult(
        series_dir=results[0].series_dir,
        base=results[0].base,
        patches=patches,
        verdict=worst([pa.verdict for pa in patches]),
        environment={**results[0].environment, "merged_shards": [r.shard for r in results]},
        shard=None,
        created=_now(),
    )
    decide_record(merged)  # shards are records: the same decision as a fresh audit
    return merged


def gate_key(gate: str, patch: PatchUnderAudit, earlier: list[PatchUnderAudit], base_hash: str,
             config: object) -> str:  # fmt: skip
    parts = [gate, GATE_RESULT_FORMAT, patch.text, [p.text for p in earlier], base_hash, config]
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


# --------------------------------------------------------------------------- loading


def load_patches(series_dir: Path, domains: list[Domain]) -> list[PatchUnderAudit]:
    """The series as the gates see it: split.json gives domains, source commits and needs.

    An overlay belongs to the patch of its domain (split.json's ``overlays``, else the same NNNN
    prefix); one whose patch is not in the series is audited as a patch of its own."""
    entries = load_entries(series_dir)
    series = load_split_json(series_dir)
    by_file = {sp.filename: sp for sp in series.patches} if series else {}
    by_overlay = {name: sp for sp in by_file.values() for name in sp.overlays}
    by_name = {d.name: d for d in domains}
    classifier = Classifier(domains)
    patches: list[PatchUnderAudit] = []
    owners: dict[str | None, PatchUnderAudit] = {}  # split.json file name, else NNNN prefix → patch
    for entry in entries:
        sp = by_file.get(entry.name) or by_overlay.get(entry.name)
        key = sp.filename if sp is not None else _number(entry.name)
        if entry.overlay is not None and key is not None and key in owners:
            owners[key].overlays.append(entry.overlay)
            owners[key].text += f"\noverlay {entry.name} {entry.sha256}"
            continue
        index = len(patches)
        files = [fp for p in entry.patches for fp in p.files]
        if sp is not None and series is not None:
            commits = [series.commits[i] for i in sp.source_commits if 0 <= i < len(series.commits)]
            domain_name, title = sp.domain, sp.title
            needs = [p.name for p in patches if p.domain in sp.depends_on]
            touched = [{a.file for a in series.assignments if i in a.commits} for i in sp.source_commits]
            commit_files = touched if any(touched) else None
        else:
            commits = [p.commit for p in entry.patches]
            paths = [entry.overlay.target] if entry.overlay else [fp.path for fp in files]
            domain_name = _domain_of(entry.name, paths, by_name, classifier)
            title = by_name[domain_name].title if domain_name in by_name else {"en": domain_name}
            needs = None
            commit_files = [{fp.path for fp in p.files} for p in entry.patches]
        templates = list(by_name[domain_name].tests) if domain_name in by_name else []
        templates += [t for t in (sp.tests if sp else []) if t not in templates]
        text = entry.text if entry.overlay is None else f"overlay {entry.name} {entry.sha256}"
        patches.append(PatchUnderAudit(entry.name, index, text, files, commits, domain_name, title,
                                       needs, templates, commit_files))  # fmt: skip
        if sp is not None:  # why each need (the semantic ones say which name), by patch name
            domains = {p.domain: p.name for p in patches}
            patches[-1].needs_why = {domains[d]: w for d, w in sp.needs_why.items() if d in domains}
        if entry.overlay is not None:
            patches[-1].overlays.append(entry.overlay)
        owners.setdefault(key, patches[-1])
    return patches


def _number(name: str) -> str | None:
    match = re.match(r"(\d{4})-", Path(name).name)
    return match.group(1) if match else None


def _domain_of(name: str, paths: list[str], by_name: dict[str, Domain], classifier: Classifier) -> str:
    match = re.fullmatch(r"\d{4}-(.+?)\.(patch|diff)", Path(name).name)
    if match and match.group(1) in by_name:
        return match.group(1)
    for path in paths:
        if verdict := classifier.path_domain(path):
            return verdict.domain
    return "other"


def overlay_diffs(base: BaseTree, patch: PatchUnderAudit, state: SeriesState) -> list[FilePatch]:
    """Each overlay of ``patch`` as a full diff from the file as the series leaves it at that point."""
    mid = dict(state.pre)
    try:
        apply_files(patch.files, base.read, mid)
    except (HunkMismatch, ValueError):
        return []
    pairs = []
    for owned in patch.overlays:
        before = mid[owned.target] if owned.target in mid else base.read(owned.target)
        mode = base.mode(owned.target) or "100644"
        pairs.append((owned.target, (before, mode if before is not None else None), (owned.content, mode)))
        mid[owned.target] = owned.content
    return diff_sides(pairs) if pairs else []


# --------------------------------------------------------------------------- running


@dataclass
class AuditOptions:
    gates: list[str]
    optional: list[str] = field(default_factory=list)  # gates whose could-not-run the project accepts
    jobs: int = 2
    use_cache: bool = True
    shard: tuple[int, int] | None = None
    settings: dict[str, Any] = field(default_factory=dict)  # per gate, e.g. {"tests": TestSettings}
    progress: Callable[[ProgressEvent], None] | None = None
    extra_environment: dict = field(default_factory=dict)


def run_audit(
    series_dir: Path, base: BaseTree, pin: Pin, domains: list[Domain], options: AuditOptions
) -> AuditResult:
    patches = load_patches(series_dir, domains)
    states = series_states(base, patches)
    for patch in patches:
        if patch.overlays:
            patch.overlay_files = overlay_diffs(base, patch, states[patch.index])
    base_hash = pin.tree_hash or ""
    by_tests = (
        options.shard is not None and "tests" in options.gates and options.settings.get("tests") is not None
    )
    chosen = [p for p in patches if by_tests or in_shard(p.index, options.shard)]
    meta = focus_patches(chosen, base)

    test_shards: dict = {}
    if by_tests:  # every runner computes the same plan from the series, the base and the durations
        tests = options.settings["tests"]
        settings, test_shards = shardplan.prepare(series_dir, base, patches, states, tests, options.shard)
        options = replace(options, settings={**options.settings, "tests": settings})
    numbers = {p.name: n for n, p in enumerate(chosen, 1)}

    def audit_one(patch: PatchUnderAudit) -> PatchAudit:
        def tell(kind: str, **data: Any) -> None:
            if options.progress:
                options.progress(ProgressEvent(kind, patch.name, numbers[patch.name], len(chosen), **data))

        here = not by_tests or in_shard(patch.index, options.shard)  # its other gates run on this shard
        pa = _audit_patch(patch, patches[: patch.index], states[patch.index], base, base_hash, options, tell,
                          here)  # fmt: skip
        _upstream_view(pa, patch, meta)  # before the lead: the patch's readers are the series lead's source
        unfinished = copy.deepcopy(pa.guide)  # finish and the words share its findings' dicts
        pa.guide = guide.finish(pa)  # the gates' findings (ruff F821, imports) and the lead paragraph
        if by_tests:  # the merge finishes it again from the gates of every shard (testshards)
            pa.guide[testshards.UNFINISHED] = unfinished
        tell("patch-done", status=pa.verdict)
        return pa

    order = chosen  # the longest recorded tests first: the last patch to start is a short one
    if "tests" in options.gates and options.jobs > 1 and options.settings.get("tests") is not None:
        order = shardplan.longest_first(series_dir, base, chosen, states, options.settings["tests"])
        order = shardplan.providers_first(order, patches, base, options.jobs)
    with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
        running = {p.name: pool.submit(audit_one, p) for p in order}
        audits = [running[p.name].result() for p in chosen]  # the record in series order
    env = {"python": sys.version.split()[0], "platform": sys.platform, **options.extra_environment,
           "series_patches": [p.name for p in patches], "upstream_missing": meta.missing,
           "optional_gates": list(options.optional)}  # fmt: skip
    if test_shards:
        env["test_shards"] = test_shards
    for name in options.gates:
        env.update(REGISTRY[name].environment(options.settings))
    shard = f"{options.shard[0]}/{options.shard[1]}" if options.shard else None
    result = AuditResult(str(series_dir), pin, audits, worst([a.verdict for a in audits]), env, shard, _now())
    result.guide = {"lead": guide.series_lead(audits)} if audits else {}
    return result


def focus_patches(patches: list[PatchUnderAudit], base: BaseTree) -> UpstreamMeta:
    """Each patch's focused tests from the base's upstream CI steps; the base's upstream metadata."""
    meta = read_upstream(base.root)
    imports: dict[str, list[str]] = {}  # of the base's test files, shared by every patch
    listed = memoised(_base_tests_under(base))
    for patch in patches:
        patch.focused = focused_tests(
            sorted(patch.touched), meta.steps, _tests_under(listed, patch), base.read, imports=imports
        )
    return meta


def _base_tests_under(base: BaseTree) -> Callable[[str], tuple[str, ...]]:
    """Test files below a CI step's target in the base."""

    def listing(target: str) -> tuple[str, ...]:
        try:
            root = base.resolve(target.rstrip("/"))
        except UserError:
            return ()
        if root.is_dir():
            return tuple(sorted(p.relative_to(base.root).as_posix() for p in root.rglob("test_*.py")))
        return (target,) if root.is_file() else ()

    return listing


def _tests_under(
    in_base: Callable[[str], tuple[str, ...]], patch: PatchUnderAudit
) -> Callable[[str], list[str]]:
    """Test files below a CI step's target in the base, and those the patch adds there."""
    added = sorted(fp.new_path for fp in patch.changed_files if fp.new_path and not fp.old_path)

    def listing(target: str) -> list[str]:
        found = list(in_base(target))
        prefix = target.rstrip("/") + "/"
        return found + [p for p in added if p.startswith(prefix) and p not in found]

    return listing


def _upstream_view(audit: PatchAudit, patch: PatchUnderAudit, meta: UpstreamMeta) -> None:
    paths = sorted(patch.touched)
    audit.labels = patch_labels(paths, meta.labels)
    audit.reviewers = patch_reviewers(paths, meta.owners)
    audit.owner_lines = patch_owner_lines(paths, meta.owners)
    audit.focused_tests = list(patch.focused)


def _audit_patch(patch: PatchUnderAudit, earlier: list[PatchUnderAudit], state: SeriesState, base: BaseTree,
                 base_hash: str, options: AuditOptions, tell: Callable[..., None],
                 here: bool = True) -> PatchAudit:  # fmt: skip
    """The patch's gates; ``here`` False (a test shard that is not the patch's): only the apply
    check and the tests gate run, the others say which shard runs them."""
    trees = Trees(base, state.pre, state.post)
    results: list[GateResult] = []
    needs: list[str] = patch.declared_needs or []
    applied = state.post is not None
    for gate in [REGISTRY[name] for name in GATES if name in options.gates]:
        ctx = GateContext(patch, earlier, state, trees, needs, options.settings, progress=tell)
        started = time.perf_counter()
        tell("gate-start", gate=gate.name)
        runs = here or gate.name in testshards.EVERY_SHARD
        if runs:
            depends = gate.keyed_by(ctx) if gate.keyed_by is not None else earlier
            key = gate_key(gate.name, patch, depends, base_hash, gate.cache_config(ctx))
        cached = cache.get_json("audit-gate", key) if options.use_cache and runs else None
        if not runs:
            result = testshards.elsewhere(gate.name, patch.index, options.shard or (1, 1))
        elif cached is not None:
            result = replace(GateResult.from_dict(cached), cached=True)
        elif gate.needs_applied and not applied:  # requested or not, the apply check failed
            result = not_applied(gate.name, state.error)
        else:
            result = gate.run(ctx)
            if options.use_cache and result.status != "skipped":
                cache.put_json("audit-gate", key, result.to_dict())
        result = checked(result)  # a cached or fresh "passed" without its witness does not count
        if "needs" in result.details:
            needs = result.details["needs"]
        results.append(result)
        tell("gate-done", gate=gate.name, status=result.status, seconds=time.perf_counter() - started)
    verdict, reasons = verdict_reasons(results, options.optional)
    audit = PatchAudit(
        patch=patch.name,
        domain=patch.domain,
        title=patch.title,
        gates=results,
        verdict=verdict,
        reasons=[],  # report/ renders them from reason_messages
        reason_messages=reasons,
        files=[{"path": fp.path, "added": fp.added, "removed": fp.removed} for fp in patch.changed_files],
        commits=patch.commits,
        depends_on=needs,
        diff=render_diff(patch.changed_files),
        guide=_guide(patch, earlier, trees, base_hash, options.use_cache),
    )
    return audit


def _guide(patch: PatchUnderAudit, earlier: list[PatchUnderAudit], trees: Trees, base_hash: str,
           use_cache: bool) -> dict:  # fmt: skip
    """The reviewer guide (messages, not words: report/ renders them), cached like a gate."""
    sources = sorted(Path(guide.__file__).parent.glob("*.py"))  # every module of the package
    version = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()
    key = gate_key("guide", patch, earlier, base_hash, version)
    if use_cache and (hit := cache.get_json("audit-guide", key)) is not None:
        return hit
    found = guide.review_guide(files=patch.changed_files, pre=trees.pre_read, post=trees.post_read,
                               commits=patch.commits, domain=patch.domain,
                               source_files=patch.commit_files)  # fmt: skip
    if use_cache:
        cache.put_json("audit-guide", key, found)
    return found


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()
