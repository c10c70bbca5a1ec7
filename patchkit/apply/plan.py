"""Transactional apply of a series (and overlays) to a source checkout or an installed ``vllm``.

Everything is computed in memory first (preimages checked against every file of every patch);
only then does ``journal.commit`` replace files, all or nothing. What is applied is recorded in
``<state>/state.json`` (itself written through the same journal); the old bytes of every changed
file are kept in ``<state>/base/<sha256>`` so ``--reverse`` restores them exactly.
"""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from patchkit import git
from patchkit.apply import journal, sitepackages
from patchkit.apply.journal import FileChange, sha256
from patchkit.apply.sitepackages import Distribution
from patchkit.diff.engine import State, apply_files
from patchkit.diff.hunks import HunkMismatch
from patchkit.errors import CheckFailed, UserError
from patchkit.series.files import SeriesEntry
from patchkit.series.overlays import Overlay, base_matches, mismatch

STATE_NAME = "state.json"
BASE_DIR = "base"
STATE_SCHEMA = 1


@dataclass
class Target:
    kind: str  # "checkout" | "site-packages"
    root: Path  # resolved; series paths are relative to it
    state_dir: Path
    dist: Distribution | None = None

    def describe(self) -> str:
        if self.dist is None:
            return f"checkout {self.root}"
        return f"site-packages {self.root} ({self.dist.name} {self.dist.version})"

    def to_dict(self) -> dict:
        out = {"kind": self.kind, "root": str(self.root), "state_dir": str(self.state_dir)}
        if self.dist is not None:
            out["dist"] = {"name": self.dist.name, "version": self.dist.version,
                           "dist_info": str(self.dist.dist_info)}  # fmt: skip
        return out


def checkout_target(path: Path) -> Target:
    root = path.expanduser().resolve()
    if not root.is_dir():
        raise UserError(f"{path}: no such directory")
    dotgit = root / ".git"
    if dotgit.is_dir():
        state_dir = dotgit / "patchkit"
    elif dotgit.is_file():  # a linked worktree: its git dir lives elsewhere
        state_dir = Path(git.output(["rev-parse", "--absolute-git-dir"], root).strip()) / "patchkit"
    else:
        state_dir = root / ".patchkit"
    return Target("checkout", root, state_dir)


def site_packages_target(python: str | None, site_packages: Path | None) -> Target:
    dist = sitepackages.locate(python, site_packages)
    return Target("site-packages", dist.location, dist.location / ".patchkit", dist)


# --------------------------------------------------------------------------- paths


def safe_path(target: Target, rel: str) -> Path:
    """``root/rel`` after refusing absolute paths, ``..``, symlinks leading out (each component
    checked with lstat), a symlink as the file itself, and patchkit's own state."""
    parts = PurePosixPath(rel).parts
    if not rel or rel.startswith("/") or "\\" in rel or ".." in parts or "." in rel.split("/"):
        raise UserError(f"path {rel!r} leaves the target root {target.root}")
    current = target.root
    for index, part in enumerate(parts):
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            break
        if stat.S_ISLNK(mode):
            if index == len(parts) - 1:
                raise UserError(f"path {rel!r} is a symlink in {target.root}; refusing to replace it")
            if not current.resolve().is_relative_to(target.root):
                raise UserError(f"path {rel!r} goes through a symlink leading out of {target.root}")
    full = target.root / rel
    for reserved in (target.state_dir, target.root / ".git"):
        if full.resolve().is_relative_to(reserved.resolve()):
            raise UserError(f"path {rel!r} is inside {reserved}, which patchkit will not patch")
    return full


def _read(path: Path) -> tuple[bytes | None, int | None]:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, None
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{path}: not a regular file")
    return path.read_bytes(), stat.S_IMODE(st.st_mode)


# --------------------------------------------------------------------------- planning


@dataclass
class Plan:
    """What applying would do: per file (old, new, old_mode, new_mode), plus notes and problems."""

    changes: dict[str, tuple[bytes | None, bytes | None, int | None, int | None]] = field(
        default_factory=dict
    )
    skipped: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # applied as git would, but worth a look


class _MemoryTree:
    def __init__(self, target: Target) -> None:
        self.target = target
        self.original: dict[str, tuple[bytes | None, int | None]] = {}
        self.files: dict[str, tuple[bytes | None, int | None]] = {}

    def get(self, rel: str) -> tuple[bytes | None, int | None]:
        if rel not in self.files:
            self.original[rel] = self.files[rel] = _read(safe_path(self.target, rel))
        return self.files[rel]

    def plan(self, skipped: list[str], problems: list[str], warnings: list[str]) -> Plan:
        changes = {}
        for rel, (new, new_mode) in self.files.items():
            old, old_mode = self.original[rel]
            if (old, old_mode) != (new, new_mode):
                changes[rel] = (old, new, old_mode, new_mode)
        return Plan(changes, skipped, problems, warnings)


def _mode(mode: str | None, default: int | None) -> int | None:
    return int(mode, 8) & 0o7777 if mode else default


def _installed(target: Target, rel: str) -> bool:
    return target.dist is None or PurePosixPath(rel).parts[0] in target.dist.top_level


def plan_series(target: Target, entries: list[SeriesEntry], overlays: list[Overlay],
                strict_index: bool = False) -> Plan:  # fmt: skip
    """Apply every patch and listed overlay in series order, then every unlisted overlay, in memory;
    preimages checked everywhere."""
    tree = _MemoryTree(target)
    skipped: list[str] = []
    problems: list[str] = []
    warnings: list[str] = []
    failed: set[str] = set()
    for entry in entries:
        if entry.overlay is not None:
            _apply_overlay(target, tree, entry.overlay, skipped, problems)
            continue
        for patch in entry.patches:
            files = []
            for fp in patch.files:
                paths = [p for p in (fp.old_path, fp.new_path) if p]
                if not all(_installed(target, p) for p in paths):
                    skipped += [p for p in paths if p not in skipped]
                elif not failed.intersection(paths):
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
    return tree.plan(skipped, problems, warnings)


def _apply_overlay(target: Target, tree: _MemoryTree, overlay: Overlay, skipped: list[str],
                   problems: list[str]) -> None:  # fmt: skip
    if not _installed(target, overlay.target):
        skipped.append(overlay.target)
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
        tree.files[rel] = (data, _mode(mode, 0o644) if data is not None else None)
    return None


# --------------------------------------------------------------------------- state


def load_state(target: Target) -> dict | None:
    path = target.state_dir / STATE_NAME
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text("utf-8"))
    except ValueError as exc:
        raise UserError(f"applied-state record is not JSON: {exc}", str(path)) from None


def series_identity(entries: list[SeriesEntry], overlays: list[Overlay]) -> list[dict]:
    return [{"name": e.name, "sha256": e.sha256} for e in entries] + [
        {"name": f"overlay:{o.name}", "sha256": o.sha256} for o in overlays
    ]


def drift(target: Target, state: dict) -> list[str]:
    """Files whose current bytes are not what the recorded apply left."""
    found = []
    for rel, rec in state["files"].items():
        current, _ = _read(target.root / rel)
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
    new = sitepackages.updated_record(old, "", rows, dist.cache_tag)
    return str(dist.record.relative_to(target.root)), old, new


# --------------------------------------------------------------------------- doing it


def commit_plan(target: Target, plan: Plan, state: dict) -> list[str]:
    """Write ``plan`` (plus RECORD and the new state, or its removal) through the journal;
    then byte-compile. Returns notes for the user."""
    changes = dict(plan.changes)
    if record := _record_change(target, plan):
        rel, old, new = record
        changes[rel] = (old, new, _read(target.root / rel)[1], _read(target.root / rel)[1])
    require_writable(target, changes)
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
        raise UserError(
            f"cannot keep the base bytes in {base}: {exc.strerror}; nothing was changed"
        ) from None
    file_changes = [
        FileChange(target.root / rel, old, new, om, nm) for rel, (old, new, om, nm) in changes.items()
    ]
    state = {**state, "files": _file_records(changes)}
    state_path = target.state_dir / STATE_NAME
    state_bytes = (json.dumps(state, indent=1) + "\n").encode()
    old_state = state_path.read_bytes() if state_path.is_file() else None
    file_changes.append(FileChange(state_path, old_state, state_bytes, 0o644, 0o644))
    journal.commit(target.state_dir, file_changes)
    return _after_commit(target, list(plan.changes))


def _file_records(changes: dict) -> dict:
    return {rel: {"pre": sha256(old), "post": sha256(new), "pre_mode": om, "post_mode": nm}
            for rel, (old, new, om, nm) in changes.items()}  # fmt: skip


def _after_commit(target: Target, rels: list[str]) -> list[str]:
    modules = [rel for rel in rels if rel.endswith(".py")]
    for rel in modules:
        sitepackages.drop_stale_pyc(target.root, rel)
    if target.dist is None or not modules:
        return []
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
    """Every recorded file back to its pre-apply bytes (kept in ``<state>/base/``)."""
    plan = Plan()
    if not force:
        plan.problems = drift(target, state)
    for rel, rec in state["files"].items():
        current, mode = _read(safe_path(target, rel))
        old = None
        if rec["pre"] is not None:
            kept = target.state_dir / BASE_DIR / rec["pre"]
            old = kept.read_bytes() if kept.is_file() else None
            if sha256(old) != rec["pre"]:
                plan.problems.append(f"{rel}: the kept base bytes {kept} are missing or corrupt")
                continue
        if (current, mode) != (old, rec.get("pre_mode")):
            plan.changes[rel] = (current, old, mode, rec.get("pre_mode"))
    return plan


def require_writable(target: Target, changes: dict) -> None:
    """Refuse, before anything is written, a change to a read-only file or inside a read-only
    directory (checked by mode bits too: root may write anywhere, but a read-only file is a no)."""
    for rel in changes:
        path = target.root / rel
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            parent = next(p for p in path.parents if p.exists())
            if not os.access(parent, os.W_OK):
                raise UserError(f"{rel}: directory {parent} is not writable; nothing was changed") from None
            continue
        if not mode & 0o222 or not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
            raise UserError(f"{rel}: read-only in {target.root}; nothing was changed")


def commit_reverse(target: Target, plan: Plan) -> list[str]:
    require_writable(target, plan.changes)
    changes = [
        FileChange(target.root / rel, old, new, om, nm) for rel, (old, new, om, nm) in plan.changes.items()
    ]
    state_path = target.state_dir / STATE_NAME
    changes.append(FileChange(state_path, state_path.read_bytes(), None, 0o644, None))
    journal.commit(target.state_dir, changes)
    notes = _after_commit(target, list(plan.changes))
    for kept in (target.state_dir / BASE_DIR).glob("*"):
        kept.unlink()
    return notes


def require_no_journal(target: Target) -> None:
    if journal.pending(target.state_dir) is not None:
        raise CheckFailed(f"an interrupted transaction is pending in {target.state_dir}; "
                          "run 'patchkit apply --recover' (any apply or status recovers it too)")  # fmt: skip
