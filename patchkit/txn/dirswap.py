"""One change of a whole directory that survives kill -9: a staged directory swapped for the live
one in one ``renameat2(RENAME_EXCHANGE)``, with a write-ahead record and idempotent follow-ups.

    dirswap.change(state_dir, live, staged, record, forward, locks=[...])
    dirswap.recover(state_dir, forward)          # run first, under the lock, by the next command

``change``:

1. the record — the caller's fields, the live and staged dirs, the digest of each (old and new
   content), the lock files of other tools the follow-ups may leave behind — written and fsynced
   (``journal.write_json_durable``) before the first change;
2. one exchange of the two dirs (``transaction.exchange``), their parent fsynced: a reader sees the
   old directory or the new one, never a mix, never none;
3. ``forward(record)``: the caller's follow-up steps, each idempotent (recovery runs them again);
4. the old content (at the staged name since the swap) removed, then the record.

``recover``: no record, nothing to do. With one, the swap happened when the live dir holds the new
content (or, edited by someone since, when the staged name no longer holds it): the lock files
the record names were ours, left by a killed follow-up, and are removed; ``forward`` runs again.
Otherwise the staged dir is discarded and the live one was never touched. Both are idempotent:
a recovery killed part-way is recovered the same way.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from patchkit.errors import UserError
from patchkit.txn.journal import fsync_dir, step, write_json_durable
from patchkit.txn.transaction import exchange

RECORD = "dirswap.json"
KEYS = {"live", "staged", "old", "new", "locks"}
Forward = Callable[[dict], None]


def digest(path: Path) -> str | None:
    """sha256 over the relative names and bytes of a directory's regular files, links never
    followed; None when ``path`` is not a directory."""
    if path.is_symlink() or not path.is_dir():
        return None
    found = []
    for top, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(top, d))]
        found += [Path(top) / f for f in files if not os.path.islink(os.path.join(top, f))]
    total = hashlib.sha256()
    for item in sorted(found):
        if not item.is_file():
            continue
        total.update(str(item.relative_to(path)).encode("utf-8", "surrogateescape") + b"\0")
        total.update(hashlib.sha256(item.read_bytes()).digest())
    return total.hexdigest()


def pending(state_dir: Path) -> dict | None:
    """The record of a change a crash cut short, or None."""
    path = state_dir / RECORD
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_bytes())
    except ValueError:
        record = None
    if not isinstance(record, dict) or not KEYS <= set(record):  # written whole: not ours
        raise UserError(f"the transaction record {path} is unreadable; check the directory it was "
                        "changing, move the record away and run the command again", str(path))  # fmt: skip
    return record


def change(state_dir: Path, live: Path, staged: Path, record: dict, forward: Forward,
           locks: Iterable[Path] = ()) -> dict:  # fmt: skip
    """Put ``staged`` in the place of ``live`` and run ``forward``; the record it wrote."""
    full = {**record, "live": str(live), "staged": str(staged), "old": digest(live), "new": digest(staged),
            "locks": [str(p) for p in locks], "pid": os.getpid()}  # fmt: skip
    state_dir.mkdir(parents=True, exist_ok=True)
    write_json_durable(state_dir / RECORD, full)
    step("dirswap:recorded")
    try:
        done = exchange(staged, live)
    except OSError as exc:
        _discard(state_dir, full)
        raise UserError(f"cannot swap {staged} for {live}: {exc.strerror}; nothing changed") from None
    if not done:
        _discard(state_dir, full)
        raise UserError(f"this system cannot swap two directories in one step (renameat2): {live} "
                        "was not changed")  # fmt: skip
    fsync_dir(live.parent)
    step("dirswap:swapped")
    _finish(state_dir, full, forward)
    return full


def swapped(record: dict) -> bool:
    """Whether the record's swap happened (the live dir holds, or held, the new content)."""
    now = digest(Path(record["live"]))
    if now == record["new"]:
        return True
    if now == record["old"]:
        return False
    return digest(Path(record["staged"])) != record["new"]


def recover(state_dir: Path, forward: Forward) -> tuple[str, dict] | None:
    """("finished" | "discarded", the record) of a change a crash cut short; None when none was."""
    record = pending(state_dir)
    if record is None:
        return None
    if not swapped(record):
        _discard(state_dir, record)
        return "discarded", record
    for lock in record["locks"]:  # ours: the record says a follow-up of ours was writing
        Path(lock).unlink(missing_ok=True)
    _finish(state_dir, record, forward)
    return "finished", record


def _finish(state_dir: Path, record: dict, forward: Forward) -> None:
    forward(record)
    step("dirswap:forwarded")
    shutil.rmtree(record["staged"], ignore_errors=True)
    step("dirswap:cleaned")
    _end(state_dir)


def _discard(state_dir: Path, record: dict) -> None:
    shutil.rmtree(record["staged"], ignore_errors=True)
    _end(state_dir)


def _end(state_dir: Path) -> None:
    (state_dir / RECORD).unlink(missing_ok=True)
    fsync_dir(state_dir)
