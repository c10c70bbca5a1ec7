"""git calls on the user's edit work tree: identities kept as they are (no patchkit author), a
snapshot of the work tree as a tree object (a private index: the user's index is never read)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from patchkit import git
from patchkit.errors import UserError
from patchkit.proc import TimeoutExpired


def run(
    repo: Path,
    args: list[str],
    *,
    data: bytes | None = None,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> bytes:
    """``git -C repo ARGS`` with the user's identity (not git.run's fixed patchkit one), in its own
    process group and ended with patchkit (``git.call``), as every git call of patchkit."""
    proc = raw(repo, args, data, env or {})
    if check and proc.returncode != 0:
        raise UserError(
            f"git {args[0]} failed in {repo}: {proc.stderr.decode(errors='replace').strip()[:300]}"
        )
    return proc.stdout


def raw(repo: Path, args: list[str], data: bytes | None, extra: dict[str, str]):
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}
    env.update(extra)
    try:
        return git.call(["-C", str(repo), *args], input=data, env=env, timeout=git.timeout_for(args))
    except TimeoutExpired:
        raise UserError(f"git {args[0]} timed out in {repo}") from None


def text(repo: Path, args: list[str], **kw) -> str:
    return run(repo, args, **kw).decode("utf-8", "surrogateescape").strip()


def rev(repo: Path, name: str) -> str:
    return text(repo, ["rev-parse", "--verify", "-q", name + "^{commit}"])


def tree_of(repo: Path, commit: str) -> str:
    return text(repo, ["rev-parse", commit + "^{tree}"])


def snapshot(repo: Path) -> str:
    """The work tree as it is (tracked files, and untracked ones git does not ignore) as a tree id,
    through a private index: nothing of the user's (index, files) is written."""
    fd, index = tempfile.mkstemp(prefix="patchkit-snap-", suffix=".index")
    os.close(fd)
    os.unlink(index)
    env = {"GIT_INDEX_FILE": index}
    try:
        run(repo, ["read-tree", "HEAD"], env=env)
        run(repo, ["add", "-A", "."], env=env)
        return text(repo, ["write-tree"], env=env)
    finally:
        Path(index).unlink(missing_ok=True)


def tree_with(repo: Path, tree: str, patch: bytes) -> str:
    """``tree`` with ``patch`` (a -U0 diff) applied, through a private index."""
    fd, index = tempfile.mkstemp(prefix="patchkit-tree-", suffix=".index")
    os.close(fd)
    os.unlink(index)
    env = {"GIT_INDEX_FILE": index}
    try:
        run(repo, ["read-tree", tree], env=env)
        if patch.strip():
            run(
                repo, ["apply", "--cached", "--unidiff-zero", "--whitespace=nowarn", "-"], data=patch, env=env
            )
        return text(repo, ["write-tree"], env=env)
    finally:
        Path(index).unlink(missing_ok=True)


def merge(repo: Path, base: str, ours: str, theirs: str) -> str | None:
    """The tree of a 3-way merge (``git merge-tree --write-tree``), None on a conflict."""
    proc = raw(
        repo, ["merge-tree", "--write-tree", "--no-messages", f"--merge-base={base}", ours, theirs], None, {}
    )
    if proc.returncode != 0:
        return None
    return proc.stdout.decode().split("\n", 1)[0].strip()


def commit_info(repo: Path, commit: str) -> dict[str, str]:
    raw = run(
        repo, ["log", "-1", "--format=%an%x00%ae%x00%ad%x00%cn%x00%ce%x00%cd%x00%B", "--date=raw", commit]
    )
    an, ae, ad, cn, ce, cd, body = raw.decode("utf-8", "surrogateescape").split("\0", 6)
    return {
        "GIT_AUTHOR_NAME": an,
        "GIT_AUTHOR_EMAIL": ae,
        "GIT_AUTHOR_DATE": ad,
        "GIT_COMMITTER_NAME": cn,
        "GIT_COMMITTER_EMAIL": ce,
        "GIT_COMMITTER_DATE": cd,
        "message": body.rstrip("\n") + "\n",
    }


def commit_tree(repo: Path, tree: str, parent: str, info: dict[str, str]) -> str:
    env = {k: v for k, v in info.items() if k.startswith("GIT_")}
    return text(repo, ["commit-tree", tree, "-p", parent, "-F", "-"], data=info["message"].encode(), env=env)


def user_identity(repo: Path) -> tuple[str, str]:
    name = text(repo, ["config", "user.name"], check=False)
    mail = text(repo, ["config", "user.email"], check=False)
    if not name or not mail:
        raise UserError("--signoff needs git config user.name and user.email (as git commit -s does)")
    return name, mail
