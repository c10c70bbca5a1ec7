"""Replay → one patch per domain: net diff on the base, per-line assignment, ordering, dependencies.

The series is built by construction: state k = base + every change block (or sub-block) whose
domain is among the first k domains; patch k = diff(state k-1, state k). ``verify.py`` then proves
independently, from the rendered text, that applying the series gives base + replay.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

from patchkit.analysis.depends import absorbed_commits
from patchkit.analysis.syntax import PendingCheck, start
from patchkit.base.tree import BaseTree
from patchkit.diff.hunks import (
    HunkMismatch,
    hunk_sides,
    render_diff,
    splice_plan,
    split_lines,
)
from patchkit.diff.model import FilePatch, Replay
from patchkit.diff.pairs import Side, diff_pairs
from patchkit.errors import UserError
from patchkit.series.model import Series, SplitPatch
from patchkit.series.overlays import Overlay, take_overlays
from patchkit.split.blocks import Block, assignments, slide_apart
from patchkit.split.build import NotRepresentable, step_file_patch
from patchkit.split.crossfile import CrossFile, resolve
from patchkit.split.model import Domain
from patchkit.split.names import follow_definitions
from patchkit.split.rules import Classifier, Unclaimed, unclaimed_error
from patchkit.split.upstream import extend_domains
from patchkit.tmpdir import scratch_dir
from patchkit.upstream.mergify import LabelRule
from patchkit.values import Pin

Origin = tuple[int | None, int | None]  # (commit index that added the line, base line index)


@dataclass
class FileState:
    """One file the replay touches: its base, its post-replay content, and line provenance."""

    path: str
    base: bytes | None
    base_mode: str | None
    post: bytes | None = None
    post_mode: str | None = None
    origins: list[Origin] = field(default_factory=list)
    removed_by: dict[int, int] = field(default_factory=dict)  # base line → commit index
    commits: list[int] = field(default_factory=list)
    base_lines: list[str] = field(default_factory=list, repr=False)  # ``base`` split, kept
    post_lines: list[str] = field(default_factory=list, repr=False)  # ``post`` split, kept


@dataclass
class SplitResult:
    series: Series
    texts: dict[str, str]  # patch file name → diff text (without mail header)
    states: dict[str, FileState]
    overlays: dict[str, Overlay] = field(default_factory=dict)  # "overlays/<stem>.toml" → overlay
    checks: PendingCheck | None = None  # the step check still running; ``finish`` collects it

    def finish(self) -> Series:
        """Wait for the step check and record what it found as the series' warnings."""
        if self.checks is not None:
            self.series.warnings = self.checks.result()
            self.checks = None
        return self.series


def replay_onto_base(replay: Replay, base: BaseTree, prefix: str) -> dict[str, FileState]:
    """Apply every commit in order, in memory, tracking which commit wrote each line."""
    states: dict[str, FileState] = {}

    def state_of(path: str) -> FileState:
        if path not in states:
            data = base.read(path)
            st = FileState(path, data, base.mode(path), data, base.mode(path))
            st.base_lines = split_lines(data) if data else []
            st.post_lines = list(st.base_lines)
            st.origins = list(zip(itertools.repeat(None), range(len(st.base_lines))))
            states[path] = st
        return states[path]

    for index, patch in enumerate(replay.patches):
        # a copy or rename reads its source as the commit found it (git apply does the same)
        moved = [state_of(prefix + fp.old_path) for fp in patch.files if fp.is_copy or fp.is_rename]  # type: ignore[operator]
        before = {st.path: (st.post, list(st.post_lines), list(st.origins)) for st in moved}
        for fp in patch.files:
            if fp.binary:
                raise UserError(f"binary patch of {fp.path!r} cannot be split", fp.source)
            old_path = prefix + fp.old_path if fp.old_path else None
            new_path = prefix + fp.new_path if fp.new_path else None
            source = state_of(old_path) if old_path else None
            target = state_of(new_path) if new_path else None
            if source is not None and source.post is None:
                raise UserError(f"{old_path} does not exist at this point of the replay", fp.source)
            if source is None and target is not None and target.post is not None:
                raise UserError(f"{new_path} is created but already exists", fp.source)
            state = (source.post, source.post_lines, source.origins) if source else (None, [], [])
            post, lines, origins = before.get(old_path or "", state)
            lines = lines if post else []
            try:
                plan = splice_plan(lines, fp.hunks, old_path or new_path or "")
            except HunkMismatch as exc:
                raise UserError(f"replay does not apply: {exc}", fp.source) from exc
            new_lines, new_origins = _splice(lines, origins, plan, fp.hunks, index, source)
            if source is not None and source is not target and not fp.is_copy:
                source.post, source.origins, source.post_lines = None, [], []
                _touch(source, index)
            if target is not None:
                target.post = "".join(new_lines).encode("utf-8", errors="surrogateescape")
                # each line holds at most one "\n", at its end: every line but the last ends in one
                # exactly when the newlines number the lines (counted in C, not line by line)
                ends = len(new_lines) - (bool(new_lines) and not new_lines[-1].endswith("\n"))
                regular = b"\r" not in target.post and target.post.count(b"\n") == ends
                target.post_lines = new_lines if regular else split_lines(target.post)
                target.origins = new_origins
                if fp.new_mode:
                    target.post_mode = (
                        fp.new_mode if (fp.is_new or fp.old_mode != fp.new_mode) else target.post_mode
                    )
                target.post_mode = target.post_mode or "100644"
                _touch(target, index)
            if fp.is_deleted and source is not None:
                source.post, source.origins, source.post_mode = None, [], None
    return states


def _touch(state: FileState, index: int) -> None:
    if index not in state.commits:
        state.commits.append(index)


def _splice(lines, origins, plan, hunks, index, source):
    out_lines: list[str] = []
    out_origins: list[Origin] = []
    pos = 0
    for (at, old_len, new), hunk in zip(plan, hunks):
        out_lines += lines[pos:at]
        out_origins += origins[pos:at]
        old_pos = at
        for line in hunk.lines:  # context lines keep their origin; only '+' lines are this commit's
            op = line[:1]
            if op in " -":
                origin = origins[old_pos]
                old_pos += 1
                if op == " ":
                    out_origins.append(origin)
                elif origin[0] is None and origin[1] is not None and source is not None:
                    source.removed_by.setdefault(origin[1], index)
            elif op == "+":
                out_origins.append((index, None))
        out_lines += new
        pos = at + old_len
    out_lines += lines[pos:]
    out_origins += origins[pos:]
    return out_lines, out_origins


def net_blocks(states: dict[str, FileState], classifier: Classifier, work: Path) -> list[Block]:
    """The net change base → base+replay as -U0 blocks, each line classified."""
    changed = [s for s in states.values() if s.base != s.post or s.base_mode != s.post_mode]
    diff = diff_pairs(
        [(s.path, (s.base, s.base_mode), (s.post, s.post_mode)) for s in changed],
        work / "net",
        context=0,
    )
    blocks: list[Block] = []
    unclaimed: list[str] = []
    for fp in diff:
        state = states[fp.path]
        post_lines = state.post_lines if state.post else []
        base_lines = state.base_lines
        for hunk in fp.hunks:
            old, new = hunk_sides(hunk)
            changed_lines = [ln for ln in hunk.lines if ln[:1] in "+-"]
            where = f"{fp.path}:{hunk.new_start or hunk.old_start}"
            old_index = hunk.old_start - 1 if hunk.old_count else hunk.old_start
            new_index = hunk.new_start - 1 if hunk.new_count else hunk.new_start
            below = post_lines[new_index + len(new) : new_index + len(new) + 3]
            try:
                verdicts = classifier.classify_lines(fp.path, changed_lines, where, below)
            except Unclaimed as exc:
                unclaimed.append(exc.where)
                continue
            line_commits = [state.removed_by.get(i) for i in range(old_index, old_index + len(old))]
            line_commits += [state.origins[i][0] for i in range(new_index, new_index + len(new))]
            block = Block(
                path=fp.path, old_index=old_index, old=old, new=new,
                old_domains=verdicts[: len(old)], new_domains=verdicts[len(old):],
                new_line=hunk.new_start, commits=sorted({c for c in line_commits if c is not None}),
                line_commits=line_commits,
            )  # fmt: skip
            blocks.extend(slide_apart(block, base_lines))
        if not fp.hunks:  # mode change or empty new/deleted file: a block with no lines
            try:
                verdict = classifier.classify_lines(fp.path, ["+"], fp.path)[0]
            except Unclaimed as exc:
                unclaimed.append(exc.where)
                continue
            blocks.append(Block(fp.path, 0, [], [], [verdict], [], 0, list(state.commits)))
    if unclaimed:
        raise unclaimed_error(unclaimed)
    return blocks


def compose(state: FileState, blocks: list[Block], chosen: set[str]) -> Side:
    """File content and mode with only the ``chosen`` domains' changes applied to the base."""
    present = {d for b in blocks for d in b.domains()}
    if state.base is None and not present & chosen:
        return None, None
    if state.post is None and present <= chosen:
        return None, None
    lines = state.base_lines
    out: list[str] = []
    pos = 0
    for block in sorted(blocks, key=lambda b: b.old_index):
        _extend(out, lines[pos : block.old_index])
        kept = [ln for ln, v in zip(block.old, block.old_domains) if v.domain not in chosen]
        _extend(out, kept)
        _extend(out, [ln for ln, v in zip(block.new, block.new_domains) if v.domain in chosen])
        pos = block.old_index + len(block.old)
    _extend(out, lines[pos:])
    owner = blocks[0].domains()[0]
    mode = state.post_mode if owner in chosen or state.base is None else state.base_mode
    return "".join(out).encode("utf-8", errors="surrogateescape"), mode or "100644"


def composed_state(memo: dict[tuple, Side], state: FileState, blocks: list[Block], chosen: set[str]) -> Side:
    """``compose``, once per distinct answer: a file's state depends only on which of its own
    domains are chosen and on where its lines are now (moves change that, so it is in the key).
    The same bytes object comes back, so the checks' memos keyed by content hash it once."""
    return composed_states(memo, state, blocks, [chosen])[0]


def composed_states(memo: dict[tuple, Side], state: FileState, blocks: list[Block],
                    chosens: list[set[str]]) -> list[Side]:  # fmt: skip
    """``composed_state`` for several choices of domains at once: where the lines are now is read
    once (the cross-file pass asks for every prefix of a file in one go)."""
    present = {d for b in blocks for d in b.domains()}
    where = tuple(
        (id(b), b.old_index, len(b.old), len(b.new), *(v.domain for v in (*b.old_domains, *b.new_domains)))
        for b in blocks
    )
    out = []
    for chosen in chosens:
        key = (blocks[0].path, frozenset(present & chosen), where)
        if key not in memo:
            if len(memo) > 4096:
                memo.clear()
            memo[key] = compose(state, blocks, chosen)
        out.append(memo[key])
    return out


def _extend(out: list[str], piece: list[str]) -> None:
    """Append lines; a line that lacked its newline because it ended a file (of the base or of the
    replay) gets one when an intermediate state puts more lines after it."""
    if piece and out and not out[-1].endswith("\n"):
        out[-1] += "\n"
    out += piece


def split_replay(replay: Replay, base: BaseTree, domains: list[Domain], prefix: str,
                 pin: Pin | None = None, overlay_threshold: float | None = None,
                 background_checks: bool = False, labels: list[LabelRule] | None = None,
                 ) -> SplitResult:  # fmt: skip
    """One patch per domain; with ``overlay_threshold``, new and largely rewritten files of a
    domain's step become whole-file overlays listed after its patch instead of diffs.

    With ``background_checks`` the check that every step leaves Python files parsable runs beside
    the caller (see ``stepcheck``): call ``finish()`` on the result before reading its warnings.

    With ``labels`` (the base's mergify labels, possibly empty) what the rules leave unclaimed goes
    to vLLM's labels and directories, and tests to the code they test (``split/upstream.py``)."""
    states = replay_onto_base(replay, base, prefix)
    if labels is not None:
        changed = {p: s.post if s.post is not None else s.base for p, s in states.items()
                   if s.base != s.post or s.base_mode != s.post_mode}  # fmt: skip
        domains = extend_domains(domains, labels, changed)
    classifier = Classifier(domains)
    sizes = sum(len(s.base or b"") + len(s.post or b"") for s in states.values())
    with scratch_dir("patchkit-split-", sizes * (2 + len(domains))) as tmp:
        work = Path(tmp)
        blocks = net_blocks(states, classifier, work)
        if not blocks:
            raise UserError(
                "the replay makes no net change to the base",
                replay.sources[0] if replay.sources else None,
            )
        order = [d.name for d in domains if any(d.name in b.domains() for b in blocks)]
        by_file: dict[str, list[Block]] = {}
        for block in blocks:
            by_file.setdefault(block.path, []).append(block)

        composed: dict[tuple, Side] = {}

        def state_of(path: str, chosen: set[str]) -> bytes | None:
            return composed_state(composed, states[path], by_file[path], chosen)[0]

        def states_of(path: str, chosens: list[set[str]]) -> list[bytes | None]:
            return [side[0] for side in composed_states(composed, states[path], by_file[path], chosens)]

        resolutions: list[dict] = []
        check = None
        for _ in range(4):  # name moves and cross-file moves until nothing moves (bounded)
            if follow_definitions(blocks, order, state_of):
                order = [name for name in order if any(name in b.domains() for b in blocks)]
            check = check or CrossFile(base, blocks, state_of, states_of)
            order, found, needs = resolve(base, blocks, order, state_of, check=check)  # across files
            resolutions += found
            if not found:
                break
        order = [name for name in order if any(name in b.domains() for b in blocks)]
        steps = []
        per_step: dict[int, list[FilePatch]] = {}
        by_git: list[tuple[str, Side, Side]] = []  # the rare steps stepdiff cannot write
        paths = sorted(by_file, key=lambda p: p.split("/"))  # git's order: directory by directory
        for k, name in enumerate(order):
            before, after = set(order[:k]), set(order[: k + 1])
            for path in paths:
                file_blocks = by_file[path]
                if not any(name in b.domains() for b in file_blocks):
                    continue
                state = states[path]
                old = composed_state(composed, state, file_blocks, before)
                new = composed_state(composed, state, file_blocks, after)
                steps.append((f"{k:04d}/{path}", old, new))
                try:
                    fp = step_file_patch(path, state.base_lines, file_blocks, name, before, old, new)
                except NotRepresentable:
                    by_git.append(steps[-1])
                    continue
                if fp is not None:
                    per_step.setdefault(k, []).append(fp)
        checks = start(steps, order, {path: st.post for path, st in states.items()})  # compile() each
        if by_git:
            for fp in diff_pairs(by_git, work / "steps", context=3):
                k, _, _ = fp.path.partition("/")
                fp.old_path = fp.old_path.split("/", 1)[1] if fp.old_path else None
                fp.new_path = fp.new_path.split("/", 1)[1] if fp.new_path else None
                per_step.setdefault(int(k), []).append(fp)
            for files in per_step.values():
                files.sort(key=lambda fp: fp.path.split("/"))
    step_overlays: dict[int, dict[str, Overlay]] = {}
    if overlay_threshold is not None:
        sides = {key: (before, after) for key, before, after in steps}
        for k, files in per_step.items():
            step_overlays[k] = take_overlays(k, order[k], files, sides, overlay_threshold)
    patches = []
    for k, name in enumerate(order):
        domain = classifier.by_name(name)
        commits = sorted({c for b in blocks if name in b.domains() for c in b.commits_for(name)})
        filename = f"{k + 1:04d}-{name}.patch"
        patches.append(SplitPatch(number=k + 1, domain=name, title=domain.title, filename=filename,
                                  files=per_step.get(k, []), source_commits=commits,
                                  tests=list(domain.tests)))  # fmt: skip
        if k in step_overlays:
            patches[-1].overlays = list(step_overlays[k])
    series = Series(base=pin or Pin(source="path", path=str(base.root)), patches=patches,
                    commits=replay.commits, assignments=assignments(blocks),
                    absorbed=absorbed_commits(replay, patches),
                    path_prefix=prefix, resolutions=resolutions)  # fmt: skip
    for need in needs:  # what no step could resolve: the user needs the definer first
        for patch in patches:
            if patch.domain == need.user and need.definer not in patch.depends_on:
                patch.depends_on.append(need.definer)
                patch.needs_why[need.definer] = need.problem.text()
    texts = {p.filename: render_diff(p.files) for p in patches}
    overlays = {name: o for found in step_overlays.values() for name, o in found.items()}
    result = SplitResult(series=series, texts=texts, states=states, overlays=overlays, checks=checks)
    if not background_checks:
        result.finish()
    return result
