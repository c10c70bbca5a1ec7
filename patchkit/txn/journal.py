"""All-or-nothing file replacement with a write-ahead journal that survives kill -9.

Protocol: back up old bytes and stage new bytes under ``<state>/txn/``, fsync; write
``<state>/journal.json`` (status "pending": per file the pre-image hash and mode and the
post-image hash and mode), fsync; per file, re-check the pre-image (opened without following
links, parent directories walked without following links) and ``os.replace`` it; mark the journal
"committed"; remove ``txn/`` and the journal. ``recover`` rolls a pending journal back — a file is
restored only while it still holds patchkit's post-image; anything else is someone's edit and is
kept and named — and finishes a committed one. Both are idempotent.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.errors import CheckFailed, UserError
from patchkit.txn.nofollow import ChangedUnderUs, current_state, open_parent

JOURNAL_NAME = "journal.json"
TXN_DIR = "txn"
PERMISSIONS = 0o777  # setuid, setgid and sticky are never set (as git)

# Tests set this to raise at a named step ("staged", "journal", "replace:N", "before-commit",
# "committed", and in recovery "restore:N").
fault_hook: Callable[[str], None] | None = None


@dataclass
class FileChange:
    path: Path  # absolute, already checked to stay inside the target
    old: bytes | None  # None: did not exist
    new: bytes | None  # None: remove
    old_mode: int | None = None  # None: not checked (patchkit's own files)
    new_mode: int | None = None


@dataclass
class Recovery:
    note: str
    kept: list[str] = field(default_factory=list)  # files someone changed since the crash


def sha256(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def step(name: str) -> None:
    """A named point of a writing command: tests raise there (``fault_hook``) or pause to kill -9."""
    if fault_hook is not None:
        fault_hook(name)
    if os.environ.get("PATCHKIT_PAUSE_AT") == name:  # lets a test kill -9 us at an exact step
        if marker := os.environ.get("PATCHKIT_PAUSE_FILE"):
            Path(marker).write_text(str(os.getpid()))
        time.sleep(float(os.environ.get("PATCHKIT_PAUSE_SECONDS", "60")))


def fsync_dir(path: Path) -> None:
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
            os.fchmod(handle.fileno(), mode)
        os.fsync(handle.fileno())


def _write_journal(state_dir: Path, record: dict) -> None:
    tmp = state_dir / (JOURNAL_NAME + ".tmp")
    try:
        _write_durable(tmp, (json.dumps(record, indent=1) + "\n").encode())
        os.replace(tmp, state_dir / JOURNAL_NAME)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(state_dir)


def _missing_dirs(path: Path) -> list[Path]:
    missing = []
    for parent in path.parents:
        if os.path.lexists(parent):
            break
        missing.append(parent)
    return list(reversed(missing))  # outermost first


def _holds(now: tuple | str, sha: str | None, mode: int | None) -> bool:
    if isinstance(now, str):
        return False
    return now[0] == sha and (sha is None or mode is None or now[1] == mode)


# --------------------------------------------------------------------------- commit


def commit(state_dir: Path, changes: list[FileChange], root: Path | None = None) -> None:
    """Replace every file of ``changes`` or, if interrupted, leave a journal ``recover`` undoes.

    Each file is checked against its pre-image immediately before it is replaced; a file someone
    changed meanwhile aborts the transaction (CheckFailed), rolled back. An OSError on the way
    (full disk, read-only or immutable file) is rolled back too and becomes a UserError.
    """
    txn = state_dir / TXN_DIR
    shutil.rmtree(txn, ignore_errors=True)  # leftovers without a journal were never started
    try:
        entries, created = _stage(txn, changes)
    except OSError as exc:
        shutil.rmtree(txn, ignore_errors=True)
        raise UserError(f"cannot stage the new files in {txn}: {_reason(exc)}; nothing was changed") from None
    step("staged")
    record = {"status": "pending", "pid": os.getpid(), "root": str(root) if root else None,
              "files": entries, "created_dirs": created}  # fmt: skip
    try:
        _write_journal(state_dir, record)
        step("journal")
        for index, entry in enumerate(entries):
            _replace(Path(entry["path"]), entry, root)
            step(f"replace:{index + 1}")
        step("before-commit")
        _write_journal(state_dir, {**record, "status": "committed"})
    except ChangedUnderUs as exc:
        recover(state_dir)
        raise CheckFailed(f"{exc}; rolled back, nothing was changed") from None
    except OSError as exc:
        where = getattr(exc, "filename", None) or txn
        recover(state_dir)
        raise UserError(f"cannot write {where}: {_reason(exc)}; rolled back, nothing was changed") from None
    step("committed")
    _finish(state_dir)


def aside_name(name: str) -> str:
    """Where a file waits, renamed away from its name, while patchkit checks and replaces it."""
    return f".patchkit-{hashlib.sha256(os.fsencode(name)).hexdigest()[:16]}.old"


def _replace(path: Path, entry: dict, root: Path | None) -> None:
    """Move the old file aside (nobody can open it by name now), check it is the preimage, link
    the new one in (never over a file someone created meanwhile), check the old one again (a writer
    that held it open), then drop it. Any mismatch puts the old file back: ChangedUnderUs."""
    dirfd = open_parent(path, root, create=entry["staged"] is not None)
    name, aside = path.name, aside_name(path.name)
    try:
        if entry["existed"]:
            try:
                os.rename(name, aside, src_dir_fd=dirfd, dst_dir_fd=dirfd)
            except FileNotFoundError:
                raise ChangedUnderUs(
                    f"{path} changed while patchkit was writing (absent, not the preimage)"
                ) from None
        _expect(path, entry, dirfd, aside if entry["existed"] else name)
        if entry["staged"]:
            try:
                os.link(entry["staged"], name, dst_dir_fd=dirfd, follow_symlinks=False)
            except FileExistsError:
                _put_back(dirfd, aside, name) if entry["existed"] else None
                raise ChangedUnderUs(
                    f"{path} was created by someone else while patchkit was writing"
                ) from None
            os.unlink(entry["staged"])
        if entry["existed"]:
            try:
                _expect(path, entry, dirfd, aside)
            except ChangedUnderUs:
                if entry["staged"]:
                    os.unlink(name, dir_fd=dirfd)
                raise
            os.unlink(aside, dir_fd=dirfd)
        os.fsync(dirfd)
    finally:
        os.close(dirfd)


def _expect(path: Path, entry: dict, dirfd: int, name: str) -> None:
    now = current_state(dirfd, name)
    if _holds(now, entry["old_sha256"], entry["old_mode"]):
        return
    if name != path.name:
        _put_back(dirfd, name, path.name)
    said = now if isinstance(now, str) else "absent" if now[0] is None else "different bytes or mode"
    raise ChangedUnderUs(f"{path} changed while patchkit was writing ({said}, not the preimage)")


def _put_back(dirfd: int, aside: str, name: str) -> None:
    """The file moved aside back under its name — unless someone created that name meanwhile."""
    try:
        os.link(aside, name, src_dir_fd=dirfd, dst_dir_fd=dirfd, follow_symlinks=False)
    except FileExistsError:
        return  # both are kept: the new file under the name, the old one as ``aside``
    os.unlink(aside, dir_fd=dirfd)


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _stage(txn: Path, changes: list[FileChange]) -> tuple[list[dict], list[str]]:
    """Back up old bytes and stage new bytes under ``txn``, fsynced; the journal's file entries."""
    (txn / "old").mkdir(parents=True)
    (txn / "new").mkdir()
    entries, created = [], []
    for index, change in enumerate(changes):
        backup = staged = None
        new_mode = None if change.new is None else (change.new_mode or 0o644) & PERMISSIONS
        if change.old is not None:
            backup = txn / "old" / str(index)
            _write_durable(backup, change.old)
        if change.new is not None:
            staged = txn / "new" / str(index)
            _write_durable(staged, change.new, new_mode)
        created += [str(d) for d in _missing_dirs(change.path) if str(d) not in created]
        entries.append(
            {
                "path": str(change.path),
                "existed": change.old is not None,
                "old_sha256": sha256(change.old),
                "old_mode": change.old_mode,
                "new_sha256": sha256(change.new),
                "new_mode": new_mode,
                "backup": str(backup) if backup else None,
                "staged": str(staged) if staged else None,
            }
        )
    fsync_dir(txn / "old")
    fsync_dir(txn / "new")
    return entries, created


def _finish(state_dir: Path) -> None:
    shutil.rmtree(state_dir / TXN_DIR, ignore_errors=True)
    (state_dir / (JOURNAL_NAME + ".tmp")).unlink(missing_ok=True)
    (state_dir / JOURNAL_NAME).unlink(missing_ok=True)
    fsync_dir(state_dir)


# --------------------------------------------------------------------------- recovery

_ENTRY_KEYS = {"path", "existed", "old_sha256", "old_mode", "new_sha256", "new_mode", "backup", "staged"}


def pending(state_dir: Path) -> dict | None:
    """The journal, or None. A journal that cannot be read is moved aside (with ``txn/``, which
    holds the backups) and reported, so the target is not stuck behind it."""
    path = state_dir / JOURNAL_NAME
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_bytes())
        ok = record.get("status") in ("pending", "committed") and all(
            _ENTRY_KEYS <= set(entry) for entry in record["files"]
        )
    except (ValueError, AttributeError, KeyError, TypeError):
        ok = False
    if ok:
        return record
    stamp = time.strftime("%Y%m%dT%H%M%S")
    aside = path.with_name(f"{JOURNAL_NAME}.unreadable-{stamp}")
    os.replace(path, aside)
    if (state_dir / TXN_DIR).is_dir():
        os.replace(state_dir / TXN_DIR, state_dir / f"{TXN_DIR}.unreadable-{stamp}")
    raise CheckFailed(
        f"{path} is not a journal patchkit can read; moved it to {aside.name} (backups kept in "
        f"{TXN_DIR}.unreadable-{stamp}/); check the files it names, then run the command again"
    )


def recover(state_dir: Path) -> Recovery | None:
    """Roll back an interrupted transaction (or finish a committed one); None when there was none."""
    record = pending(state_dir)
    if record is None:
        shutil.rmtree(state_dir / TXN_DIR, ignore_errors=True)
        (state_dir / (JOURNAL_NAME + ".tmp")).unlink(missing_ok=True)
        return None
    if record["status"] == "committed":
        _finish(state_dir)
        where = state_dir / JOURNAL_NAME
        return Recovery(f"finished a committed transaction of pid {record.get('pid')} ({where})")
    root = Path(record["root"]) if record.get("root") else None
    restored, kept = 0, []
    for index, entry in enumerate(record["files"]):
        outcome = _roll_back(entry, root)
        restored += outcome == "restored"
        step(f"restore:{index + 1}")
        if outcome == "kept":
            kept.append(entry["path"])
    for directory in reversed(record.get("created_dirs", [])):
        try:
            os.rmdir(directory)
        except OSError:
            pass
    _finish(state_dir)
    note = (f"rolled back an interrupted transaction of pid {record.get('pid')}: "
            f"{restored} of {len(record['files'])} file(s) restored to their prior state")  # fmt: skip
    if kept:
        note += f"; {len(kept)} file(s) changed by someone else since the crash were kept"
    return Recovery(note, kept)


def _roll_back(entry: dict, root: Path | None) -> str:
    """'restored', 'untouched' (holds the pre-image) or 'kept' (holds neither image)."""
    path = Path(entry["path"])
    try:
        dirfd = open_parent(path, root)
    except (FileNotFoundError, ChangedUnderUs):
        return "untouched" if not entry["existed"] else "kept"
    try:
        aside = aside_name(path.name)
        if entry["existed"] and os.path.lexists(path.parent / aside):  # killed mid-replace
            now = current_state(dirfd, path.name)
            if now == (None, None):
                _put_back(dirfd, aside, path.name)
            elif _holds(now, entry["new_sha256"], entry["new_mode"]):
                os.rename(aside, path.name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
                os.fsync(dirfd)
                return "restored"
            else:
                return "kept"
        now = current_state(dirfd, path.name)
        if _holds(now, entry["old_sha256"], entry["old_mode"]):
            return "untouched"
        if not _holds(now, entry["new_sha256"], entry["new_mode"]):
            return "kept"
        if not entry["existed"]:
            os.unlink(path.name, dir_fd=dirfd)
        else:
            _restore(entry, dirfd, path.name)
        os.fsync(dirfd)
        return "restored"
    finally:
        os.close(dirfd)


def _restore(entry: dict, dirfd: int, name: str) -> None:
    old = Path(entry["backup"]).read_bytes()
    if sha256(old) != entry["old_sha256"]:
        raise RuntimeError(f"journal backup {entry['backup']} is corrupt; cannot restore {name}")
    mode = entry["old_mode"] if entry["old_mode"] is not None else 0o644
    try:  # renaming the backup into place needs no free space (a full disk is why we got here)
        os.chmod(entry["backup"], mode)
        os.replace(entry["backup"], name, dst_dir_fd=dirfd)
    except OSError:  # another file system: copy it
        tmp = f".{name}.patchkit-restore"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600, dir_fd=dirfd)
        with os.fdopen(fd, "wb") as handle:
            handle.write(old)
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)


def write_json_durable(path: Path, record: dict) -> None:
    """``record`` as JSON at ``path``, whole or not at all, file and directory fsynced: what a
    command's state must be before its first change."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        _write_durable(tmp, (json.dumps(record, indent=1, ensure_ascii=False) + "\n").encode())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)
