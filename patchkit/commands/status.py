"""``patchkit status``: what is applied where, verified against the recorded hashes."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path

from patchkit import output
from patchkit.apply import plan as apply
from patchkit.apply import sitepackages
from patchkit.atomic import write_atomic
from patchkit.commands.apply import recover_note, resolve_target
from patchkit.errors import EXIT_FAILED, EXIT_OK
from patchkit.project import Project
from patchkit.txn.lock import target_lock


@dataclass
class Options:
    series_dir: Path | None = None  # compared with what is applied when given (no default: optional)
    target: str = "checkout"
    path: Path | None = None
    python: str | None = None
    site_packages: Path | None = None
    json_out: Path | None = None
    lock_timeout: float = 30


def run(project: Project, options: Options) -> int:
    series_dir, json_out = options.series_dir, options.json_out
    target = resolve_target(options.target, options.path, options.python, options.site_packages)
    output.info(f"target: {target.describe()}")
    output.detail(f"state dir: {target.state_dir}{'' if target.state_dir.exists() else ' (none yet)'}")
    # nothing ever applied here: read-only, and no state dir is created (a reversed target stays clean)
    applied_here = target.state_dir.exists()
    lock = (target_lock(target.state_dir, options.lock_timeout, target.describe()) if applied_here
            else contextlib.nullcontext())  # fmt: skip
    with lock:
        if target.state_dir.exists():
            recover_note(target)
        state = apply.load_state(target)
        report = {"command": "status", "target": target.to_dict(), "applied": state is not None}
        problems: list[str] = []
        if state is None:
            output.info("nothing applied")
        else:
            problems = apply.drift(target, state)
            skipped = state.get("skipped", {})
            partly = state.get("partly_applied", [])
            applied = [p["name"] for p in state["patches"] if p["name"] not in skipped or p["name"] in partly]
            since = f"from {state['series_dir']} at {state['applied_at']}"
            output.info(f"applied: {len(applied)} patch(es) {since}")
            for patch in state["patches"]:
                rels = skipped.get(patch["name"])
                whole = patch["name"] not in partly
                if rels is None:
                    output.info(f"  {patch['name']}")
                else:
                    how = "skipped" if whole else "applied; skipped in part"
                    outside = ", ".join(rels)
                    output.info(f"  {patch['name']} ({how}, not part of the installed package: {outside})")
            if series_dir is not None:
                problems += _compare_series(series_dir, state)
            report.update(series_dir=state["series_dir"], patches=state["patches"], files=state["files"],
                          skipped=skipped, applied_patches=applied)  # fmt: skip
            if target.dist is not None and target.dist.record.is_file():
                touched = set(state["files"])
                problems += [f"RECORD: {p}" for p in sitepackages.record_problems(
                    target.dist.dist_info, target.root, only=touched)]  # fmt: skip
        if target.dist is not None:
            problems += _installed_wheel(target.dist, series_dir, report, state)
        if series_dir is not None and state is None and "wheel" not in report:
            problems.append(_not_applied(series_dir, target.dist is not None))  # asked: it is not here
    report["problems"] = problems
    for problem in problems:
        output.error(f"drift: {problem}")
    for rel, sha in sorted(((state or {}).get("files") or {}).items()):
        output.detail(f"  {rel} sha256 {sha.get('post') or '(removed)'}")
    if state is not None and not problems:
        output.info(f"consistent: all {len(state['files'])} recorded file(s) match their applied sha256")
    if json_out is not None:
        write_atomic(json_out, json.dumps(report, indent=1) + "\n")
    return EXIT_FAILED if problems else EXIT_OK


def _compare_series(series_dir: Path, state: dict) -> list[str]:
    from patchkit.series.files import load_entries, load_overlays  # only with a series to compare

    identity = apply.series_identity(load_entries(series_dir), load_overlays(series_dir))
    if identity == state["patches"]:
        output.info(f"the applied series is {series_dir} (same patches, same sha256)")
        return []
    return [f"the applied series differs from {series_dir}"]


def _not_applied(series_dir: Path, installed: bool) -> str:
    from patchkit.report.i18n import default_lang, message_text
    from patchkit.values import Message

    key = "status.series-not-installed" if installed else "status.series-not-applied"
    return message_text(Message(key, {"series": str(series_dir)}), default_lang())


def _installed_wheel(dist, series_dir: Path | None, report: dict, state: dict | None) -> list[str]:  # noqa: ANN001
    """A distribution installed from a patchkit wheel: its provenance shown and checked."""
    from patchkit.wheels.installed import inspect, provenance_file

    if provenance_file(dist) is None:
        return []  # not installed from a patchkit wheel
    from patchkit.report.i18n import default_lang, message_text

    identity = None
    if series_dir is not None:
        from patchkit.series.files import load_entries, load_overlays

        identity = apply.series_identity(load_entries(series_dir), load_overlays(series_dir))
    applied_over = {rel: rec["pre"] for rel, rec in state["files"].items()} if state else None
    found = inspect(dist, identity, str(series_dir or ""), applied_over)
    lang = default_lang()
    for line in found.lines:
        output.info(message_text(line, lang))
    report["wheel"] = found.record
    return [message_text(p, lang) for p in found.problems]
