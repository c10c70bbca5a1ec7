"""How a finished rebase reaches ``--out``: one transaction (``patchkit.txn``) that writes the new
series and removes what the previous rebase there wrote, never a file patchkit did not write.

The result is staged whole in ``.rebase/result/`` and checked there; ``.rebase/before/`` keeps the
pre-images of the files the publish replaces (all of them patchkit's own, by the manifest); the
state says "publishing" with both images' hashes before the first change. A kill during the write
is rolled back by the journal; ``--continue`` writes again, ``--abort`` restores ``before/``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from patchkit.errors import UserError
from patchkit.rebase.state import state_dir
from patchkit.txn import journal
from patchkit.txn.transaction import Transaction, read_nofollow

MANIFEST = ".patchkit-rebase.json"  # what the last rebase wrote into --out, with each file's hash
RESULT, BEFORE, TXN = "result", "before", "publish"


def _sha(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def manifest(out: Path) -> dict[str, str]:
    """name → sha256 of the files the last rebase wrote here (empty when unknown or unreadable)."""
    try:
        data, _ = read_nofollow(out / MANIFEST)
        files = json.loads(data or b"{}").get("files", {})
    except (OSError, ValueError, AttributeError, RecursionError):
        return {}
    if not isinstance(files, dict):
        return {}
    return {k: v for k, v in files.items() if isinstance(k, str) and "/" not in k and k not in ("", ".", "..")
            and isinstance(v, str)}  # fmt: skip


def foreign(out: Path, names: list[str]) -> str | None:
    """The first of ``names`` present in OUT that patchkit did not write (or that changed since)."""
    ours = manifest(out)
    for name in [*names, MANIFEST]:
        path = out / name
        if not os.path.lexists(path):
            continue
        try:
            data, _ = read_nofollow(path)
        except OSError:
            return name
        if name == MANIFEST:
            continue
        if ours.get(name) != _sha(data):
            return name
    return None


def refuse_foreign(out: Path, names: list[str]) -> None:
    name = foreign(out, names)
    if name is not None:
        raise UserError(f"--out holds {name}, which patchkit did not write (or which changed since): "
                        "give a new or empty directory, or move it away",
                        str(out / name))  # fmt: skip


def stage(out: Path, files: dict[str, bytes]) -> Path:
    """Write the whole result into ``.rebase/result/`` (replacing an earlier attempt)."""
    result = state_dir(out) / RESULT
    shutil.rmtree(result, ignore_errors=True)
    result.mkdir()
    for name, data in files.items():
        (result / name).write_bytes(data)
    return result


def plan(out: Path) -> dict:
    """For each name the publish touches: its pre-image hash and the new one (None: removed).
    Pre-images are copied to ``.rebase/before/`` (the abort's source)."""
    result = state_dir(out) / RESULT
    new = {p.name: p.read_bytes() for p in sorted(result.iterdir())}
    names = sorted(new)
    refuse_foreign(out, names)
    new[MANIFEST] = (json.dumps({"written_by": "patchkit rebase", "files": {n: _sha(new[n]) for n in names}},
                                indent=1) + "\n").encode()  # fmt: skip
    before = state_dir(out) / BEFORE
    shutil.rmtree(before, ignore_errors=True)
    before.mkdir()
    stale = [n for n in manifest(out) if n not in new and os.path.lexists(out / n) and not foreign(out, [n])]
    entries = {}
    for name in [*new, *stale]:
        old, _ = read_nofollow(out / name)
        if old is not None:
            (before / name).write_bytes(old)
        entries[name] = {"old": _sha(old), "new": _sha(new.get(name))}
    (result / MANIFEST).write_bytes(new[MANIFEST])
    for directory in (result, before):
        journal.fsync_dir(directory)
    return entries


def _commit(out: Path, wanted: dict[str, bytes | None]) -> None:
    txn_dir = state_dir(out) / TXN
    with Transaction(txn_dir, out) as txn:
        for name, data in wanted.items():
            txn.remove(out / name) if data is None else txn.write(out / name, data)


def recover(out: Path) -> None:
    """Roll back a publish (or an abort's restore) killed part-way."""
    txn_dir = state_dir(out) / TXN
    if txn_dir.is_dir():
        journal.recover(txn_dir)


def publish(out: Path, entries: dict) -> None:
    recover(out)
    result = state_dir(out) / RESULT
    _commit(out, {n: (result / n).read_bytes() if e["new"] else None for n, e in entries.items()})


def published(out: Path, entries: dict) -> bool:
    """Whether OUT holds every new image of the plan (the publish went through)."""
    for name, entry in entries.items():
        try:
            now = _sha(read_nofollow(out / name)[0])
        except OSError:
            return False
        if now != entry["new"]:
            return False
    return True


def restore(out: Path, entries: dict) -> list[str]:
    """Put back the pre-images of every file that holds the publish's new image; a file holding
    neither image is someone's edit: kept, and named. Idempotent; a kill is rolled back."""
    recover(out)
    before = state_dir(out) / BEFORE
    wanted: dict[str, bytes | None] = {}
    kept = []
    for name, entry in entries.items():
        try:
            now = _sha(read_nofollow(out / name)[0])
        except OSError:
            kept.append(name)
            continue
        if now == entry["old"]:
            continue
        if now != entry["new"]:
            kept.append(name)
            continue
        wanted[name] = (before / name).read_bytes() if entry["old"] else None
        if wanted[name] is not None and _sha(wanted[name]) != entry["old"]:
            raise UserError(f"the backup of {name} is damaged; it was kept as is", str(before / name))
    if wanted:
        _commit(out, wanted)
    return kept
