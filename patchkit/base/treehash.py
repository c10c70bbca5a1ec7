"""``tree_hash`` of a directory named on the command line (``--base DIR``), with each file's digest
kept in the cache under its stat signature, as git's index keeps one: the second command on the same
base reads the tree's metadata only. A file changed within the last seconds is hashed every time
(git's "racy" rule: a write in the same clock tick as the record would keep its signature)."""

from __future__ import annotations

import hashlib
import os
import stat
import time
from pathlib import Path

from patchkit import cache
from patchkit.base.archive import SKIP_DIRS, sha256_file

KIND = "treehash"
RACY_NS = 3_000_000_000  # a file written this recently is never taken from the record


def cached_tree_hash(root: Path) -> str:
    """The same digest as ``base.archive.tree_hash(root)``."""
    root = root.resolve()
    key = hashlib.sha256(os.fsencode(root)).hexdigest()[:24]
    known = cache.get_json(KIND, key) or {}
    now = time.time_ns()
    kept: dict[str, list] = {}
    entries = []
    prefix = len(os.fsdecode(root)) + 1
    for dirpath, dirnames, filenames in os.walk(os.fsdecode(root)):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in [*filenames, *(d for d in dirnames if os.path.islink(os.path.join(dirpath, d)))]:
            path = os.path.join(dirpath, name)  # strings, not Path: pathlib costs more than the walk
            info = os.lstat(path)
            rel = path[prefix:].replace(os.sep, "/")
            if stat.S_ISLNK(info.st_mode):
                entries.append((rel, "120000", hashlib.sha256(os.fsencode(os.readlink(path))).hexdigest()))
                continue
            if not stat.S_ISREG(info.st_mode):
                continue
            mode = "100755" if info.st_mode & 0o111 else "100644"
            signature = [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino]
            record = known.get(rel)
            if isinstance(record, list) and record[:1] == [signature]:
                digest = record[1]
            else:
                digest = sha256_file(Path(path))
            if now - max(info.st_mtime_ns, info.st_ctime_ns) > RACY_NS:
                kept[rel] = [signature, digest]
            entries.append((rel, mode, digest))
    outer = hashlib.sha256()
    for rel, mode, digest in sorted(entries):
        outer.update(f"{mode} {digest} {rel}\0".encode())
    if kept != known:
        cache.put_json(KIND, key, kept)
    return outer.hexdigest()
