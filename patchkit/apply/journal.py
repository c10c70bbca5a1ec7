"""All-or-nothing file replacement with a write-ahead journal that survives kill -9.

Protocol: back up old bytes and stage new bytes under ``<state>/txn/``, fsync; write
``<state>/journal.json`` (status "pending"), fsync; ``os.replace`` each file; mark the journal
"committed"; remove ``txn/`` and the journal. ``recover`` rolls a pending journal back (every file
to its old bytes, or absent) and finishes a committed one. Both are idempotent, so a crash during
recovery is recovered by the next run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from patchkit.errors import UserError

JOURNAL_NAME = "journal.json"
TXN_DIR = "txn"

# Tests set this to raise at a named step ("staged", "journal", "replace:N", "before-commit").
fault_hook: Callable[[str], None] | None = None


@dataclass
class FileChange:
    path: Path  # absolute, already checked to stay inside the target
    old: bytes | None  # None: did not exist
    new: bytes | None  # None: remove
    old_mode: int | None = None
    new_mode: int | None = None


def sha256(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def _step(name: str) -> None:
    if fault_hook is not None:
        fault_hook(name)
    if os.environ.get("PATCHKIT_PAUSE_AT") == name:  # lets a test kill -9 us at an exact step
        if marker := os.environ.get("PATCHKIT_PAUSE_FILE"):
            Path(marker).write_text(str(os.getpid()))
        time.sleep(float(os.environ.get("PATCHKIT_PAUSE_SECONDS", "60")))


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durable(path: Path, data: bytes, mode: int | None = None) -> None:
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        if mode is not None:
            os.fchmod(handle.fileno(), mode & 0o7777)
        os.fsync(handle.fileno())


def _write_journal(state_dir: Path, record: dict) -> None:
    tmp = state_dir / (JOURNAL_NAME + ".tmp")
    _write_durable(tmp, (json.dumps(record, indent=1) + "\n").encode())
    os.replace(tmp, state_dir / JOURNAL_NAME)
    _fsync_dir(state_dir)


def _missing_dirs(path: Path) -> list[Path]:
    missing = []
    for parent in path.parents:
        if parent.exists():
            break
        missing.append(parent)
    return list(reversed(missing))  # outermost first


def commit(state_dir: Path, changes: list[FileChange]) -> None:
    """Replace every file of ``changes`` or, if interrupted, leave a journal ``recover`` undoes.

    An OSError on the way (full disk, read-only or immutable file) rolls back what was done and
    becomes a UserError: the files are as they were before the call.
    """
    txn = state_dir / TXN_DIR
    shutil.rmtree(txn, ignore_errors=True)  # leftovers without a journal were never started
    try:
        entries, created = _stage(txn, changes)
    except OSError as exc:
        shutil.rmtree(txn, ignore_errors=True)
        (state_dir / (JOURNAL_NAME + ".tmp")).unlink(missing_ok=True)
        raise UserError(f"cannot stage the new files in {txn}: {_reason(exc)}; nothing was changed") from None
    _step("staged")
    record = {"status": "pending", "pid": os.getpid(), "files": entries, "created_dirs": created}
    try:
        _write_journal(state_dir, record)
        _step("journal")
        for index, entry in enumerate(entries):
            path = Path(entry["path"])
            if entry["staged"]:
                path.parent.mkdir(parents=True, exist_ok=True)
                os.replace(entry["staged"], path)
            elif path.exists() or path.is_symlink():
                path.unlink()
            _fsync_dir(path.parent)
            _step(f"replace:{index + 1}")
        _step("before-commit")
        _write_journal(state_dir, {**record, "status": "committed"})
    except OSError as exc:
        where = getattr(exc, "filename", None) or txn
        (state_dir / (JOURNAL_NAME + ".tmp")).unlink(missing_ok=True)
        recover(state_dir)
        raise UserError(f"cannot write {where}: {_reason(exc)}; rolled back, nothing was changed") from None
    _step("committed")
    _finish(state_dir)


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _stage(txn: Path, changes: list[FileChange]) -> tuple[list[dict], list[str]]:
    """Back up old bytes and stage new bytes under ``txn``, fsynced; the journal's file entries."""
    (txn / "old").mkdir(parents=True)
    (txn / "new").mkdir()
    entries, created = [], []
    for index, change in enumerate(changes):
        backup = staged = None
        if change.old is not None:
            backup = txn / "old" / str(index)
            _write_durable(backup, change.old)
        if change.new is not None:
            staged = txn / "new" / str(index)
            _write_durable(staged, change.new, change.new_mode or 0o644)
        created += [str(d) for d in _missing_dirs(change.path) if str(d) not in created]
        entries.append(
            {
                "path": str(change.path),
                "existed": change.old is not None,
                "old_sha256": sha256(change.old),
                "new_sha256": sha256(change.new),
                "old_mode": change.old_mode,
                "backup": str(backup) if backup else None,
                "staged": str(staged) if staged else None,
            }
        )
    _fsync_dir(txn / "old")
    _fsync_dir(txn / "new")
    return entries, created


def _finish(state_dir: Path) -> None:
    shutil.rmtree(state_dir / TXN_DIR, ignore_errors=True)
    (state_dir / JOURNAL_NAME).unlink(missing_ok=True)
    _fsync_dir(state_dir)


def pending(state_dir: Path) -> dict | None:
    path = state_dir / JOURNAL_NAME
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def recover(state_dir: Path) -> str | None:
    """Roll back an interrupted transaction (or finish a committed one); a line saying what was done."""
    record = pending(state_dir)
    if record is None:
        shutil.rmtree(state_dir / TXN_DIR, ignore_errors=True)
        return None
    if record["status"] == "committed":
        _finish(state_dir)
        return f"finished a committed transaction of pid {record.get('pid')} ({state_dir / JOURNAL_NAME})"
    restored = 0
    for entry in record["files"]:
        restored += _roll_back(entry)
    for directory in reversed(record.get("created_dirs", [])):
        try:
            os.rmdir(directory)
        except OSError:
            pass
    _finish(state_dir)
    return (
        f"rolled back an interrupted transaction of pid {record.get('pid')}: "
        f"{restored} of {len(record['files'])} file(s) restored to their prior state"
    )


def _roll_back(entry: dict) -> int:
    path = Path(entry["path"])
    current = path.read_bytes() if path.is_file() and not path.is_symlink() else None
    if not entry["existed"]:
        if current is None and not path.is_symlink():
            return 0
        path.unlink()
        return 1
    if sha256(current) == entry["old_sha256"]:
        return 0
    old = Path(entry["backup"]).read_bytes()
    if sha256(old) != entry["old_sha256"]:
        raise RuntimeError(f"journal backup {entry['backup']} is corrupt; cannot restore {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:  # renaming the backup into place needs no free space (a full disk is why we got here)
        if entry["old_mode"] is not None:
            os.chmod(entry["backup"], entry["old_mode"] & 0o7777)
        os.replace(entry["backup"], path)
    except OSError:  # another file system: copy it
        tmp = path.with_name(f".{path.name}.patchkit-restore")
        _write_durable(tmp, old, entry["old_mode"])
        os.replace(tmp, path)
    _fsync_dir(path.parent)
    return 1
