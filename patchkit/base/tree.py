"""Read-only access to a base source tree, and detection of where a replay's paths are rooted."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from patchkit.diff.model import Replay
from patchkit.errors import UserError

CANDIDATE_ROOTS = ("", "vllm/")


class BaseTree:
    """Files of the pinned base, read lazily; paths are repo-relative with '/' separators."""

    def __init__(self, root: Path) -> None:
        if not root.is_dir():
            raise UserError("base is not a directory", str(root))
        self.root = root.resolve()
        self._data: dict[str, bytes | None] = {}
        self._modes: dict[str, str | None] = {}
        self._dirs: dict[str, bool] = {}  # directory -> its real path is inside the tree

    def read(self, path: str) -> bytes | None:
        if path not in self._data:
            full = self.resolve(path)
            self._data[path] = full.read_bytes() if self.mode(path) else None
        return self._data[path]

    def mode(self, path: str) -> str | None:
        """'100644' / '100755' for a regular file, None when absent (one stat per path)."""
        if path not in self._modes:
            try:
                st = os.stat(self.resolve(path))
            except (FileNotFoundError, NotADirectoryError):
                st = None
            if st is None or not stat.S_ISREG(st.st_mode):
                self._modes[path] = None
            else:
                self._modes[path] = "100755" if st.st_mode & stat.S_IXUSR else "100644"
        return self._modes[path]

    def exists(self, path: str) -> bool:
        return self.mode(path) is not None

    def resolve(self, path: str) -> Path:
        """The file's location, refusing any path that leaves the tree (a link as the file itself,
        or a directory on the way that resolves outside it). A directory's real path is looked up
        once: the many files of one package share it."""
        if path.startswith("/") or ".." in path.split("/") or "\\" in path:
            raise UserError(f"path {path!r} escapes the base tree")
        parent, _, _name = path.rpartition("/")
        inside = self._dirs.get(parent)
        if inside is None:
            real = os.path.realpath(os.path.join(self.root, parent)) if parent else str(self.root)
            inside = self._dirs[parent] = real == str(self.root) or real.startswith(str(self.root) + os.sep)
        full = os.path.join(self.root, path)
        if not inside or os.path.islink(full):
            raise UserError(f"path {path!r} resolves outside the base tree")
        return Path(full)


def detect_prefix(replay: Replay, base: BaseTree) -> str:
    """The prefix that roots the replay's paths in the base ('' or 'vllm/'); ambiguity is an error."""
    preimages = _preimage_paths(replay)
    if not preimages:  # nothing to match against the base: the root is never guessed
        raise UserError(
            "the replay only adds new files, so nothing in the base shows where its paths are rooted; "
            "pass --root (--root . for repository paths, --root vllm for package paths)",
            replay.sources[0] if replay.sources else None,
        )
    fits = []
    for prefix in CANDIDATE_ROOTS:
        missing = [p for p in preimages if not base.exists(prefix + p)]
        if not missing:
            fits.append(prefix)
    if len(fits) == 1:
        return fits[0]
    if not fits:
        best = min(CANDIDATE_ROOTS, key=lambda pr: sum(not base.exists(pr + p) for p in preimages))
        missing = [p for p in preimages if not base.exists(best + p)]
        raise UserError(
            f"the replay does not fit the base: {len(missing)} file(s) it changes are missing "
            f"(first: {best + missing[0]!r}); is --base the right tree?",
            _first_source(replay, missing[0]),
        )
    candidates = ", ".join(f"'{f or '.'}'" for f in fits)
    raise UserError(
        f"the replay's paths fit the base at several roots ({candidates}); pass --root to choose one",
        replay.sources[0] if replay.sources else None,
    )


def _preimage_paths(replay: Replay) -> list[str]:
    created: set[str] = set()
    paths: list[str] = []
    for patch in replay.patches:
        for fp in patch.files:
            if fp.old_path and fp.old_path not in created and fp.old_path not in paths:
                paths.append(fp.old_path)
            if fp.is_new and fp.new_path:
                created.add(fp.new_path)
    return paths


def _first_source(replay: Replay, path: str) -> str | None:
    for patch in replay.patches:
        for fp in patch.files:
            if fp.old_path == path:
                return fp.source
    return None
