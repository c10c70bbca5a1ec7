"""The diff model: a Replay of commits (Patch), each a list of FilePatch of Hunk lines."""

from __future__ import annotations

from dataclasses import dataclass, field

from patchkit.values import JsonMixin


@dataclass
class Trailer(JsonMixin):
    key: str  # as written, e.g. "Signed-off-by"
    value: str  # "Name <email>"


@dataclass
class Commit(JsonMixin):
    sha: str | None
    author: str | None
    email: str | None
    date: str | None
    subject: str
    body: str = ""
    trailers: list[Trailer] = field(default_factory=list)
    source: str = ""  # "file:line" where the commit starts in the replay

    @property
    def has_metadata(self) -> bool:
        return self.author is not None

    @property
    def message(self) -> str:
        """The commit message as git stores it: the subject, a blank line, the body (a body read
        from ``git log`` already starts with its subject)."""
        if self.body.split("\n", 1)[0].strip() == self.subject.strip():
            return self.body
        return f"{self.subject}\n\n{self.body}" if self.body else self.subject

    def trailer_values(self, key: str) -> list[str]:
        return [t.value for t in self.trailers if t.key.lower() == key.lower()]


@dataclass
class Hunk(JsonMixin):
    """One ``@@`` hunk. ``lines`` keep their diff prefix: ' ', '-', '+' or '\\' (no newline marker)."""

    old_start: int
    old_count: int
    new_start: int
    new_count: int
    lines: list[str] = field(default_factory=list)  # empty in split.json: the patch files hold them
    section: str = ""  # text after the second @@
    commits: list[int] = field(default_factory=list)  # indexes into Replay.commits

    @property
    def added(self) -> int:
        return sum(1 for ln in self.lines if ln.startswith("+"))

    @property
    def removed(self) -> int:
        return sum(1 for ln in self.lines if ln.startswith("-"))

    def header(self) -> str:
        tail = f" {self.section}" if self.section else ""
        return (
            f"@@ -{_range(self.old_start, self.old_count)} +{_range(self.new_start, self.new_count)} @@{tail}"
        )


def _range(start: int, count: int) -> str:
    return str(start) if count == 1 else f"{start},{count}"


@dataclass
class FilePatch(JsonMixin):
    old_path: str | None  # None for a new file (/dev/null)
    new_path: str | None  # None for a deleted file
    old_mode: str | None = None
    new_mode: str | None = None
    old_blob: str | None = None  # preimage blob id from the ``index`` line (often abbreviated)
    new_blob: str | None = None
    hunks: list[Hunk] = field(default_factory=list)
    binary: bool = False
    similarity: int | None = None  # rename/copy similarity index
    source: str = ""  # "file:line" of its ``diff`` header
    copy: bool = False  # ``copy from``/``copy to``: the old path stays
    binary_hunk: list[str] = field(default_factory=list)  # "literal N"/"delta N" + base85 lines

    @property
    def is_copy(self) -> bool:
        return self.copy and bool(self.old_path and self.new_path)

    @property
    def path(self) -> str:
        return self.new_path or self.old_path or ""

    @property
    def is_new(self) -> bool:
        return self.old_path is None

    @property
    def is_deleted(self) -> bool:
        return self.new_path is None

    @property
    def is_rename(self) -> bool:
        return bool(self.old_path and self.new_path and self.old_path != self.new_path) and not self.copy

    @property
    def added(self) -> int:
        return sum(h.added for h in self.hunks)

    @property
    def removed(self) -> int:
        return sum(h.removed for h in self.hunks)


@dataclass
class Patch(JsonMixin):
    """One commit's worth of diff (or one loose diff file with commit=None)."""

    commit: Commit | None
    files: list[FilePatch]
    source: str = ""  # file name it came from


@dataclass
class Replay(JsonMixin):
    patches: list[Patch]
    sources: list[str] = field(default_factory=list)

    @property
    def commits(self) -> list[Commit | None]:
        return [p.commit for p in self.patches]
