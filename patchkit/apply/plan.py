"""Transactional apply of a series (and overlays) to a source checkout or an installed ``vllm``.

Everything is computed in memory first (preimages checked against every file of every patch);
only then does ``journal.commit`` replace files, all or nothing. What is applied is recorded in
``<state>/state.json`` (itself written through the same journal); the old bytes of every changed
file are kept in ``<state>/base/<sha256>`` so ``--reverse`` restores them exactly.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from patchkit.apply import paths
from patchkit.apply.target import Target, read_file, safe_path
from patchkit.apply.target import checkout_target as checkout_target
from patchkit.apply.target import site_packages_target as site_packages_target
from patchkit.diff.engine import State, apply_files
from patchkit.diff.hunks import HunkMismatch
from patchkit.errors import CheckFailed, UserError
from patchkit.series.overlays import Overlay, base_matches, mismatch
from patchkit.txn import journal
from patchkit.txn.journal import FileChange, sha256
from patchkit.txn.lock import remove_if_idle

if TYPE_CHECKING:  # the patch parser is loaded by whoever reads a series, not by status
    from patchkit.series.files import SeriesEntry

STATE_NAME = "state.json"
BASE_DIR = "base"
STATE_SCHEMA = 1


# --------------------------------------------------------------------------- planning


@dataclass
class Plan:
    """What applying would do: per file (old, new, old_mode, new_mode), plus notes and problems."""

    changes: dict[str, tuple[bytes | None, bytes | None, int | None, int | None]] = field(
        default_factory=dict
    )
    skipped: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    skipped_by_patch: dict[str, list[str]] = field(default_factory=dict)  # outside the package
    blocked: list[str] = field(default_factory=list)  # reverse: kept bytes missing
    partly_applied: list[str] = field(default_factory=list)  # patches skipped only in part
    warnings: list[str] = field(default_factory=list)  # applied as git would, but worth a look


class _MemoryTree:
    def __init__(self, target: Target) -> None:
        self.target = target
        self.original: dict[str, tuple[bytes | None, int | None]] = {}
        self.files: dict[str, tuple[bytes | None, int | None]] = {}

    def get(self, rel: str) -> tuple[bytes | None, int | None]:
        if rel not in self.files:
            self.original[rel] = self.files[rel] = read_file(safe_path(self.target, rel))
        return self.files[rel]

    def plan(self, skipped: list[str], problems: list[str]) -> Plan:
        changes = {}
        for rel, (new, new_mode) in self.files.items():
            old, old_mode = self.original[rel]
            if (old, old_mode) != (new, new_mode):
                changes[rel] = (old, new, old_mode, new_mode)
        return Plan(changes, skipped, problems)


def _installed(target: Target, rel: str, where: str | None = None) -> bool:
    """Part of what is installed; a path that could leave the target is refused, never skipped."""
    try:
        parts = paths.check_rel(target.root, rel).parts
    except UserError as exc:
        raise UserError(str(exc), where) from None
    return target.dist is None or parts[0] in target.dist.top_level


def plan_series(target: Target, entries: list[SeriesEntry], overlays: list[Overlay],
                strict_index: bool = False) -> Plan:  # fmt: skip
    """Apply every patch and listed overlay in series order, then every unlisted overlay, in memory,
    each commit's files through the shared engine; preimages checked everywhere."""
    tree = _MemoryTree(target)
    skipped: dict[str, list[str]] = {}
    problems: list[str] = []
    warnings: list[str] = []
    failed: set[str] = set()
    partly: set[str] = set()  # patches with a file inside the package
    for entry in entries:
        if entry.overlay is not None:
            _apply_overlay(target, tree, entry.overlay, skipped, problems)
            continue
        for patch in entry.patches:
            files = []
            for fp in patch.files:
                names = [p for p in (fp.old_path, fp.new_path) if p]
                inside = [_installed(target, p, str(entry.path)) for p in names]
                if not all(inside):
                    if any(inside):
                        raise UserError(f"{fp.old_path} -> {fp.new_path}: the patch moves a file between "
                                        "the installed package and outside it", str(entry.path))  # fmt: skip
                    listed = skipped.setdefault(entry.name, [])
                    listed[:] = list(dict.fromkeys([*listed, *names]))
                    continue
                partly.add(entry.name)
                if not failed.intersection(names):
                    files.append(fp)
            try:
                problem = _apply_one(tree, files, warnings, strict_index)
            except UserError as exc:
                raise UserError(str(exc), str(entry.path)) from None
            if problem:
                problems.append(f"{entry.name}: {problem}")
                failed.update(p for fp in files for p in (fp.old_path, fp.new_path) if p)
    for overlay in overlays:
        _apply_overlay(target, tree, overlay, skipped, problems)
    plan = tree.plan([p for ps in skipped.values() for p in ps], problems)
    plan.skipped = list(dict.fromkeys(plan.skipped))
    plan.skipped_by_patch = skipped
    plan.partly_applied = sorted(partly.intersection(skipped))
    plan.warnings = warnings
    return plan


def _apply_overlay(target: Target, tree: _MemoryTree, overlay: Overlay, skipped: dict[str, list[str]],
                   problems: list[str]) -> None:  # fmt: skip
    if not _installed(target, overlay.target, overlay.name):
        skipped.setdefault(f"overlay:{overlay.name}", []).append(overlay.target)
        return
    current, mode = tree.get(overlay.target)
    if not base_matches(overlay, current):
        problems.append(mismatch(overlay, current))
        return
    tree.files[overlay.target] = (overlay.content, mode or 0o644)


def _apply_one(tree: _MemoryTree, files: list, warnings: list[str], strict_index: bool) -> str | None:
    """One commit's files through the shared engine; the first reason it does not apply, if any."""

    def read(rel: str) -> State:
        data, mode = tree.get(rel)  # tree.get also checks the path is safe
        return data, (None if mode is None else "100755" if mode & 0o111 else "100644")

    try:
        outcome = apply_files(files, read, strict_index=strict_index)
    except (HunkMismatch, ValueError) as exc:
        return str(exc)
    warnings.extend(outcome.warnings)
    for rel, (data, mode) in outcome.files.items():
        tree.files[rel] = (data, paths.file_mode(mode, 0o644, rel) if data is not None else None)
    return None


# --------------------------------------------------------------------------- state


def load_state(target: Target) -> dict | None:
    """The applied-state record, or None. One that cannot be read is moved aside and reported."""
    path = target.state_dir / STATE_NAME
    if not path.is_file():
        return None
    try:
        state = json.loads(path.read_bytes())
        ok = isinstance(state["patches"], list) and all("post" in r for r in state["files"].values())
        ok = ok and isinstance(state["series_dir"], str)
    except (ValueError, KeyError, TypeError, AttributeError):
        ok = False
    if ok:
        return state
    aside = path.with_name(f"{STATE_NAME}.unreadable-{time.strftime('%Y%m%dT%H%M%S')}")
    os.replace(path, aside)
    raise CheckFailed(f"{path} is not an applied-state record patchkit can read; moved it to {aside.name} "
                      f"(the kept base bytes stay in {BASE_DIR}/): check the target's files "
                      "(e.g. git status), then run the command again")  # fmt: skip


def series_identity(entries: list[SeriesEntry], overlays: list[Overlay]) -> list[dict]:
    return [{"name": e.name, "sha256": e.sha256} for e in entries] + [
        {"name": f"overlay:{o.name}", "sha256": o.sha256} for o in overlays
    ]


def drift(target: Target, state: dict) -> list[str]:
    """Files whose current bytes are not what the recorded apply left (kept ``.pyc`` aside)."""
    found = []
    for rel, rec in state["files"].items():
        if rec.get("kind") == "pyc":
            continue
        try:
            current, _ = read_file(safe_path(target, rel))
        except UserError as exc:
            found.append(f"{rel}: {exc}")
            continue
        if sha256(current) != rec["post"]:
            now = sha256(current) or "absent"
            found.append(f"{rel}: changed since apply (recorded {rec['post'] or 'absent'}, now {now})")
    return found


def _record_change(target: Target, plan: Plan) -> tuple[str, bytes, bytes] | None:
    """The RECORD rewrite for a site-packages plan: (rel path, old bytes, new bytes)."""
    dist = target.dist
    if dist is None or not plan.changes or not dist.record.is_file():
        return None
    old = dist.record.read_bytes()
    rows = {rel: new for rel, (_, new, _, _) in plan.changes.items()}
    from patchkit.apply import sitepackages

    new = sitepackages.updated_record(old, "", rows, dist.cache_tag)
    return str(dist.record.relative_to(target.root)), old, new


def _compiled(target: Target, modules: list[str]) -> dict[str, tuple[bytes, int]]:
    """The ``__pycache__`` files of ``modules`` now on disk: rel -> (bytes, mode)."""
    found = {}
    for rel in modules:
        pycache = (target.root / rel).parent / "__pycache__"
        for pyc in sorted(pycache.glob(f"{PurePosixPath(rel).stem}.*.pyc")) if pycache.is_dir() else []:
            data, mode = read_file(pyc)
            if data is not None:
                found[str(pyc.relative_to(target.root))] = (data, mode)
    return found


# --------------------------------------------------------------------------- doing it


def commit_plan(target: Target, plan: Plan, state: dict) -> list[str]:
    """Write ``plan`` (plus RECORD, the removal of the modules' old ``.pyc`` — kept, so a reverse
    puts them back byte for byte — and the new state) through the journal; then byte-compile."""
    changes = dict(plan.changes)
    if record := _record_change(target, plan):
        rel, old, new = record
        changes[rel] = (old, new, read_file(target.root / rel)[1], read_file(target.root / rel)[1])
    modules = [rel for rel in plan.changes if rel.endswith(".py")]
    compiled = _compiled(target, modules)
    for rel, (data, mode) in compiled.items():
        changes[rel] = (data, None, mode, None)
    require_writable(target, changes)
    _keep_base_bytes(target, changes)
    records = _file_records(target, changes)
    for rel in compiled:
        records[rel]["kind"] = "pyc"
    created = {str(d.relative_to(target.root)) for rel in changes for d in _missing_dirs(target.root / rel)}
    state = {
        **state,
        "files": records,
        "skipped": plan.skipped_by_patch,
        "partly_applied": plan.partly_applied,
        "created_dirs": sorted(created),
    }
    _commit(target, changes, (json.dumps(state, indent=1) + "\n").encode())
    return _after_commit(target, modules)


def _missing_dirs(path: Path) -> list[Path]:
    return [p for p in path.parents if not os.path.lexists(p)]


def _keep_base_bytes(target: Target, changes: dict) -> None:
    base = target.state_dir / BASE_DIR
    try:
        base.mkdir(parents=True, exist_ok=True)
        for old, _, _, _ in changes.values():
            if old is not None and not (base / sha256(old)).is_file():
                tmp = base / f".{sha256(old)}.tmp"
                try:
                    tmp.write_bytes(old)
                    os.replace(tmp, base / sha256(old))
                finally:
                    tmp.unlink(missing_ok=True)
    except OSError as exc:
        reason = exc.strerror
        raise UserError(f"cannot keep the base bytes in {base}: {reason}; nothing was changed") from None


def _commit(target: Target, changes: dict, state_bytes: bytes | None) -> None:
    file_changes = [
        FileChange(target.root / rel, old, new, om, nm) for rel, (old, new, om, nm) in changes.items()
    ]
    state_path = target.state_dir / STATE_NAME
    old_state = state_path.read_bytes() if state_path.is_file() else None
    file_changes.append(FileChange(state_path, old_state, state_bytes, None, 0o644))
    journal.commit(target.state_dir, file_changes, target.root)


def _file_records(target: Target, changes: dict) -> dict:
    records = {}
    for rel, (old, new, om, nm) in changes.items():
        records[rel] = {"pre": sha256(old), "post": sha256(new), "pre_mode": om, "post_mode": nm}
        if old is not None:
            with contextlib.suppress(FileNotFoundError):  # gone meanwhile: the journal's re-check refuses it
                records[rel]["pre_mtime_ns"] = os.lstat(target.root / rel).st_mtime_ns
    return records


def _after_commit(target: Target, modules: list[str]) -> list[str]:
    if target.dist is None or not modules:
        return []
    from patchkit.apply import sitepackages

    note = sitepackages.byte_compile(target.root, modules, target.dist.python)
    return [note] if note else [f"byte-compiled {len(modules)} module(s) ({target.dist.cache_tag})"]


def new_state(target: Target, series_dir: Path, identity: list[dict]) -> dict:
    return {
        "schema": STATE_SCHEMA,
        "series_dir": str(series_dir.resolve()),
        "patches": identity,
        "target": target.to_dict(),
        "applied_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "files": {},
    }


def reverse_plan(target: Target, state: dict, force: bool) -> Plan:
    """Every recorded file back to its pre-apply bytes and mode (kept in ``<state>/base/``), the
    modules' ``.pyc`` included; ``.pyc`` the apply compiled and nobody had before are removed.
    ``problems``: files changed since apply (``force`` overrides); ``blocked``: kept bytes lost."""
    plan = Plan()
    for rel, rec in state["files"].items():
        current, mode = read_file(safe_path(target, rel))  # read once: what the journal re-checks
        if not force and rec.get("kind") != "pyc" and sha256(current) != rec["post"]:
            now = sha256(current) or "absent"
            plan.problems.append(
                f"{rel}: changed since apply (recorded {rec['post'] or 'absent'}, now {now})"
            )
            continue
        old = None
        if rec["pre"] is not None:
            kept = target.state_dir / BASE_DIR / rec["pre"]
            old = kept.read_bytes() if kept.is_file() else None
            if sha256(old) != rec["pre"]:
                plan.blocked.append(f"{rel}: its pre-apply bytes kept in {kept} are missing or corrupt")
                continue
        if (current, mode) != (old, rec.get("pre_mode")):
            plan.changes[rel] = (current, old, mode, rec.get("pre_mode"))
    modules = [rel for rel, rec in state["files"].items() if rel.endswith(".py") and rec.get("kind") != "pyc"]
    for rel, (data, mode) in _compiled(target, modules).items():
        if rel not in state["files"]:
            plan.changes[rel] = (data, None, mode, None)
    return plan


def require_writable(target: Target, changes: dict) -> None:
    """Refuse, before anything is written, a change to a read-only file or inside a read-only
    directory (checked by mode bits too: root may write anywhere, but a read-only file is a no)."""
    for rel in changes:
        path = target.root / rel
        try:
            mode = os.lstat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            parent = next(p for p in path.parents if p.exists())
            if not os.access(parent, os.W_OK):
                raise UserError(f"{rel}: directory {parent} is not writable; nothing was changed") from None
            continue
        if not mode & 0o222 or not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
            raise UserError(f"{rel}: read-only in {target.root}; nothing was changed")


def commit_reverse(target: Target, plan: Plan, state: dict) -> list[str]:
    """Write the reverse plan and remove the state; then put back modification times (so the
    restored ``.pyc`` stay valid), remove the directories the apply created and the kept bytes."""
    require_writable(target, plan.changes)
    _commit(target, plan.changes, None)
    for rel, rec in state["files"].items():
        if "pre_mtime_ns" in rec and (target.root / rel).is_file():
            when = rec["pre_mtime_ns"]
            with contextlib.suppress(OSError):
                os.utime(target.root / rel, ns=(when, when), follow_symlinks=False)
    for rel in sorted(state.get("created_dirs", []), key=lambda d: -d.count("/")):
        with contextlib.suppress(OSError):
            os.rmdir(target.root / paths.check_rel(target.root, rel))
    shutil.rmtree(target.state_dir / BASE_DIR, ignore_errors=True)
    return []


def require_no_journal(target: Target) -> None:
    if journal.pending(target.state_dir) is not None:
        raise CheckFailed(f"an interrupted transaction is pending in {target.state_dir}; "
                          "run 'patchkit apply --recover' (any apply or status recovers it too)")  # fmt: skip


def drop_if_unapplied(target: Target) -> None:
    """After a refused apply where nothing is applied, patchkit's state dir goes: no lock, no kept
    base bytes, nothing left in the target (an applied series' state is never touched)."""
    state = target.state_dir
    if (state / STATE_NAME).exists() or (state / journal.JOURNAL_NAME).exists():
        return
    shutil.rmtree(state / BASE_DIR, ignore_errors=True)
    remove_if_idle(state, keep=(BASE_DIR, journal.TXN_DIR))
