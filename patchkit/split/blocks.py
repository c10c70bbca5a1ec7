"""Change blocks of the net diff: a domain per line, the slide that lets two domains' changes stand
apart, and the record of where each block went and why (split.json's assignments)."""

from __future__ import annotations

from dataclasses import dataclass, field

from patchkit.series.model import Assignment
from patchkit.split.rules import LineVerdict


@dataclass
class Block:
    """One contiguous change of the net diff, in base coordinates, with a domain per line."""

    path: str
    old_index: int
    old: list[str]
    new: list[str]
    old_domains: list[LineVerdict]
    new_domains: list[LineVerdict]
    new_line: int
    commits: list[int]
    line_commits: list[int | None] = field(default_factory=list)  # per old + new line

    def commits_for(self, name: str) -> list[int]:
        """Commits behind this block's lines of domain ``name`` (the block's, when unknown)."""
        verdicts = self.old_domains + self.new_domains
        mine = {c for v, c in zip(verdicts, self.line_commits) if v.domain == name and c is not None}
        return sorted(mine) if mine else self.commits

    def domains(self) -> list[str]:
        seen = [v.domain for v in self.old_domains + self.new_domains]
        return list(dict.fromkeys(seen))


def slide_apart(block: Block, base_lines: list[str]) -> list[Block]:
    """Move a trailing run of another domain below the base line it ends with.

    Diff alignment may pair a base line (typically a closing bracket) with the *last* copy of it in
    the new text: one domain's run then ends with that line and the next domain's run lacks its
    own. When the line before a domain boundary equals the base line right after the block, the
    rest of the block is the same text inserted one line lower; moving it there gives each domain
    a change that stands on its own (the file with only one of them applied still parses).
    """
    doms = [v.domain for v in block.new_domains]
    following = base_lines[block.old_index + len(block.old) : block.old_index + len(block.old) + 1]
    if len(set(doms + [v.domain for v in block.old_domains])) < 2 or not following:
        return [block]
    for k in range(len(block.new) - 1, 0, -1):  # the boundary just before new[k]
        if doms[k] == doms[k - 1] or doms[k - 1] in doms[k:] or block.new[k - 1] != following[0]:
            continue
        n_old = len(block.old)
        old_commits, new_commits = block.line_commits[:n_old], block.line_commits[n_old:]
        head_commits = old_commits + new_commits[: k - 1]
        tail_commits = new_commits[k:] + new_commits[k - 1 : k]
        head = Block(
            block.path, block.old_index, block.old, block.new[: k - 1], block.old_domains,
            block.new_domains[: k - 1], block.new_line, _known(head_commits), head_commits,
        )  # fmt: skip
        tail = Block(
            block.path, block.old_index + n_old + 1, [], block.new[k:] + block.new[k - 1 : k], [],
            block.new_domains[k:] + block.new_domains[k : k + 1], block.new_line + k,
            _known(tail_commits), tail_commits,
        )  # fmt: skip
        return ([head] if head.old or head.new else []) + [tail]
    return [block]


def _known(commits: list[int | None]) -> list[int]:
    return sorted({c for c in commits if c is not None})


def assignments(blocks: list[Block]) -> list[Assignment]:
    """One record per (block, domain), grouped into the -U3 hunks a reviewer sees."""
    records: list[Assignment] = []
    hunk_of: dict[str, tuple[int, int]] = {}  # path → (hunk number, last base line)
    for block in sorted(blocks, key=lambda b: (b.path, b.old_index)):
        number, last = hunk_of.get(block.path, (-1, -(10**9)))
        if block.old_index - last > 6:
            number += 1
        hunk_of[block.path] = (number, block.old_index + len(block.old))
        for name in block.domains():
            olds = [v for v in block.old_domains if v.domain == name]
            news = [v for v in block.new_domains if v.domain == name]
            reason = (olds + news)[0].reason
            records.append(Assignment(
                file=block.path, old_line=block.old_index + 1, new_line=block.new_line,
                added=len(news) if block.new else 0, removed=len(olds) if block.old else 0,
                domain=name, rule=reason, hunk=number, commits=block.commits_for(name),
            ))  # fmt: skip
    hunk_domains: dict[tuple[str, int], set[str]] = {}
    for rec in records:
        hunk_domains.setdefault((rec.file, rec.hunk), set()).add(rec.domain)
    for rec in records:
        rec.mixed = len(hunk_domains[(rec.file, rec.hunk)]) > 1
    return records
