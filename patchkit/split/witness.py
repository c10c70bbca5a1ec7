"""git as the proof's independent witness: the original replay and the written series, each applied
by ``git apply --cached`` to a temporary index of the base's touched files, must write the same tree.

No worktree is written: a scratch bare repository holds the objects, ``GIT_INDEX_FILE`` the index.
The replay's side runs in a thread beside the split (git works on the other core); the series'
side once the patches are written. patchkit's own expected tree (base + replay as patchkit
computed it) gets its git tree id too, so the three ids can be compared side by side.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from patchkit import git
from patchkit.base.tree import BaseTree
from patchkit.diff.model import Replay
from patchkit.tmpdir import scratch_root

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


class PendingWitness:
    """The replay's side, started in a thread; ``finish`` adds the series' side and compares."""

    def __init__(self, base: BaseTree, replays: list[Path], replay: Replay, prefix: str) -> None:
        need = 8 * sum(p.stat().st_size for p in replays)  # uncompressed objects of every state
        self.work = Path(tempfile.mkdtemp(prefix="patchkit-witness-", dir=scratch_root(need)))
        self.env = {"GIT_DIR": str(self.work / "objects.git")}
        self.replay_tree: str | None = None
        self.refused = ""
        self.series_tree: str | None = None
        self.series_refused = "the series was not handed to git"
        self.error: BaseException | None = None
        files = [fp for patch in replay.patches for fp in patch.files]
        paths = {prefix + p for fp in files for p in (fp.old_path, fp.new_path) if p}
        # one git apply input per mail only where order inside a file matters to git: a copy or
        # rename reads the state before its input (git's previous_patch), a later change does not
        whole = None if any(fp.is_copy or fp.is_rename for fp in files) else replays
        side = (base, whole, prefix, paths, replays)
        self.thread = threading.Thread(target=self._replay_side, args=side, daemon=True)
        self.thread.start()

    def _replay_side(self, base: BaseTree, whole: list[Path] | None, prefix: str, paths: set[str],
                     replays: list[Path]) -> None:  # fmt: skip
        try:
            _git(["init", "-q", "--bare", "--template=", self.env["GIT_DIR"]], self.work, {})
            present = sorted(p for p in paths if base.mode(p))
            listing = "".join(f"{base.root / p}\n" for p in present)
            blobs = _git(
                ["hash-object", "-w", "--stdin-paths"], self.work, self.env, _encoded(listing)
            ).split()
            info = "".join(f"{base.mode(p)} {b.decode()}\t{p}\n" for p, b in zip(present, blobs))
            _git(["update-index", "--add", "--index-info"], self.work, self._index("base"), _encoded(info))
            if (self.work / "base.index").is_file():  # none when the replay only adds files
                shutil.copyfile(self.work / "base.index", self.work / "series.index")
            directory = [f"--directory={prefix.rstrip('/')}"] if prefix else []
            mails = _split_mails(replays, self.work) if whole is None else []
            inputs = [str(p.resolve()) for p in whole] if whole is not None else mails
            args = [*directory, *inputs]
            self.replay_tree, self.refused = _applied_tree(self.work, self._index("base"), args)
        except BaseException as exc:  # reported by finish, in the main thread
            self.error = exc

    def _index(self, name: str) -> dict[str, str]:
        return {**self.env, "GIT_INDEX_FILE": str(self.work / f"{name}.index")}

    def start_series(self, series: list[Path]) -> None:
        """The series' side, in a thread too (beside patchkit's own proof): after the replay's."""
        written = [str(p.resolve()) for p in series]
        replay_side = self.thread

        def series_side() -> None:
            replay_side.join()
            if self.error is None and self.replay_tree is not None:
                try:
                    self.series_tree, self.series_refused = _applied_tree(
                        self.work, self._index("series"), written
                    )
                except BaseException as exc:  # reported by finish, in the main thread
                    self.error = exc

        self.thread = threading.Thread(target=series_side, daemon=True)
        self.thread.start()

    def finish(self, expected: dict[str, tuple[bytes | None, str | None]]) -> Witness:
        """``expected``: every touched path → patchkit's content and mode after the replay."""
        try:
            self.thread.join()
            if self.error is not None:
                raise self.error
            if self.replay_tree is None:
                return Witness(False, False, reason=f"git apply refused the replay: {self.refused}")
            mine = {p: (m or "100644", git.blob_id(d)) for p, (d, m) in expected.items() if d is not None}
            ours = tree_id(mine)
            series_tree = self.series_tree
            if series_tree is None:
                return Witness(True, False, self.replay_tree, None, ours, None,
                               f"git apply refused the series: {self.series_refused}")  # fmt: skip
            first = None
            if self.replay_tree != series_tree or self.replay_tree != ours:
                first = self._first_difference(series_tree if self.replay_tree != series_tree else None, mine)
            return Witness(True, first is None, self.replay_tree, series_tree, ours, first)
        finally:
            self.cancel()

    def _first_difference(self, other: str | None, mine: dict[str, tuple[str, str]]) -> str:
        if other is not None:
            names = _git(
                ["diff-tree", "-r", "--name-only", "-z", self.replay_tree or "", other], self.work, self.env
            )
            return names.split(b"\0")[0].decode("utf-8", "surrogateescape") or "?"
        listed = _git(["ls-tree", "-r", "-z", self.replay_tree or ""], self.work, self.env).split(b"\0")
        theirs = {}
        for row in filter(None, listed):
            meta, _, path = row.partition(b"\t")
            mode, _, sha = meta.decode().split(" ")
            theirs[path.decode("utf-8", "surrogateescape")] = (mode, sha)
        return next((p for p in sorted(set(theirs) | set(mine)) if theirs.get(p) != mine.get(p)), "?")

    def cancel(self) -> None:
        self.thread.join()
        shutil.rmtree(self.work, ignore_errors=True)


def tree_id(files: dict[str, tuple[str, str]]) -> str:
    """The git tree id of {path: (mode, blob id)}, computed as git does (no process)."""
    entries: dict[str, tuple[str, str] | dict] = {}
    for path, value in files.items():
        node = entries
        *dirs, name = path.split("/")
        for part in dirs:
            node = node.setdefault(part, {})  # type: ignore[assignment]
        node[name] = value
    return _tree_of(entries)


def _tree_of(entries: dict) -> str:
    body = b""
    for name in sorted(entries, key=lambda n: n + "/" if isinstance(entries[n], dict) else n):
        value = entries[name]
        mode, sha = ("40000", _tree_of(value)) if isinstance(value, dict) else value
        body += f"{mode} ".encode() + name.encode("utf-8", "surrogateescape") + b"\0" + bytes.fromhex(sha)
    return hashlib.sha1(b"tree %d\0" % len(body) + body).hexdigest()


def _split_mails(replays: list[Path], work: Path) -> list[str]:
    """The replay as files git apply takes one after the other: one per mail of an mbox."""
    out = []
    for replay in replays:
        data = replay.read_bytes()
        starts = [m.start() for m in _MAIL_START.finditer(data)] or [0]
        starts[0] = 0
        for a, b in zip(starts, [*starts[1:], len(data)]):
            path = work / f"replay-{len(out):04d}.patch"
            path.write_bytes(data[a:b])
            out.append(str(path))
    return out


def _applied_tree(work: Path, env: dict[str, str], args: list[str]) -> tuple[str | None, str]:
    proc = git.run([*_FAST, "apply", "--cached", "--whitespace=nowarn", *args], work, check=False, env=env)
    if proc.returncode != 0:
        return None, (proc.stderr.decode(errors="replace").strip().splitlines() or ["?"])[0]
    return _git(["write-tree"], work, env).decode().strip(), ""


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


_FAST = ["-c", "core.compression=0", "-c", "core.loosecompression=0"]  # scratch objects: no zlib work


def _git(args: list[str], cwd: Path, env: dict[str, str], data: bytes | None = None) -> bytes:
    return git.run([*_FAST, *args], cwd, input=data, env=env).stdout
