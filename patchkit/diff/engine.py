"""The one apply: a commit's file patches on a tree of files, as ``git apply`` does it.

``patchkit apply``, the audit's apply gate, split's proof and dependency check all call
``apply_files``. The semantics are git's (apply.c): the whole patch or nothing; a copy or a
rename reads its source as it was before the patch (so a copy of a file the same patch also
changes copies the old text), a later change of the same path sees the earlier one; a new file
must not exist, a deletion must leave nothing; an ``index`` line that names another preimage is
only a warning while the hunks' context matches (``strict_index`` makes it an error, like
``--3way`` needing the exact blob); a mode other than the patch's old mode is a warning, another
file type (symlink for file) an error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from patchkit.diff.hunks import apply_file_patch, preimage_matches
from patchkit.diff.model import FilePatch

State = tuple[bytes | None, str | None]  # (content or None when absent, git mode or None when unknown)
SYMLINK = "120000"


class PatchRefused(ValueError):
    """A file patch that does not apply for a reason other than its hunks' context."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


@dataclass
class Outcome:
    files: dict[str, State] = field(default_factory=dict)  # every path the patch touched, after it
    warnings: list[str] = field(default_factory=list)


def apply_files(files: list[FilePatch], read: Callable[[str], State], *,
                strict_index: bool = False) -> Outcome:  # fmt: skip
    """Apply one commit's (or one patch file's) ``files`` on the tree ``read`` shows.

    Raises ``HunkMismatch`` (context not found) or ``PatchRefused``; nothing is half-applied
    because the result is only returned, never written."""
    original: dict[str, State] = {}
    writes: dict[str, State] = {}
    removed: set[str] = set()
    warnings: list[str] = []

    def before(path: str) -> State:
        if path not in original:
            original[path] = read(path)
        return original[path]

    def now(path: str) -> State:
        if path in writes:
            return writes[path]
        return (None, None) if path in removed else before(path)

    leaving = {fp.old_path for fp in files if fp.old_path and (fp.is_rename or fp.is_deleted)}
    for fp in files:
        if fp.binary and not fp.binary_hunk:
            raise PatchRefused(fp.path, "binary change without its data (git diff --binary writes it)")
        if fp.is_new:
            old: State = (None, None)
            if now(fp.new_path or "")[0] is not None:
                raise PatchRefused(fp.path, "the patch creates it but it already exists")
        else:
            moved = fp.is_rename or fp.is_copy
            old = before(fp.old_path or "") if moved else now(fp.old_path or "")
            if old[0] is None:
                raise PatchRefused(fp.old_path or "", "the patch changes it but it does not exist")
            if moved and fp.new_path not in leaving and now(fp.new_path or "")[0] is not None:
                verb = "copies" if fp.is_copy else "renames"
                raise PatchRefused(fp.path, f"the patch {verb} {fp.old_path} onto it but it already exists")
            _check_mode(fp, old[1], warnings)
        if fp.binary:
            from patchkit.diff.binary import BinaryRefused, apply_binary  # base64, zlib: binary only

            try:
                new = apply_binary(old[0], fp.binary_hunk, fp.old_blob, fp.new_blob)
            except BinaryRefused as exc:
                raise PatchRefused(fp.path, str(exc)) from None
            new = None if fp.is_deleted else new
        else:
            new = apply_file_patch(old[0], fp)
        if not fp.binary and not preimage_matches(fp, old[0]):
            note = (f"{fp.old_path}: not the preimage blob {fp.old_blob} of the index line; "
                    "the hunks' context matches, applied as git does")  # fmt: skip
            if strict_index:
                raise PatchRefused(fp.old_path or "", f"not the preimage blob {fp.old_blob} the patch names")
            warnings.append(note)
        if fp.is_rename or fp.is_deleted:
            removed.add(fp.old_path or "")
            if fp.is_deleted:
                writes.pop(fp.old_path or "", None)
        if fp.new_path:
            writes[fp.new_path] = (new, _new_mode(fp, old[1]))
    result: dict[str, State] = {path: (None, None) for path in removed}
    result.update(writes)
    return Outcome(result, warnings)


def _new_mode(fp: FilePatch, actual: str | None) -> str | None:
    """A ``new mode`` / ``new file mode`` line, else the file's own mode (the mode on an ``index``
    line only names the expected old one)."""
    if fp.new_mode and (fp.is_new or fp.old_mode != fp.new_mode):
        return fp.new_mode
    return actual if actual is not None or not fp.is_new else "100644"


def _check_mode(fp: FilePatch, actual: str | None, warnings: list[str]) -> None:
    expected = fp.old_mode
    if expected is None or actual is None or expected == actual:
        return
    if (expected == SYMLINK) != (actual == SYMLINK):
        raise PatchRefused(fp.old_path or "", f"wrong type: mode {actual}, the patch expects {expected}")
    warnings.append(f"{fp.old_path}: has mode {actual}, the patch expected {expected}")
