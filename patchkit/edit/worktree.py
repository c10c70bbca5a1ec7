"""``patchkit edit``'s work tree: a git repository with one base commit, then one commit per patch
(author, date, subject and body from the patch headers, through ``git am``), and the record of which
commit is which patch (``.git/patchkit-edit.json``); the one way a change lands in it (``land``).

Crash safety is ``patchkit.txn``'s: every command holds the work tree's lock (``txn.lock``, in
``.git/patchkit-txn/``) and recovers first; a change is one ``txn.dirswap`` of the series dir whose
follow-up (``_forward``: the branch, HEAD, the index and the record moved to the new chain) is
idempotent. The work tree's files are written only by ``drop`` (on a clean tree), so the user's
edits stay as they are whatever happens; git runs in its own process group (``proc``)."""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from patchkit.base.tree import BaseTree
from patchkit.edit import gitops, render
from patchkit.errors import UserError
from patchkit.series.files import load_entries
from patchkit.txn import dirswap
from patchkit.txn.journal import step, write_json_durable
from patchkit.txn.lock import target_lock

META = "patchkit-edit.json"
STATE = "patchkit-txn"  # in .git: the lock and the record of a change in progress
BRANCH = "patchkit"
LOCK_TIMEOUT = 30.0
_BASE_ID = {
    "GIT_AUTHOR_NAME": "patchkit base",
    "GIT_AUTHOR_EMAIL": "patchkit@localhost",
    "GIT_AUTHOR_DATE": "946684800 +0000",
    "GIT_COMMITTER_NAME": "patchkit",
    "GIT_COMMITTER_EMAIL": "patchkit@localhost",
    "GIT_COMMITTER_DATE": "946684800 +0000",
}


@dataclass
class Work:
    path: Path
    series: Path
    base_dir: Path
    base_commit: str
    names: list[str]
    commits: list[str]

    @property
    def gitdir(self) -> Path:
        return self.path / ".git"

    def base(self) -> BaseTree:
        return BaseTree(self.base_dir)

    def index_of(self, name: str) -> int:
        """A patch named by file name, domain, or number."""
        for i, n in enumerate(self.names):
            stem = n.removesuffix(".patch")
            if name in (n, stem, stem.split("-", 1)[-1], stem.split("-", 1)[0], str(i + 1)):
                return i
        raise UserError(f"no patch {name!r} in the series ({', '.join(self.names)})")

    def parent(self, index: int) -> str:
        return self.base_commit if index == 0 else self.commits[index - 1]


def _save(work: Work) -> None:
    record = {
        "series": str(work.series),
        "base_dir": str(work.base_dir),
        "base_commit": work.base_commit,
        "patches": [{"name": n, "commit": c} for n, c in zip(work.names, work.commits)],
    }
    write_json_durable(work.gitdir / META, record)


def state_dir(path: Path) -> Path:
    return path / ".git" / STATE


@contextlib.contextmanager
def lock(path: Path, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold the work tree's lock (``patchkit.txn.lock``) for a whole edit command."""
    if not (path / ".git" / META).is_file():
        raise UserError(f"{path} is not a patchkit edit work tree (run patchkit edit SERIES --path {path})")
    with target_lock(state_dir(path), timeout, f"the edit work tree {path}"):
        yield


def load(path: Path) -> Work:
    """The work tree's record, after finishing or undoing a change a crash interrupted."""
    meta = path / ".git" / META
    if not meta.is_file():
        raise UserError(f"{path} is not a patchkit edit work tree (run patchkit edit SERIES --path {path})")
    recover(path)
    try:
        raw = json.loads(meta.read_text("utf-8"))
        work = Work(
            path.resolve(),
            Path(raw["series"]),
            Path(raw["base_dir"]),
            raw["base_commit"],
            [p["name"] for p in raw["patches"]],
            [p["commit"] for p in raw["patches"]],
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(f"the edit record {meta} is unreadable: {exc}") from None
    head = gitops.rev(path, "HEAD")
    last = work.commits[-1] if work.commits else work.base_commit
    if not _ancestor(path, last, head):
        raise UserError(
            f"HEAD no longer contains the last patch commit {last[:12]} (history rewritten by hand?); "
            f"reset to it (git reset --soft {last[:12]}) and absorb the changes instead"
        )
    return work


def _ancestor(path: Path, old: str, new: str) -> bool:
    return gitops.raw(path, ["merge-base", "--is-ancestor", old, new], None, {}).returncode == 0


def create(series: Path, path: Path, base_dir: Path) -> tuple[Work, bool]:
    """(the work tree, whether it was made now); an existing one is only described, never overwritten."""
    if (path / ".git" / META).is_file():
        return load(path), False
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise UserError(f"{path} exists and is not empty: give a new directory for the work tree")
    entries = load_entries(series)
    if any(e.overlay is not None for e in entries):
        raise UserError("the series lists overlays: the edit loop handles patch files only")
    path.mkdir(parents=True, exist_ok=True)
    gitops.run(path, ["init", "-q", "-b", BRANCH])
    gitops.run(path, ["config", "core.autocrlf", "false"])
    gitdir = str((path / ".git").resolve())
    gitops.run(
        base_dir, ["--git-dir", gitdir, "--work-tree", str(base_dir.resolve()), "add", "-A", "-f", "."]
    )
    gitops.run(path, ["commit", "-q", "--no-verify", "-m", f"base: {base_dir.name}"], env=_BASE_ID)
    gitops.run(path, ["reset", "-q", "--hard", "HEAD"])
    base_commit = gitops.rev(path, "HEAD")
    commits = []
    for entry in entries:
        env = {"GIT_COMMITTER_NAME": "patchkit edit", "GIT_COMMITTER_EMAIL": "patchkit@localhost"}
        proc = gitops.raw(
            path,
            ["am", "-q", "--keep-cr", "--committer-date-is-author-date", str(entry.path.resolve())],
            None,
            env,
        )
        if proc.returncode != 0:
            gitops.run(path, ["am", "--abort"], check=False)
            why = proc.stderr.decode(errors="replace").strip().splitlines()[:1] or ["?"]
            raise UserError(f"git am refused {entry.name}: {why[0]}")
        commits.append(gitops.rev(path, "HEAD"))
    work = Work(
        path.resolve(), series.resolve(), base_dir.resolve(), base_commit, [e.name for e in entries], commits
    )
    _save(work)
    return work, True


def describe(work: Work) -> list[str]:
    head = gitops.rev(work.path, "HEAD")
    last = work.commits[-1] if work.commits else work.base_commit
    on_top = int(gitops.text(work.path, ["rev-list", "--count", f"{last}..{head}"]) or 0)
    changed = gitops.text(work.path, ["diff", "--name-only", last]).splitlines()
    untracked = gitops.text(work.path, ["ls-files", "--others", "--exclude-standard"]).splitlines()
    lines = [
        f"work tree {work.path}: base {work.base_commit[:12]} + {len(work.names)} patch commit(s) "
        f"of {work.series}"
    ]
    lines += [f"  {c[:12]} {n}" for n, c in zip(work.names, work.commits)]
    if on_top:
        lines.append(f"  {on_top} commit(s) of yours on top (absorb takes them)")
    if changed or untracked:
        lines.append(
            f"  uncommitted: {len(changed)} changed, {len(untracked)} untracked file(s) — kept as they are"
        )
    else:
        lines.append("  no uncommitted changes")
    return lines


def recover(path: Path) -> str | None:
    """Finish (the series dir was swapped) or undo (it was not) a change a crash interrupted; the
    caller holds the lock."""
    done = dirswap.recover(state_dir(path), partial(_forward, path))
    if done is None:
        _remove_staged_leftover(path)
        return None
    outcome, record = done
    if outcome == "finished":
        return f"finished the interrupted {record['op']} (the new series was in place)"
    return f"undid the interrupted {record['op']} (the series was not changed)"


def _remove_staged_leftover(path: Path) -> None:
    """A series staged by a command killed before its record was written: never swapped in."""
    try:
        series = Path(json.loads((path / ".git" / META).read_text("utf-8"))["series"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    shutil.rmtree(render.staged_dir(series), ignore_errors=True)


def _forward(path: Path, record: dict) -> None:
    """The work tree moved to the record's chain; each step idempotent (recovery runs it again)."""
    gitops.run(path, ["update-ref", f"refs/heads/{BRANCH}", record["new_head"]])
    gitops.run(path, ["symbolic-ref", "HEAD", f"refs/heads/{BRANCH}"])
    step("edit:ref")
    gitops.run(path, ["reset", "-q", "--hard" if record.get("files") else "--mixed", record["new_head"]])
    step("edit:reset")
    work = Work(
        path.resolve(),
        Path(record["series"]),
        Path(record["base_dir"]),
        record["base_commit"],
        record["names"],
        record["commits"],
    )
    _save(work)
    step("edit:saved")


def land(
    work: Work, op: str, names: list[str], commits: list[str], edits: list[dict], files: bool = False
) -> render.Checks:
    """Write, check, swap in and record a new chain: the one way any edit command changes anything
    (the caller holds the work tree's lock)."""
    before = render.prefix_problems(work.series, work.base())
    staged = render.write_staged(work.path, work.series, list(zip(names, commits)), work.base_commit, edits,
                                 work.base())  # fmt: skip
    head = commits[-1] if commits else work.base_commit
    try:
        checks = render.check(work.path, staged, work.base(), work.base_commit, head, before)
        render.record_checks(staged, op, checks)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    record = {
        "op": op,
        "series": str(work.series),
        "old_head": gitops.rev(work.path, "HEAD"),
        "new_head": head,
        "base_dir": str(work.base_dir),
        "base_commit": work.base_commit,
        "names": names,
        "commits": commits,
        "files": files,
    }
    git_locks = [work.gitdir / name for name in ("index.lock", "HEAD.lock", f"refs/heads/{BRANCH}.lock")]
    dirswap.change(state_dir(work.path), work.series, staged, record, partial(_forward, work.path), git_locks)
    return checks
