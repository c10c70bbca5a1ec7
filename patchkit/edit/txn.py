"""Crash safety of the edit loop, in one small module (a shared transaction package can replace it).

A change is: a new series dir written beside the old one, a journal naming both and the new
commit, one ``renameat2(RENAME_EXCHANGE)`` swapping the two dirs (old or new, never a mix, never
missing), then the work tree's ref and index moved. The work tree's files are never written by
absorb/refresh/new/move, so the user's edits stay there whatever happens; ``recover`` (run first by
every edit command) finishes a change whose swap happened, and discards one whose swap did not."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from patchkit.atomic import write_atomic
from patchkit.errors import UserError
from patchkit.txn import transaction
from patchkit.txn.journal import fsync_dir

JOURNAL = "patchkit-edit.journal.json"


def exchange(a: Path, b: Path) -> None:
    """Swap two directories in one step (``patchkit.txn``'s renameat2); elsewhere a refusal, not a
    half swap."""
    try:
        swapped = transaction.exchange(a, b)
    except OSError as exc:
        raise UserError(f"cannot swap {a} and {b}: {exc.strerror}") from exc
    if not swapped:
        raise UserError("this system has no renameat2: the series dir cannot be swapped in one step")
    fsync_dir(a.parent)


def dir_digest(path: Path) -> str:
    """sha256 over the names and contents of a series dir's regular files (top level and overlays/)."""
    digest = hashlib.sha256()
    for item in sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink()):
        digest.update(str(item.relative_to(path)).encode() + b"\0")
        digest.update(hashlib.sha256(item.read_bytes()).digest())
    return digest.hexdigest()


def journal_path(gitdir: Path) -> Path:
    return gitdir / JOURNAL


def begin(gitdir: Path, record: dict) -> None:
    write_atomic(journal_path(gitdir), json.dumps(record, indent=1) + "\n")
    fsync_dir(gitdir)


def end(gitdir: Path) -> None:
    journal_path(gitdir).unlink(missing_ok=True)
    fsync_dir(gitdir)


def pending(gitdir: Path) -> dict | None:
    path = journal_path(gitdir)
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):  # written whole or not at all: a bad one is not ours
        raise UserError(f"the edit journal {path} is unreadable; move it away to go on") from None
    return record if isinstance(record, dict) else None


def commit_swap(series: Path, staged: Path) -> None:
    """Put ``staged`` in the place of ``series``; the old series ends at ``staged``'s name."""
    exchange(staged, series)


def discard(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def swapped(record: dict) -> bool:
    """Whether the journal's swap happened: the series dir now holds the new content."""
    series = Path(record["series"])
    return series.is_dir() and dir_digest(series) == record["new_digest"]
