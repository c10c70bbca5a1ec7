"""Every git call patchkit makes goes through here (argument lists, never a shell), each a process of
``patchkit.proc``."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

from patchkit.errors import CheckFailed, UserError
from patchkit.proc import CompletedProcess, TimeoutExpired, run_process

_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "patchkit",
    "GIT_AUTHOR_EMAIL": "patchkit@localhost",
    "GIT_COMMITTER_NAME": "patchkit",
    "GIT_COMMITTER_EMAIL": "patchkit@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
    "LC_ALL": "C",
}


def timeout_for(args: list[str]) -> float:
    """Seconds a git call may take: ``$PATCHKIT_GIT_TIMEOUT`` (default 300; a network fetch 900)."""
    default = 900.0 if args and args[0] in ("fetch", "clone") else 300.0
    try:
        return float(os.environ.get("PATCHKIT_GIT_TIMEOUT", default))
    except ValueError:
        return default


def run(
    args: list[str],
    cwd: Path | str | None = None,
    *,
    input: bytes | None = None,
    check: bool = True,
    env: dict[str, str] | None = None,
) -> CompletedProcess[bytes]:
    """Run ``git ARGS`` and return the completed process (stdout/stderr as bytes); a git that
    hangs (a network fetch, a lock) is stopped after ``timeout_for(args)`` — one CheckFailed line.
    ``env`` adds variables such as GIT_DIR / GIT_INDEX_FILE."""
    full_env = {**os.environ, **_ENV, **(env or {})}
    seconds = timeout_for(args)
    try:
        proc = call(args, cwd, input=input, env=full_env, timeout=seconds)
    except TimeoutExpired:
        where = f" in {cwd}" if cwd else ""
        raise CheckFailed(f"git {args[0]} timed out after {seconds:g} s{where} "
                          "(set PATCHKIT_GIT_TIMEOUT to wait longer)") from None  # fmt: skip
    except OSError as exc:
        raise UserError(f"cannot run git: {exc.strerror}") from None
    if check and proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc


def call(
    args: list[str],
    cwd: Path | str | None = None,
    *,
    timeout: float,
    input: bytes | None = None,
    env: dict[str, str] | None = None,
    own_group: bool = True,
) -> CompletedProcess[bytes]:
    """``git ARGS`` as the caller sets it up: ``env`` whole (None: patchkit's own), its timeout and
    its errors (``TimeoutExpired``, ``OSError``) left to it; in its own process group, ended with
    patchkit (``proc``), unless ``own_group`` is False."""
    return run_process(["git", *args], cwd=cwd, input=input, env=env, timeout=timeout, own_group=own_group)


def output(args: list[str], cwd: Path | str | None = None) -> str:
    return run(args, cwd).stdout.decode()


def blob_id(data: bytes) -> str:
    """The git blob id of ``data`` (what an ``index`` line abbreviates), without a repository."""
    import hashlib

    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def init_with_commit(root: Path, message: str) -> str:
    """Make ``root`` a git repository holding one commit of its whole tree; return the commit id."""
    run(["init", "-q", "-b", "base"], root)
    run(["add", "-A", "-f", "."], root)
    run(["-c", "core.autocrlf=false", "commit", "-q", "--no-verify", "-m", message], root)
    return output(["rev-parse", "HEAD"], root).strip()


def apply(
    patch: bytes,
    cwd: Path,
    *,
    check: bool = False,
    reverse: bool = False,
    directory: str | None = None,
) -> CompletedProcess[bytes]:
    """``git apply`` a patch text in ``cwd`` (works outside a repository too)."""
    args = ["apply", "--whitespace=nowarn"]
    if check:
        args.append("--check")
    if reverse:
        args.append("-R")
    if directory:
        args.append(f"--directory={directory}")
    return run([*args, "-"], cwd, input=patch, check=False)


def diff_no_index(old: Path, new: Path, cwd: Path, context: int = 3) -> bytes:
    """``git diff --no-index`` between two directories (exit 1 means 'differs', not failure)."""
    proc = run(
        [
            "diff",
            "--no-index",
            "--no-renames",
            "--binary",
            f"-U{context}",
            "--no-color",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            str(old),
            str(new),
        ],
        cwd,
        check=False,
    )
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"git diff --no-index failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout


def merge_file(ours: bytes, base: bytes, theirs: bytes, labels: tuple[str, str, str]) -> tuple[bytes, int]:
    """3-way merge of one file's bytes with ``git merge-file -p --diff3``: (result, conflicts).

    The result holds diff3 conflict markers where both sides changed the same lines.
    """
    import tempfile

    with tempfile.TemporaryDirectory(prefix="patchkit-merge-") as tmp:
        paths = []
        for name, data in zip(("ours", "base", "theirs"), (ours, base, theirs)):
            path = Path(tmp) / name
            path.write_bytes(data)
            paths.append(str(path))
        args = ["merge-file", "-p", "--diff3"]
        for label in labels:
            args += ["-L", label]
        proc = run([*args, *paths], tmp, check=False)
    if proc.returncode < 0 or proc.returncode > 127:
        raise RuntimeError(f"git merge-file failed: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout, proc.returncode


def ls_remote(url: str, rev: str) -> str | None:
    """The commit id a branch or tag ``rev`` of ``url`` names (a tag peeled to its commit), or None."""
    proc = run(["ls-remote", url, rev, f"{rev}^{{}}"], check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"git ls-remote {url} failed: {proc.stderr.decode(errors='replace').strip()}")
    refs = dict(reversed(line.split("\t", 1)) for line in proc.stdout.decode().splitlines() if "\t" in line)
    peeled = [sha for ref, sha in refs.items() if ref.endswith("^{}")]
    return (peeled or list(refs.values()) or [None])[0]


@cache
def version() -> str:
    """``git --version``'s version ("2.39.5"); "" when git does not run."""
    try:
        text = run(["--version"], check=False).stdout.decode(errors="replace")
    except (UserError, CheckFailed):
        return ""
    return text.strip().rpartition(" ")[2]


INTERPRET_TRAILERS = ("interpret-trailers", "--parse", "--no-divider")


def interpret_trailers(message: str) -> list[tuple[str, str]]:
    """The trailers git reads in a commit message: ``git interpret-trailers --parse --no-divider``
    as (key, value) pairs, with nobody's ``trailer.*`` configuration. Raises UserError (no git) or
    CheckFailed (timeout), RuntimeError (git refused)."""
    proc = run(list(INTERPRET_TRAILERS), "/", input=message.encode("utf-8", errors="surrogateescape"),
               env={"GIT_CONFIG_GLOBAL": os.devnull})  # fmt: skip
    pairs = []
    for line in proc.stdout.decode("utf-8", errors="surrogateescape").split("\n")[:-1]:
        key, _, value = line.partition(": ")
        pairs.append((key, value))
    return pairs
