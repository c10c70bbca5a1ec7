"""Property: for random bases, commits and rules, the split is lossless and well ordered."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from patchkit.analysis.depends import compute_dependencies
from patchkit.base.tree import BaseTree
from patchkit.diff.parse import parse_text
from patchkit.series.files import load_entries, write_series
from patchkit.split.proof import prove
from patchkit.split.replay import split_replay
from patchkit.split.rules import parse_rules

TOKENS = ["alpha", "beta", "gamma", "delta"]
FILES = ["pkg/f0.txt", "pkg/f1.txt", "pkg/sub/f2.txt"]
GLOBS = ["pkg/f0.txt", "pkg/*.txt", "pkg/**", "pkg/sub/*.txt", "pkg/f1.txt"]

line = st.one_of(
    st.builds(lambda t, n: f"{t} {n}", st.sampled_from(TOKENS), st.integers(0, 6)),
    st.sampled_from(["# note", "", "pass"]),
)
content = st.lists(line, min_size=1, max_size=12)


@st.composite
def edit(draw, lines: list[str]) -> list[str]:
    """One insert / delete / replace of a few lines at a random spot."""
    out = list(lines)
    at = draw(st.integers(0, len(out)))
    kind = draw(st.sampled_from(["insert", "delete", "replace"]))
    span = draw(st.integers(1, 3))
    new = draw(st.lists(line, min_size=1, max_size=3))
    if kind == "insert" or not out:
        out[at:at] = new
    elif kind == "delete":
        out[at : at + span] = []
    else:
        out[at : at + span] = new
    return out or ["pass"]


@st.composite
def scenario(draw):
    base = {path: draw(content) for path in draw(st.lists(st.sampled_from(FILES), min_size=1, unique=True))}
    eol = {path: draw(st.booleans()) for path in base}  # False: no newline at end of file
    states = [dict(base)]
    for _ in range(draw(st.integers(1, 4))):
        current = dict(states[-1])
        for path in draw(st.lists(st.sampled_from(sorted(base)), min_size=1, unique=True)):
            for _ in range(draw(st.integers(1, 3))):
                current[path] = draw(edit(current[path]))
        states.append(current)
    domains = []
    for i in range(draw(st.integers(1, 3))):
        globs = draw(st.lists(st.sampled_from(GLOBS), min_size=1, max_size=2, unique=True))
        patterns = draw(st.lists(st.sampled_from(TOKENS), max_size=2, unique=True))
        pats = ", ".join(f"'\\b{p}\\b'" for p in patterns)
        table = f'[[domain]]\nname = "d{i}"\npaths = {globs!r}\n'
        domains.append(table + (f"patterns = [{pats}]\n" if patterns else ""))
    domains.append('[[domain]]\nname = "rest"\nfallback = true\n')
    return states, eol, "\n".join(domains)


def render(lines: list[str], eol: bool) -> bytes:
    return ("\n".join(lines) + ("\n" if eol else "")).encode()


def write_tree(root: Path, files: dict[str, list[str]], eol: dict[str, bool]) -> None:
    for path, lines in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(render(lines, eol[path]))


def git(args: list[str], cwd: Path, data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=cwd, input=data, capture_output=True)


def commit_diff(work: Path, old: dict, new: dict, eol: dict) -> str:
    for side, files in (("a", old), ("b", new)):
        subprocess.run(["rm", "-rf", str(work / side)], check=True)
        write_tree(work / side, files, eol)
    # --no-prefix: the side directories a/ and b/ become the usual a/ b/ prefixes
    proc = git(["diff", "--no-index", "--no-color", "--no-renames", "--no-prefix", "a", "b"], work)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.stdout.decode()


def read_tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_split_is_lossless_and_ordered(case) -> None:
    states, eol, rules = case
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        base_dir, out = work / "base", work / "out"
        write_tree(base_dir, states[0], eol)
        patches = []
        for k in range(1, len(states)):
            text = commit_diff(work, states[k - 1], states[k], eol)
            if text:
                header = f"From: Dev {k} <dev{k}@example.com>\nSubject: [PATCH] change {k}\n\n"
                patches += parse_text(header + text, f"c{k}.patch")
        if not patches:
            return  # every commit was a no-op
        from patchkit.diff.model import Replay

        replay = Replay(patches=patches, sources=["c.patch"])
        tree = BaseTree(base_dir)
        final = {p: render(lines, eol[p]) for p, lines in states[-1].items()}
        if final == {p: render(lines, eol[p]) for p, lines in states[0].items()}:
            return  # the commits cancel out; split rightly refuses
        result = split_replay(replay, tree, parse_rules(rules, "rules.toml"), "")
        compute_dependencies(tree, result.series.patches)
        write_series(out, result.series, result.texts)
        proof = prove(tree, load_entries(out), result.states)
        assert proof.ok, proof.differences

        # git applies the written series in order and gets base + replay
        names = (out / "series").read_text().split()
        applied = work / "applied"
        write_tree(applied, states[0], eol)
        for name in names:
            proc = git(["apply", "--whitespace=nowarn", "-"], applied, (out / name).read_bytes())
            assert proc.returncode == 0, (name, proc.stderr.decode())
        assert read_tree(applied) == final

        # every changed line lands in exactly one patch: totals equal the net diff's
        numstat = git(["diff", "--no-index", "--numstat", "base", "applied"], work).stdout.decode()
        rows = [row.split("\t")[:2] for row in numstat.splitlines()]
        net_added, net_removed = sum(int(r[0]) for r in rows), sum(int(r[1]) for r in rows)
        assigned = result.series.assignments
        assert sum(a.added for a in assigned) == net_added
        assert sum(a.removed for a in assigned) == net_removed
        added = sum(fp.added for sp in result.series.patches for fp in sp.files)
        removed = sum(fp.removed for sp in result.series.patches for fp in sp.files)
        assert added - removed == net_added - net_removed  # the line count telescopes, always
        if all(eol.values()):
            assert (added, removed) == (net_added, net_removed)
        else:  # a last line without newline must gain one in a state that puts lines after it
            assert added - net_added == removed - net_removed <= len(result.series.patches) * len(eol)
        if all(eol.values()):  # each patch carries exactly the lines assigned to its domain
            for sp in result.series.patches:
                mine = [a for a in assigned if a.domain == sp.domain]
                assert sum(fp.added for fp in sp.files) == sum(a.added for a in mine), sp.domain
                assert sum(fp.removed for fp in sp.files) == sum(a.removed for a in mine), sp.domain

        # dependencies point backwards
        seen: set[str] = set()
        for sp in result.series.patches:
            assert set(sp.depends_on) <= seen, (sp.domain, sp.depends_on)
            seen.add(sp.domain)

        # reverse order, reversed: back to the base
        for name in reversed(names):
            proc = git(["apply", "-R", "--whitespace=nowarn", "-"], applied, (out / name).read_bytes())
            assert proc.returncode == 0, (name, proc.stderr.decode())
        assert read_tree(applied) == {p: render(lines, eol[p]) for p, lines in states[0].items()}
