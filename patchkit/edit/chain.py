"""Rebuild the patch commits: each old commit cherry-picked in memory (``git merge-tree``) onto the
new chain, with the hunks given to it folded in (moved down from the last patch by a 3-way merge,
which is clean exactly when they commute with the patches between)."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from patchkit.edit import gitops
from patchkit.errors import CheckFailed


@dataclass
class Item:
    name: str  # the patch file name
    old: str | None  # its commit in the old chain (None: a new patch)
    old_parent: str | None
    extra: bytes = b""  # a -U0 patch against the old last commit, folded into this one
    info: dict[str, str] | None = None  # identity and message (default: the old commit's)


def _merge(repo: Path, base: str, ours: str, theirs: str, what: str) -> str:
    """A 3-way merge of three trees in a private index (``read-tree -m``, then ``merge-file`` for a
    file both sides changed); CheckFailed naming the files when it does not merge cleanly."""
    fd, index = tempfile.mkstemp(prefix="patchkit-merge-", suffix=".index")
    os.close(fd)
    os.unlink(index)
    env = {"GIT_INDEX_FILE": index}
    try:
        gitops.run(repo, ["read-tree", "-m", "-i", "--aggressive", base, ours, theirs], env=env)
        stages: dict[str, dict[int, tuple[str, str]]] = {}
        for row in filter(None, gitops.run(repo, ["ls-files", "-u", "-z"], env=env).split(b"\0")):
            meta, _, path = row.partition(b"\t")
            mode, sha, stage = meta.decode().split()
            stages.setdefault(path.decode("utf-8", "surrogateescape"), {})[int(stage)] = (mode, sha)
        conflicted = []
        for path, got in sorted(stages.items()):
            merged = _merge_file(repo, got) if {1, 2, 3} <= set(got) and got[2][0] == got[3][0] else None
            if merged is None:
                conflicted.append(path)
                continue
            gitops.run(repo, ["update-index", "--cacheinfo", f"{got[2][0]},{merged},{path}"], env=env)
        if conflicted:
            raise CheckFailed(f"{what} (conflict in {', '.join(conflicted[:3])})")
        return gitops.text(repo, ["write-tree"], env=env)
    finally:
        Path(index).unlink(missing_ok=True)


def _merge_file(repo: Path, got: dict[int, tuple[str, str]]) -> str | None:
    with tempfile.TemporaryDirectory(prefix="patchkit-merge-") as scratch:
        files = []
        for stage in (2, 1, 3):
            path = Path(scratch) / str(stage)
            path.write_bytes(gitops.run(repo, ["cat-file", "blob", got[stage][1]]))
            files.append(str(path))
        proc = gitops.raw(repo, ["merge-file", "-p", "-q", *files], None, {})
        if proc.returncode != 0:
            return None
        return gitops.text(repo, ["hash-object", "-w", "--stdin"], data=proc.stdout)


def rebuild(
    repo: Path, base_commit: str, last: str, items: list[Item], signoff: tuple[str, str] | None = None
) -> list[str]:
    """The new commits, in ``items`` order; ``last`` is the old chain's last commit."""
    last_tree = gitops.tree_of(repo, last)
    previous = base_commit
    out = []
    for item in items:
        tree = gitops.tree_of(repo, previous)
        if item.old is not None:
            if item.old_parent == previous:
                tree = gitops.tree_of(repo, item.old)
            else:
                tree = _merge(
                    repo,
                    item.old_parent or base_commit,
                    previous,
                    item.old,
                    f"{item.name} does not apply there",
                )
        if item.extra:
            with_extra = gitops.tree_with(repo, last_tree, item.extra)
            tree = _merge(repo, last_tree, tree, with_extra, f"the changes do not fold into {item.name}")
        info = dict(item.info or gitops.commit_info(repo, item.old or last))
        if signoff is not None and (item.extra or item.old is None):
            info["message"] = add_signoff(repo, info["message"], *signoff)
        previous = gitops.commit_tree(repo, tree, previous, info)
        out.append(previous)
    return out


def add_signoff(repo: Path, message: str, name: str, mail: str) -> str:
    """The user's own Signed-off-by, as ``git commit -s`` adds it (git's trailer rules)."""
    args = [
        "interpret-trailers",
        "--if-exists",
        "addIfDifferentNeighbor",
        "--trailer",
        f"Signed-off-by: {name} <{mail}>",
    ]
    return gitops.run(repo, args, data=message.encode("utf-8", "surrogateescape")).decode(
        "utf-8", "surrogateescape"
    )
