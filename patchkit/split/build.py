"""One domain's step as a unified diff, built from the change blocks instead of re-diffing files.

A step turns state k-1 (base + the first k-1 domains' lines) into state k. Re-diffing those two
files with git lets git re-align lines: a domain's patch can then carry a line another domain
changed, and the per-patch line counts no longer add up to the net diff (a property test found
such a case). Here each block of the net diff says which of its lines belong to the domain, so
the step's hunks are written from exactly those lines: '-' for the domain's removed lines, '+'
for its added ones, and every other line is context. Totals add up by construction.

The text follows git's conventions (3 lines of context, hunks closer than 2 × context merged,
git's default function-name header, ``\\ No newline at end of file``, abbreviated blob ids), so
the patches read as ``git diff`` output and ``git apply`` takes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from patchkit import git
from patchkit.diff.model import FilePatch, Hunk

Side = tuple[bytes | None, str | None]


class _Verdict(Protocol):
    domain: str


class _Block(Protocol):
    old_index: int
    old: list[str]
    new: list[str]
    old_domains: list[_Verdict]
    new_domains: list[_Verdict]

    def domains(self) -> list[str]: ...


@dataclass
class _Run:
    """Adjacent removed-then-added lines at ``old_pos`` (0-based) of the step's old file."""

    old_pos: int
    minus: list[str]
    plus: list[str]


class NotRepresentable(Exception):
    """The step cannot be written this way (a line without newline would not end its file)."""


def step_file_patch(path: str, base_lines: list[str], blocks: list[_Block], name: str,
                    before: set[str], old: Side, new: Side,
                    context: int = 3) -> FilePatch | None:  # fmt: skip
    """The diff of domain ``name``'s lines in one file, on top of the ``before`` domains.

    ``old``/``new`` are the file's content and mode before and after the step (as ``compose``
    gives them); None when nothing changes. Raises NotRepresentable in the rare case where a
    no-newline-at-end line would end up in the middle of a side; the caller falls back to git.
    """
    (old_data, old_mode), (new_data, new_mode) = old, new
    if old_data == new_data and old_mode == new_mode:
        return None
    after = before | {name}
    old_lines: list[str] = []
    runs: list[_Run] = []
    pos = 0
    for block in sorted(blocks, key=lambda b: b.old_index):
        old_lines += base_lines[pos : block.old_index]
        pos = block.old_index + len(block.old)
        if name not in block.domains():
            old_lines += [ln for ln, v in zip(block.old, block.old_domains) if v.domain not in before]
            old_lines += [ln for ln, v in zip(block.new, block.new_domains) if v.domain in before]
            continue
        ops = [(" " if v.domain != name else "-", ln) for ln, v in zip(block.old, block.old_domains)
               if v.domain not in before]  # fmt: skip
        ops += [(" " if v.domain != name else "+", ln) for ln, v in zip(block.new, block.new_domains)
                if v.domain in after]  # fmt: skip
        at = len(old_lines)
        for op, line in ops:
            if op == " ":
                old_lines.append(line)
                at += 1
                continue
            if not runs or runs[-1].old_pos + len(runs[-1].minus) != at or (op == "-" and runs[-1].plus):
                runs.append(_Run(at, [], []))
            if op == "-":
                runs[-1].minus.append(line)
                old_lines.append(line)
                at += 1
            else:
                runs[-1].plus.append(line)
    old_lines += base_lines[pos:]
    fp = FilePatch(
        old_path=path if old_data is not None else None,
        new_path=path if new_data is not None else None,
        old_mode=old_mode if old_data is not None else None,
        new_mode=new_mode if new_data is not None else None,
    )
    if old_data != new_data:
        fp.old_blob, fp.new_blob = _blob_id(old_data), _blob_id(new_data)
    fp.hunks = _hunks(old_lines, runs, context)
    _check_newlines(fp.hunks)
    return fp


def _blob_id(data: bytes | None) -> str | None:
    if data is None:  # rendered as 0000000, as git writes it
        return None
    return git.blob_id(data)[:7]


def _hunks(old_lines: list[str], runs: list[_Run], context: int) -> list[Hunk]:
    groups: list[list[_Run]] = []
    for run in runs:
        if groups and run.old_pos - _end(groups[-1][-1]) <= 2 * context:
            groups[-1].append(run)
        else:
            groups.append([run])
    hunks: list[Hunk] = []
    delta = 0  # new line number - old line number before the current group
    func = ""
    searched_to = -1
    for group in groups:
        start = max(group[0].old_pos - context, 0)
        stop = min(_end(group[-1]) + context, len(old_lines))
        lines: list[str] = []
        cursor = start
        group_delta = 0
        for run in group:
            lines += _emit(" ", old_lines[cursor : run.old_pos])
            lines += _emit("-", run.minus)
            lines += _emit("+", run.plus)
            cursor = _end(run)
            group_delta += len(run.plus) - len(run.minus)
        lines += _emit(" ", old_lines[cursor:stop])
        old_count = stop - start
        new_count = old_count + group_delta
        found = _function_line(old_lines, start - 1, searched_to)
        if found is not None:
            func = found
        searched_to = start - 1
        hunks.append(
            Hunk(
                old_start=start + 1 if old_count else start,
                old_count=old_count,
                new_start=start + delta + 1 if new_count else start + delta,
                new_count=new_count,
                lines=lines,
                section=func,
            )
        )
        delta += group_delta
    return hunks


def _end(run: _Run) -> int:
    return run.old_pos + len(run.minus)


def _emit(op: str, lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        if line.endswith("\n"):
            out.append(op + line[:-1])
        else:
            out += [op + line, "\\ No newline at end of file"]
    return out


_FUNC_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_$")


def _function_line(lines: list[str], start: int, limit: int) -> str | None:
    """git's default hunk-header function line: the nearest line above the hunk, back to where the
    previous hunk's search began, that starts with a letter, '_' or '$' (first 80 bytes, trailing
    whitespace dropped); None when there is none and the previous header carries over."""
    for index in range(start, limit, -1):
        if lines[index][:1] in _FUNC_START:
            raw = lines[index].encode("utf-8", errors="surrogateescape")[:80].rstrip(b" \t\n\v\f\r")
            return raw.decode("utf-8", errors="surrogateescape")
    return None


def _check_newlines(hunks: list[Hunk]) -> None:
    """A '\\ No newline' marker may only follow the last line of the side(s) it applies to."""
    for hunk_index, hunk in enumerate(hunks):
        for i, line in enumerate(hunk.lines):
            if line.startswith("\\"):
                op = hunk.lines[i - 1][:1]
                rest = hunk.lines[i + 1 :]
                later = hunks[hunk_index + 1 :]
                blocked = {" ": " -+", "-": " -", "+": " +"}[op]
                following = rest + [ln for h in later for ln in h.lines]
                if any(ln[:1] in blocked for ln in following):
                    raise NotRepresentable(f"line without newline is not last: {hunk.header()}")
