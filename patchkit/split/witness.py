"""git as the proof's independent witness: the original replay and the written series, each applied
by ``git apply --cached`` to a temporary index of the base's touched files, must write the same tree.

No worktree is written: a scratch bare repository holds the objects, ``GIT_INDEX_FILE`` the index.
patchkit's own expected tree (base + replay as patchkit computed it) gets a tree id the same way,
so the three ids can be compared side by side.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from patchkit import git
from patchkit.base.tree import BaseTree
from patchkit.tmpdir import scratch_dir

_MAIL_START = re.compile(rb"^From [0-9a-f]{40} Mon Sep 17 00:00:00 2001$", re.M)


@dataclass
class Witness:
    ran: bool
    ok: bool
    replay_tree: str | None = None  # git apply of the original replay
    series_tree: str | None = None  # git apply of the written series
    patchkit_tree: str | None = None  # patchkit's own base + replay, as a git tree
    first_difference: str | None = None
    reason: str = ""  # why it could not run, or what git refused

    def to_dict(self) -> dict:
        return {
            "ran": self.ran,
            "ok": self.ok,
            "replay_tree": self.replay_tree,
            "series_tree": self.series_tree,
            "patchkit_tree": self.patchkit_tree,
            "first_difference": self.first_difference,
            "reason": self.reason,
            "method": "git apply --cached of the replay, and of the series, each into a temporary "
            "index of the base's touched files; git write-tree of each",
        }


def witness(base: BaseTree, replays: list[Path], prefix: str, series: list[Path],
            expected: dict[str, tuple[bytes | None, str | None]]) -> Witness:  # fmt: skip
    """``expected``: every touched path (repo-relative) → patchkit's content and mode after the replay."""
    with scratch_dir("patchkit-witness-", 0) as tmp:
        work = Path(tmp)
        env = {"GIT_DIR": str(work / "objects.git")}
        _git(["init", "-q", "--bare", env["GIT_DIR"]], work, {})
        present = sorted(p for p in expected if base.mode(p))
        listing = "".join(f"{base.root / p}\n" for p in present).encode("utf-8", "surrogateescape")
        blobs = _git(["hash-object", "-w", "--stdin-paths"], work, env, listing).split()
        index_info = "".join(f"{base.mode(p)} {b.decode()}\t{p}\n" for p, b in zip(present, blobs))
        mails = _split_mails(replays, work)
        directory = [f"--directory={prefix.rstrip('/')}"] if prefix else []
        replay_tree, refused = _applied_tree(work, env, index_info, "replay", [*directory, *mails])
        if replay_tree is None:
            return Witness(False, False, reason=f"git apply refused the replay: {refused}")
        written = [str(p.resolve()) for p in series]
        series_tree, refused = _applied_tree(work, env, index_info, "series", written)
        ours = "".join(f"{m or '100644'} {git.blob_id(d)}\t{p}\n" for p, (d, m) in sorted(expected.items())
                       if d is not None)  # fmt: skip
        patchkit_tree = _tree(work, env, ours, "patchkit", missing_ok=True)
        if series_tree is None:
            return Witness(True, False, replay_tree, None, patchkit_tree, None,
                           f"git apply refused the series: {refused}")  # fmt: skip
        first = None
        if replay_tree != series_tree or replay_tree != patchkit_tree:
            other = series_tree if replay_tree != series_tree else patchkit_tree
            names = _git(["diff-tree", "-r", "--name-only", "-z", replay_tree, other], work, env)
            first = names.split(b"\0")[0].decode("utf-8", "surrogateescape") or "?"
        return Witness(True, first is None, replay_tree, series_tree, patchkit_tree, first)


def _split_mails(replays: list[Path], work: Path) -> list[str]:
    """The replay as files git apply takes one after the other: one per mail of an mbox."""
    out = []
    for replay in replays:
        data = replay.read_bytes()  # written out again: cwd-independent
        starts = [m.start() for m in _MAIL_START.finditer(data)] or [0]
        starts[0] = 0
        for k, (a, b) in enumerate(zip(starts, [*starts[1:], len(data)])):
            path = work / f"replay-{len(out):04d}-{k}.patch"
            path.write_bytes(data[a:b])
            out.append(str(path))
    return out


def _applied_tree(work: Path, env: dict[str, str], index_info: str, name: str,
                  args: list[str]) -> tuple[str | None, str]:  # fmt: skip
    index_env = {**env, "GIT_INDEX_FILE": str(work / f"{name}.index")}
    _git(["update-index", "--add", "--index-info"], work, index_env, _encoded(index_info))
    proc = _run(["apply", "--cached", "--whitespace=nowarn", *args], work, index_env)
    if proc.returncode != 0:
        return None, proc.stderr.decode(errors="replace").strip().splitlines()[0]
    return _git(["write-tree"], work, index_env).decode().strip(), ""


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _tree(work: Path, env: dict[str, str], index_info: str, name: str, missing_ok: bool = False) -> str:
    index_env = {**env, "GIT_INDEX_FILE": str(work / f"{name}.index")}
    _git(["update-index", "--add", "--index-info"], work, index_env, _encoded(index_info))
    args = ["write-tree", "--missing-ok"] if missing_ok else ["write-tree"]
    return _git(args, work, index_env).decode().strip()


def _run(args: list[str], cwd: Path, env: dict[str, str], data: bytes | None = None):
    return git.run(args, cwd, input=data, check=False, env=env)


def _git(args: list[str], cwd: Path, env: dict[str, str], data: bytes | None = None) -> bytes:
    return git.run(args, cwd, input=data, env=env).stdout
