"""Differential cases: random trees and edits, written by real ``git diff`` / ``git format-patch`` /
GNU ``diff``; ``git apply`` is the oracle for what patchkit parses and applies.

Per case: a base tree and an edited tree (seeded), one writer with random options, then
- parse: patchkit's file list, modes and line counts == ``git apply --numstat --summary``;
- apply: patchkit's engine on the base == ``git apply --cached`` into an index of the base, file by
  file (mode and blob id of ``git ls-tree -r`` of ``git write-tree``);
- what git refuses, patchkit refuses too.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from patchkit import git as pkgit
from patchkit.diff.engine import apply_files
from patchkit.diff.hunks import HunkMismatch
from patchkit.diff.names import unquote
from patchkit.diff.parse import parse_text
from patchkit.errors import UserError

ENV = {
    **os.environ,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "Gen Erator",
    "GIT_AUTHOR_EMAIL": "gen@example.org",
    "GIT_COMMITTER_NAME": "Gen Erator",
    "GIT_COMMITTER_EMAIL": "gen@example.org",
    "GIT_AUTHOR_DATE": "2001-02-03T04:05:06Z",
    "GIT_COMMITTER_DATE": "2001-02-03T04:05:06Z",
    "LC_ALL": "C",
}
WORDS = ["alpha", "beta", "gamma", "delta", "return x", "pass", "", "    y = 1", "# note", "}", "{"]
PLAIN = ["a.py", "b.txt", "dir/c.py", "dir/sub/d.py", "e", "x/y/z.cfg"]
FUNNY = ["with space.py", "tab\there.txt", 'quo"te.py', "uni\u00e9\u4e2d.py", "dir/sp ace/f.py",
         "back\\slash.txt", "a/b.py", "b/a.py"]  # fmt: skip
Files = dict[str, tuple[bytes, str]]  # path -> (content, git mode)


@dataclass
class Case:
    seed: int
    writer: str
    base: Files
    patch: bytes
    strip: int = 1
    problems: list[str] = field(default_factory=list)


def _git(args: list[str], cwd: Path, data: bytes | None = None, env: dict | None = None) -> bytes:
    proc = subprocess.run(["git", *args], cwd=cwd, input=data, capture_output=True, env=env or ENV)
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and args[0] != "diff"):
        raise RuntimeError(f"git {args[:3]} failed: {proc.stderr.decode(errors='replace')[:300]}")
    return proc.stdout


def _content(rng: random.Random, n: int | None = None) -> bytes:
    lines = [rng.choice(WORDS) + (f" {rng.randrange(50)}" if rng.random() < 0.5 else "")
             for _ in range(n if n is not None else rng.randrange(0, 40))]  # fmt: skip
    text = "\n".join(lines)
    if lines and rng.random() < 0.85:
        text += "\n"
    if rng.random() < 0.05:
        text = text.replace("\n", "\r\n")
    return text.encode()


def _edit(rng: random.Random, data: bytes) -> bytes:
    lines = data.split(b"\n")
    for _ in range(rng.randrange(1, 4)):
        at = rng.randrange(len(lines) + 1)
        op = rng.random()
        if op < 0.4:
            lines[at:at] = [rng.choice(WORDS).encode() + b" new" for _ in range(rng.randrange(1, 4))]
        elif op < 0.7 and lines:
            del lines[min(at, len(lines) - 1) : min(at, len(lines) - 1) + rng.randrange(1, 3)]
        elif lines:
            lines[min(at, len(lines) - 1)] = b"changed " + str(rng.randrange(99)).encode()
    out = b"\n".join(lines)
    if rng.random() < 0.1:
        out = out.rstrip(b"\n") if out.endswith(b"\n") else out + b"\n"
    return out


def make_trees(rng: random.Random, gnu: bool, no_prefix: bool = False) -> tuple[Files, Files]:
    names = PLAIN + (FUNNY if not gnu or rng.random() < 0.5 else [])
    names = [n for n in names if not gnu or "\t" not in n]
    # the one ambiguity: a --no-prefix diff of only creations/deletions under a/ b/ c/ i/ w/ o/ reads as
    # prefixed (git apply's -p1); documented in docs/guarantees.md, so not generated here
    names = [n for n in names if not no_prefix or n.split("/")[0] not in "abciwo"]
    base: Files = {}
    for name in rng.sample(names, rng.randrange(1, 6)):
        if any(other.startswith(name + "/") or name.startswith(other + "/") for other in base):
            continue
        mode = "100755" if rng.random() < 0.15 else "100644"
        if not gnu and rng.random() < 0.07:
            base[name] = (rng.choice([b"target", b"dir/c.py", b"nowhere"]), "120000")
        else:
            base[name] = (_content(rng, rng.randrange(3, 40)), mode)
    head: Files = dict(base)
    for name in list(base):
        roll = rng.random()
        data, mode = base[name]
        if mode == "120000":
            if roll < 0.5:
                head[name] = (data + b"2", mode)
            continue
        if roll < 0.45:
            head[name] = (_edit(rng, data), mode)
        elif roll < 0.55:
            del head[name]
        elif roll < 0.7:
            new = _free_name(rng, names, head)
            if new:
                del head[name]
                head[new] = (data if rng.random() < 0.5 else _edit(rng, data), mode)
        elif roll < 0.8:
            new = _free_name(rng, names, head)
            if new:
                head[new] = (data if rng.random() < 0.5 else _edit(rng, data), mode)
                if rng.random() < 0.5:
                    head[name] = (_edit(rng, data), mode)
        elif roll < 0.9 and not gnu:
            head[name] = (data, "100644" if mode == "100755" else "100755")
    if rng.random() < 0.4:
        new = _free_name(rng, names, head)
        if new:
            head[new] = (_content(rng), "100755" if rng.random() < 0.1 and not gnu else "100644")
    return base, head


def add_binary(rng: random.Random, base: Files, head: Files) -> None:
    """A file with NUL bytes, changed (small edit: a delta; rewrite: a literal), created or deleted."""
    blob = bytes(rng.randrange(256) for _ in range(rng.randrange(20, 600))) + b"\0"
    roll = rng.random()
    if roll < 0.6:
        base["blob.bin"] = head["blob.bin"] = (blob, "100644")
        edited = bytearray(blob)
        for _ in range(rng.randrange(1, 4)):
            edited[rng.randrange(len(edited))] = rng.randrange(256)
        head["blob.bin"] = (bytes(edited) if rng.random() < 0.7 else blob[::-1] + b"tail", "100644")
    elif roll < 0.8:
        head["new.bin"] = (blob, "100644")
    else:
        base["old.bin"] = (blob, "100644")


def _free_name(rng: random.Random, names: list[str], tree: Files) -> str | None:
    for _ in range(10):
        name = rng.choice(names + [f"new{rng.randrange(9)}.py", f"dir/new{rng.randrange(9)}.py"])
        if name not in tree and not any(o.startswith(name + "/") or name.startswith(o + "/") for o in tree):
            return name
    return None


def _write_tree(root: Path, files: Files) -> None:
    for name, (data, mode) in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if mode == "120000":
            os.symlink(data.decode(), path)
        else:
            path.write_bytes(data)
            path.chmod(0o755 if mode == "100755" else 0o644)


def _commit(repo: Path, files: Files, message: str) -> None:
    for entry in repo.iterdir():
        if entry.name != ".git":
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    _write_tree(repo, files)
    _git(["add", "-A", "."], repo)
    _git(["commit", "-q", "--allow-empty", "-m", message], repo)


GIT_WRITERS = ["diff", "diff-M", "diff-C", "diff-CC", "no-prefix", "custom-prefix", "mnemonic",
               "binary", "format-patch", "attach", "inline", "unified0", "full-index"]  # fmt: skip


def write_patch(rng: random.Random, work: Path, base: Files, head: Files, writer: str) -> tuple[bytes, int]:
    """Write base → head with the given writer; (patch bytes, strip level git needs)."""
    if writer == "gnu":
        for side, files in (("a", base), ("b", head)):
            _write_tree(work / side, files)
        args = ["diff", "-urN"] if rng.random() < 0.7 else ["diff", "-ruN", "-U5"]
        proc = subprocess.run([*args, "a", "b"], cwd=work, capture_output=True, env=ENV)
        if proc.returncode > 1:
            raise RuntimeError(proc.stderr.decode(errors="replace"))
        return proc.stdout, 1
    repo = work / "repo"
    repo.mkdir()
    _git(["init", "-q", "-b", "main"], repo)
    _git(["config", "core.quotepath", "true"], repo)
    _commit(repo, base, "base")
    _git(["tag", "base"], repo)
    _commit(repo, head, "the change\n\nA body line.\n\nSigned-off-by: Gen Erator <gen@example.org>")
    opts = {
        "diff": [], "diff-M": ["-M"], "diff-C": ["-C"], "diff-CC": ["-C", "-C"],
        "no-prefix": ["--no-prefix", "-M"],
        "custom-prefix": ["--src-prefix=old/", "--dst-prefix=new/", "-M"], "binary": ["--binary", "-M"],
        "unified0": ["-U0"], "full-index": ["--full-index", "-C"],
    }  # fmt: skip
    if writer in opts:
        return _git(["diff", *opts[writer], "HEAD~1", "HEAD"], repo), 0 if writer == "no-prefix" else 1
    if writer == "mnemonic":  # index vs HEAD~1 with mnemonic prefixes (c/ i/)
        _git(["reset", "-q", "--soft", "HEAD~1"], repo)
        return _git(["-c", "diff.mnemonicPrefix=true", "diff", "--cached", "-M"], repo), 1
    extra = {"format-patch": ["-M", "-C"], "attach": ["--attach"], "inline": ["--inline", "-M"]}[writer]
    return _git(["format-patch", "-1", "--stdout", *extra, "HEAD"], repo), 1


def git_oracle(work: Path, base: Files, patch: bytes, strip: int) -> tuple[dict | None, Files | None, str]:
    """git's reading of ``patch`` on ``base``: (per-file numstat/summary, resulting tree) or the refusal.

    The writer's repository serves when there is one (its ``base`` tag); neither --numstat nor
    --cached reads its worktree."""
    repo = work / "repo"
    if not repo.is_dir():
        repo.mkdir()
        _git(["init", "-q", "-b", "main"], repo)
        _commit(repo, base, "base")
        _git(["tag", "base"], repo)
    (work / "p.patch").write_bytes(patch)
    args = ["apply", f"-p{strip}", "--whitespace=nowarn"]
    proc = subprocess.run(["git", *args, "--numstat", "--summary", "-z", str(work / "p.patch")],
                          cwd=repo, capture_output=True, env=ENV)  # fmt: skip
    if proc.returncode != 0:
        return None, None, proc.stderr.decode(errors="replace").strip()
    stat = _numstat(proc.stdout)
    env = {**ENV, "GIT_INDEX_FILE": str(work / "oracle.index")}
    _git(["read-tree", "base"], repo, env=env)
    proc = subprocess.run(
        ["git", *args, "--cached", str(work / "p.patch")], cwd=repo, capture_output=True, env=env
    )
    if proc.returncode != 0:
        return stat, None, proc.stderr.decode(errors="replace").strip()
    tree = _git(["write-tree"], repo, env=env).decode().strip()
    files: Files = {}
    for entry in _git(["ls-tree", "-r", "-z", tree], repo).split(b"\0"):
        if entry:
            meta, _, path = entry.partition(b"\t")
            mode, _, blob = meta.decode().split(" ")
            files[path.decode("utf-8", errors="surrogateescape")] = (blob.encode(), mode)
    return stat, files, ""


def _numstat(out: bytes) -> dict:
    """``--numstat --summary -z``: {path after: (added, removed)} and the summary's mode lines."""
    counts: dict[str, tuple[str, str]] = {}
    parts = out.split(b"\0")
    i = 0
    summary = b""
    while i < len(parts):
        part = parts[i]
        if not part:
            i += 1
            continue
        if part.startswith(b" ") or b"\n " in part:  # the summary follows the last record
            summary = part
            break
        added, removed, path = part.split(b"\t", 2)
        if path:
            counts[path.decode("utf-8", errors="surrogateescape")] = (added.decode(), removed.decode())
            i += 1
        else:
            counts[parts[i + 2].decode("utf-8", errors="surrogateescape")] = (
                added.decode(),
                removed.decode(),
            )
            i += 3
    modes = sorted(
        m.group(0) for m in re.finditer(r"(create|delete) mode \d+|mode change \d+ => \d+", summary.decode())
    )
    return {"counts": counts, "modes": modes}


def patchkit_reading(text: str) -> tuple[dict, list]:
    patches = parse_text(text, "case.patch")
    counts: dict[str, tuple[str, str]] = {}
    modes = []
    for patch in patches:
        for fp in patch.files:
            counts[fp.new_path or fp.old_path or ""] = (
                ("-", "-") if fp.binary else (str(fp.added), str(fp.removed))
            )
            if fp.is_new and fp.new_mode:  # a traditional diff says no mode: git's summary neither
                modes.append(f"create mode {fp.new_mode}")
            elif fp.is_deleted and fp.old_mode:
                modes.append(f"delete mode {fp.old_mode}")
            elif fp.old_mode and fp.new_mode and fp.old_mode != fp.new_mode:
                modes.append(f"mode change {fp.old_mode} => {fp.new_mode}")
    return {"counts": counts, "modes": sorted(modes)}, patches


def patchkit_apply(base: Files, patches: list) -> Files:
    tree: dict[str, tuple[bytes | None, str | None]] = dict(base)
    for patch in patches:
        outcome = apply_files(patch.files, lambda p: tree.get(p, (None, None)))
        tree.update(outcome.files)
    return {p: (pkgit.blob_id(d).encode(), m or "") for p, (d, m) in tree.items() if d is not None}


def run_case(seed: int, root: Path, writer: str | None = None) -> Case:
    rng = random.Random(seed)
    writer = writer or rng.choice([*GIT_WRITERS, "gnu", "gnu"])
    work = root / f"case{seed}"
    work.mkdir()
    try:
        base, head = make_trees(rng, gnu=writer == "gnu", no_prefix=writer == "no-prefix")
        if writer in ("binary", "diff") and rng.random() < 0.5:  # with --binary: applied; without: refused
            add_binary(rng, base, head)
        patch, strip = write_patch(rng, work, base, head, writer)
        case = Case(seed, writer, base, patch, strip)
        if not patch.strip():
            return case
        stat, tree, refusal = git_oracle(work, base, patch, strip)
        text = patch.decode("utf-8", errors="surrogateescape")
        try:
            reading, patches = patchkit_reading(text)
            ours = patchkit_apply(base, patches)
        except (UserError, HunkMismatch, ValueError) as exc:
            if tree is not None:
                case.problems.append(f"patchkit refused what git applies: {exc}")
            return case
        if stat is not None and reading != stat:
            case.problems.append(f"parse differs: git {stat} patchkit {reading}")
        if tree is None:
            case.problems.append(f"git refused ({refusal}) but patchkit applied")
        elif ours != tree:
            diff = sorted(set(ours.items()) ^ set(tree.items()))
            case.problems.append(f"tree differs at {diff[:3]}")
        return case
    finally:
        shutil.rmtree(work, ignore_errors=True)


__all__ = ["Case", "run_case", "GIT_WRITERS", "unquote"]
