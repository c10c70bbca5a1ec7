"""Two series revisions compared patch by patch."""

from __future__ import annotations

import difflib
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from patchkit import git
from patchkit.errors import UserError
from patchkit.series.files import SERIES_FILE, load_entries

_HUNK_HEAD = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
_DOMAIN = re.compile(r"^Patchkit-Domain: (\S+)", re.M)
SIMILAR = 0.5  # a dropped and an added patch this alike (changed lines) are one patch renamed


@dataclass
class Side:
    name: str
    domain: str
    subject: str
    diff: list[str]  # the diff without index lines and line numbers: what it changes, not where

    @property
    def changes(self) -> list[str]:
        return [ln for ln in self.diff if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]


@dataclass
class Row:
    status: str  # unchanged, changed, added, dropped, renamed
    old: str | None
    new: str | None
    interdiff: list[str] = field(default_factory=list)
    how: str = ""  # matched by domain / by content

    def to_dict(self) -> dict:
        return {
            "status": self.status,
            "old": self.old,
            "new": self.new,
            "matched_by": self.how,
            "interdiff": self.interdiff,
        }


def load_side(spec: str, repo: Path | None = None) -> list[Side]:
    """A series dir, or ``REV:DIR`` (a git revision of a series dir in the repository at ``repo``)."""
    path = Path(spec)
    if path.is_dir():
        return _sides(path)
    rev, sep, sub = spec.partition(":")
    if not sep:
        raise UserError(f"{spec}: neither a series dir nor REV:DIR")
    where = repo or Path.cwd()
    with tempfile.TemporaryDirectory(prefix="patchkit-diff-") as scratch:
        listing = git.run(["ls-tree", "-z", "--name-only", f"{rev}:{sub}"], where, check=False)
        if listing.returncode != 0:
            raise UserError(f"{spec}: no such revision or directory in {where}")
        for name in filter(None, listing.stdout.decode().split("\0")):
            blob = git.run(["cat-file", "-p", f"{rev}:{sub.rstrip('/')}/{name}"], where, check=False)
            if blob.returncode == 0:
                (Path(scratch) / name).write_bytes(blob.stdout)
        if not (Path(scratch) / SERIES_FILE).is_file():
            raise UserError(f"{spec}: no series file there")
        return _sides(Path(scratch))


def _sides(directory: Path) -> list[Side]:
    out = []
    for entry in load_entries(directory):
        if entry.overlay is not None:
            continue
        text = entry.text
        found = _DOMAIN.search(text)
        stem = entry.name.removesuffix(".patch")
        domain = (
            found.group(1)
            if found
            else (stem.split("-", 1)[1] if stem[:4].isdigit() and "-" in stem else stem)
        )
        subject = entry.patches[0].commit.subject if entry.patches and entry.patches[0].commit else stem
        out.append(Side(entry.name, domain, subject, normalise(text)))
    return out


def normalise(text: str) -> list[str]:
    """A patch's diff without its mail header, signature, index lines and line numbers. ``text`` is a
    patch file (a header first) or a bare diff (an audit record's), whose first file counts too."""
    start = 0 if text.startswith("diff --git ") else text.find("\ndiff --git ") + 1  # none: 0, all of it
    body = text[start:]
    end = body.rfind("\n-- \n")
    body = body[: end + 1] if end >= 0 else body
    lines = []
    for line in body.splitlines():
        if line.startswith("index "):
            continue
        lines.append("@@" + line[_HUNK_HEAD.match(line).end() :] if _HUNK_HEAD.match(line) else line)  # type: ignore[union-attr]
    return lines


def compare(old: list[Side], new: list[Side]) -> list[Row]:
    rows: list[Row] = []
    left = list(old)
    right = list(new)
    for o in list(left):
        match = next((n for n in right if n.domain == o.domain), None)
        if match is not None:
            left.remove(o)
            right.remove(match)
            rows.append(_row(o, match, "domain"))
    pairs = sorted(
        ((_similar(o, n), i, j) for i, o in enumerate(left) for j, n in enumerate(right)), reverse=True
    )
    used_o, used_n = set(), set()
    for score, i, j in pairs:
        if score < SIMILAR or i in used_o or j in used_n:
            continue
        used_o.add(i)
        used_n.add(j)
        row = _row(left[i], right[j], "content")
        row.status = "renamed"
        rows.append(row)
    rows += [Row("dropped", o.name, None) for i, o in enumerate(left) if i not in used_o]
    rows += [Row("added", None, n.name) for j, n in enumerate(right) if j not in used_n]
    order = {n.name: i for i, n in enumerate(new)}
    return sorted(rows, key=lambda r: (order.get(r.new or "", len(order)), r.old or ""))


def _similar(a: Side, b: Side) -> float:
    return difflib.SequenceMatcher(None, a.changes, b.changes, autojunk=False).ratio()


def _row(o: Side, n: Side, how: str) -> Row:
    if o.diff == n.diff:
        return Row("unchanged", o.name, n.name, how=how)
    inter = list(difflib.unified_diff(o.diff, n.diff, f"a/{o.name}", f"b/{n.name}", lineterm="", n=2))
    return Row("changed", o.name, n.name, inter, how)
