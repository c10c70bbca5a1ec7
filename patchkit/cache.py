"""The content-addressed cache: its layout, atomic entry creation, locking and JSON results.

Layout under ``cache_root()``::

    <kind>/<key>/          an entry, e.g. sdist/<sha256>/, base/index-<sha256>/
    <kind>/<key>.<code>.json  a cached result, e.g. baseline/<hash>.<version>-<code hash>.json
    <kind>/.<key>.lock     serialises builders of one entry
    <kind>/.tmp-*          entries being built (renamed into place when complete)
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from patchkit import __version__
from patchkit.ui.console import verbosity

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


def cache_root() -> Path:
    """``$PATCHKIT_CACHE``, else ``$XDG_CACHE_HOME/patchkit``, else ``~/.cache/patchkit``."""
    if explicit := os.environ.get("PATCHKIT_CACHE"):
        return Path(explicit).expanduser()
    if xdg := os.environ.get("XDG_CACHE_HOME"):
        return Path(xdg).expanduser() / "patchkit"
    return Path.home() / ".cache" / "patchkit"


def _checked(name: str) -> str:
    if not _NAME.fullmatch(name) or ".." in name:
        raise ValueError(f"not a valid cache name: {name!r}")
    return name


def store_dir(kind: str, key: str) -> Path:
    """Where the entry ``kind/key`` lives (it may not exist yet)."""
    return cache_root() / _checked(kind) / _checked(key)


def json_path(kind: str, key: str) -> Path:
    """Where the result ``kind/key`` lives; the name carries ``code_identity()``, so a result
    computed by another patchkit (another version, or the same version with other code) is a miss."""
    return cache_root() / _checked(kind) / f"{_checked(key)}.{code_identity()}.json"


@functools.cache
def code_identity() -> str:
    """patchkit's version and a hash of its code and data files (every producer of a cached result)."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256(f"patchkit {__version__}\n".encode())
    for path in sorted(package.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".json", ".toml", ".txt", ".j2", ".html", ".css", ".js"):
            digest.update(f"{path.relative_to(package).as_posix()}\0".encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return f"{__version__}-{digest.hexdigest()[:16]}"


def _owner_file(path: Path) -> Path:
    return path.with_name(path.name + ".owner")


def lock_owner(path: Path) -> str:
    """Who holds the lock ``path``, from what its holder wrote ("pid 123 (thread T): patchkit audit");
    "this run" when that is this very process (another of its threads)."""
    try:
        text = _owner_file(path).read_text("utf-8").strip()
    except OSError:
        text = ""
    match = re.match(r"pid (\d+)(?: \(thread ([^)]*)\))?: ", text)
    if match is None:
        return "an unknown process"
    if int(match.group(1)) == os.getpid():
        thread = match.group(2)
        return f"this run: another of its threads{f' ({thread})' if thread else ''}"
    if not _alive(int(match.group(1))):  # a holder that died released the lock: who has it now is unknown
        return "an unknown process"
    return text


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (filelock; created if missing) for the ``with`` body.
    Whoever has to wait is told who holds it (the holder writes its pid and command beside it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        owner = lock_owner(path)
        if verbosity() > 0 or not owner.startswith("this run"):  # another thread of this run: -v only
            print(f"patchkit: waiting for the cache lock {path} (held by {owner})", file=sys.stderr,
                  flush=True)  # fmt: skip
        lock.acquire()
    try:
        with contextlib.suppress(OSError):  # only for the message of whoever waits
            holder = f"pid {os.getpid()} (thread {threading.current_thread().name}): {' '.join(sys.argv)}"
            _owner_file(path).write_text(holder + "\n", encoding="utf-8")
        yield
    finally:
        with contextlib.suppress(OSError):
            _owner_file(path).unlink()
        lock.release()


def entry_lock(kind: str, key: str) -> contextlib.AbstractContextManager[None]:
    return file_lock(cache_root() / _checked(kind) / f".{_checked(key)}.lock")


def build_entry(kind: str, key: str, build: Callable[[Path], None]) -> Path:
    """Return the entry ``kind/key``, building it with ``build(tmp_dir)`` if it does not exist.

    ``build`` fills an empty directory beside the final one, which is then renamed into place,
    so an entry is either complete or absent. If ``build`` raises, nothing is kept. Builders
    are serialised by a lock; a builder that still loses a race uses the winner's entry.
    """
    final = store_dir(kind, key)
    if final.is_dir():
        return final
    with entry_lock(kind, key):
        if final.is_dir():
            return final
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=final.parent))
        try:
            build(tmp)
            tmp.chmod(0o755)  # mkdtemp makes it 0700
            try:
                os.rename(tmp, final)
            except OSError:
                if not final.is_dir():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def remove_entry(kind: str, key: str) -> None:
    """Delete an entry (e.g. one found corrupt), under its lock."""
    with entry_lock(kind, key):
        shutil.rmtree(store_dir(kind, key), ignore_errors=True)


ENVELOPE = "patchkit-cache-entry/2"
MAX_RESULT_BYTES = 256 * 1024 * 1024
_told: set[str] = set()


def _checksum(kind: str, key: str, body: bytes) -> str:
    """sha256 of the key an entry was written under and of its content's bytes as stored."""
    return hashlib.sha256(f"{kind}\0{key}\0".encode("utf-8", errors="surrogateescape") + body).hexdigest()


def _miss(path: Path, why: str) -> None:
    """A damaged entry: said once per run (stderr, the progress stream), then recomputed."""
    if str(path) not in _told:
        _told.add(str(path))
        print(f"patchkit: cache entry {path} is damaged ({why}); recomputing it", file=sys.stderr, flush=True)


def get_json(kind: str, key: str) -> Any | None:
    """The cached JSON result ``kind/key``, or None when absent. An entry that is not exactly what
    ``put_json`` wrote under this key (a stray byte, ``{}``, a directory, a hand edit, another
    key's entry) is a miss, said once: it carries the key and a checksum of its content."""
    path = json_path(kind, key)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        _miss(path, exc.strerror or "unreadable")
        return None
    try:
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise ValueError("not a regular file")
            data = handle.read(MAX_RESULT_BYTES + 1)
        if len(data) > MAX_RESULT_BYTES:
            raise ValueError("too large")
        head, newline, body = data.partition(b"\n")
        record = json.loads(head) if newline else None
        if not isinstance(record, dict) or record.get("format") != ENVELOPE:
            raise ValueError("not a patchkit cache entry")
        if record.get("kind") != kind or record.get("key") != key:
            raise ValueError("written under another key")
        if record.get("bytes") != len(body) or record.get("sha256") != _checksum(kind, key, body):
            raise ValueError("its checksum does not match its content")
        value = json.loads(body)
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        _miss(path, str(exc)[:80] if isinstance(exc, ValueError) else type(exc).__name__)
        return None
    return value


def put_json(kind: str, key: str, obj: Any) -> Path | None:
    """Store ``obj`` as the JSON result ``kind/key`` atomically, with its key and checksum; return
    its path. A cache that cannot be written (full, read-only, a directory in the way that cannot
    be removed) only costs time: said once, None."""
    path = json_path(kind, key)
    # the header line names the key and the checksum of the body's bytes: a reader verifies the
    # bytes it read (one sha256) instead of serialising the value again
    body = json.dumps(obj, sort_keys=True, separators=(",", ":")).encode("ascii") + b"\n"
    header = {
        "format": ENVELOPE,
        "kind": kind,
        "key": key,
        "bytes": len(body),
        "sha256": _checksum(kind, key, body),
    }
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)  # a directory where an entry belongs is damage
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
        with os.fdopen(fd, "wb") as handle:
            handle.write(json.dumps(header, sort_keys=True).encode("ascii") + b"\n" + body)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        _miss(path, f"cannot write it: {exc.strerror or exc}")
        return None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    return path


# --------------------------------------------------------------------------- what the cache holds

_RESULT = re.compile(r"(?P<key>[^.]+)\.(?P<code>.+-[0-9a-f]{16})\.json")


@dataclasses.dataclass(frozen=True)
class Entry:
    """One thing the cache holds: an entry directory, a cached result, or a leftover of a build."""

    kind: str
    name: str
    path: Path
    size: int  # bytes, links not followed
    mtime: float  # when it was last written
    code: str | None  # the code_identity() a result belongs to; None: an entry keyed by its content
    leftover: bool = False  # a build that never finished (.tmp-*) or a lock no one holds

    @property
    def stale(self) -> bool:
        """Of no use to this patchkit: another version's (or code's) result, or a leftover."""
        return self.leftover or (self.code is not None and self.code != code_identity())


LEFTOVER_AGE = 86400.0  # a .tmp-* build this old was interrupted (builds take minutes, not a day)


def entries() -> list[Entry]:
    """Everything under ``cache_root()``, kind by kind, in name order (locks are not entries)."""
    root = cache_root()
    found: list[Entry] = []
    for kind_dir in sorted(root.iterdir()) if root.is_dir() else []:
        if not kind_dir.is_dir() or kind_dir.is_symlink():
            continue
        for path in sorted(kind_dir.iterdir()):
            if not path.name.endswith((".lock", ".lock.owner")):
                found.append(_entry(kind_dir.name, path))
    return found


def _entry(kind: str, path: Path) -> Entry:
    mtime = path.lstat().st_mtime
    match = _RESULT.fullmatch(path.name)
    leftover = path.name.startswith(".tmp-") and time.time() - mtime > LEFTOVER_AGE
    return Entry(kind, path.name, path, _size(path), mtime, match and match.group("code"), leftover)


def _size(path: Path) -> int:
    if path.is_symlink() or not path.is_dir():
        return path.lstat().st_size
    total = 0
    for top, dirs, files in os.walk(path):
        for name in files + dirs:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(top, name)).st_size
    return total


def remove(entry: Entry) -> None:
    """Delete ``entry``: a directory under its entry lock (a builder never loses half of one)."""
    if not entry.path.is_dir() or entry.path.is_symlink():
        entry.path.unlink(missing_ok=True)
    elif entry.name.startswith(".") or not _NAME.fullmatch(entry.name):
        shutil.rmtree(entry.path, ignore_errors=True)  # a leftover build: nobody locks it by name
    else:
        with entry_lock(entry.kind, entry.name):
            shutil.rmtree(entry.path, ignore_errors=True)
