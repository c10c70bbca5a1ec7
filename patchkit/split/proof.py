"""The lossless proof: the written series, re-parsed and applied in order, equals base + replay."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

from patchkit.base.tree import BaseTree
from patchkit.diff.engine import State, apply_files
from patchkit.diff.hunks import HunkMismatch
from patchkit.series.files import SeriesEntry
from patchkit.series.overlays import base_matches, mismatch
from patchkit.split.replay import FileState


@dataclass
class Proof:
    ok: bool
    files_checked: int
    differences: list[str] = field(default_factory=list)
    base_hash: str = ""  # sha256 over the touched files of base + replay (the expected tree)
    series_hash: str = ""  # the same over base + series (equal when ok)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "files_checked": self.files_checked,
            "differences": self.differences,
            "expected_tree_sha256": self.base_hash,
            "series_tree_sha256": self.series_hash,
            "method": "series re-parsed from disk and applied in order to the base, compared "
            "file by file (content and mode) with base + replay",
        }


def apply_entries(base: BaseTree, entries: list[SeriesEntry]) -> tuple[dict, list[str]]:
    """Touched files after applying every entry (patch or overlay) in order:
    path → (bytes|None, mode|None)."""
    tree: dict[str, tuple[bytes | None, str | None]] = {}
    problems: list[str] = []
    for entry in entries:
        if (overlay := entry.overlay) is not None:
            current, mode = tree.get(overlay.target) or (base.read(overlay.target), base.mode(overlay.target))
            if base_matches(overlay, current):
                tree[overlay.target] = (overlay.content, mode or "100644")
            else:
                problems.append(mismatch(overlay, current))
            continue
        for patch in entry.patches:

            def read(path: str) -> State:
                return tree[path] if path in tree else (base.read(path), base.mode(path))

            try:
                tree.update(apply_files(patch.files, read).files)
            except (HunkMismatch, ValueError) as exc:
                problems.append(f"{entry.name}: {exc}")
    return tree, problems


def prove(base: BaseTree, entries: list[SeriesEntry], expected: dict[str, FileState]) -> Proof:
    start = time.perf_counter()
    tree, problems = apply_entries(base, entries)
    differences = list(problems)
    paths = sorted(set(tree) | set(expected))
    for path in paths:
        want = expected.get(path)
        want_side = (want.post, want.post_mode) if want else (base.read(path), base.mode(path))
        got_side = tree.get(path, (base.read(path), base.mode(path)))
        if want_side[0] != got_side[0]:
            differences.append(f"{path}: content differs from base + replay")
        elif want_side[0] is not None and want_side[1] != got_side[1]:
            differences.append(f"{path}: mode {got_side[1]} differs from {want_side[1]}")
    return Proof(
        ok=not differences,
        files_checked=len(paths),
        differences=differences,
        base_hash=_hash({p: (expected[p].post, expected[p].post_mode) for p in expected}),
        series_hash=_hash({p: tree.get(p) or (base.read(p), base.mode(p)) for p in expected}),
        seconds=time.perf_counter() - start,
    )


def _hash(files: dict[str, tuple[bytes | None, str | None]]) -> str:
    digest = hashlib.sha256()
    for path in sorted(files):
        data, mode = files[path]
        digest.update(path.encode() + b"\0" + (mode or "-").encode() + b"\0")
        digest.update(hashlib.sha256(data).digest() if data is not None else b"absent")
    return digest.hexdigest()
