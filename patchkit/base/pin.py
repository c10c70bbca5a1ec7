"""Target pin -> cached, verified base tree (an index sdist, a git rev, or a local path).

What is verified, and when:
- index: the sdist's sha256 against the pin (and against the hash the index lists) while it
  downloads; a mismatching file is never kept. A cached sdist is re-hashed when it is reused.
- every cached base (index, git, path copy): at build time its git tree id and ``tree_hash`` are
  recorded in ``base.json`` beside it; on each reuse ``HEAD^{tree}`` must still equal the recorded
  id and ``git status --porcelain`` must be empty, else CheckFailed naming the directory.
- ``pin.tree_hash``, when the pin already carries one, must equal the prepared tree's.

The index lookup and sdist download live in ``patchkit.base.package_index``, archive extraction and
``tree_hash`` in ``patchkit.base.archive``; their public names are re-exported here.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

from patchkit import cache, git
from patchkit.base.archive import SKIP_DIRS, extract_archive, tree_hash
from patchkit.base.package_index import PYPI_SIMPLE, download_sdist, index_url, index_urls, normalize_name
from patchkit.errors import CheckFailed, UserError
from patchkit.values import Pin

# the index and archive names are re-exported: ``from patchkit.base.pin import download_sdist`` works
__all__ = [
    "GIT_FALLBACK_PATHS",
    "PYPI_SIMPLE",
    "SOURCES",
    "checkout",
    "download_sdist",
    "extract_archive",
    "index_url",
    "index_urls",
    "normalize_name",
    "pin_problem",
    "prepare_base",
    "tree_hash",
    "validate_pin",
]

SOURCES = ("index", "git", "path")
# What a git base keeps when the repository cannot archive its whole tree (missing large blobs).
# .github and .buildkite carry vLLM's labels, reviewers and CI steps (patchkit/upstream/).
GIT_FALLBACK_PATHS = ("vllm", "tests", "pyproject.toml", "setup.py", "requirements", "csrc",
                      ".github", ".buildkite")  # fmt: skip


# --------------------------------------------------------------------------- pin


def pin_problem(pin: Pin) -> tuple[str, str] | None:
    """(key, reason) of the first thing wrong with ``pin``, or None when it is complete."""
    need = {"index": ("version", "sha256"), "git": ("url", "rev"), "path": ("path",)}
    if pin.source not in need:
        return "source", f"pin source must be one of {', '.join(SOURCES)}, not {pin.source!r}"
    for key in need[pin.source]:
        if not getattr(pin, key):
            return key, f"a pin with source = {pin.source!r} needs '{key}'"
    if pin.source == "index" and not re.fullmatch(r"[0-9a-fA-F]{64}", pin.sha256 or ""):
        return "sha256", f"pin sha256 must be 64 hex digits, not {pin.sha256!r}"
    if pin.source == "git" and not re.fullmatch(r"[0-9a-fA-F]{40}", pin.rev or ""):
        return "rev", f"pin rev must be a full 40-hex commit id, not {pin.rev!r}"
    return None


def validate_pin(pin: Pin) -> None:
    """Raise UserError unless ``pin`` names everything its source needs."""
    if problem := pin_problem(pin):
        raise UserError(problem[1])


# --------------------------------------------------------------------------- bases


def _record_base(entry: Path, pin: Pin, **extra: object) -> None:
    """Commit the tree under ``entry/tree`` and write ``entry/base.json`` describing it."""
    tree = entry / "tree"
    label = pin.version or pin.rev or pin.path
    commit = git.init_with_commit(tree, f"base: {pin.name} {label} ({pin.source})")
    marker = {
        "pin": {k: v for k, v in pin.to_dict().items() if k != "tree_hash"},
        "commit": commit,
        "tree_id": git.output(["rev-parse", "HEAD^{tree}"], tree).strip(),
        "tree_hash": tree_hash(tree),
        **extra,
    }
    (entry / "base.json").write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")


def _verified_base(entry: Path) -> tuple[Path, dict]:
    """The cached tree of ``entry`` after checking it is still exactly what was recorded."""
    tree = entry / "tree"
    marker = json.loads((entry / "base.json").read_text(encoding="utf-8"))
    tree_id = git.run(["rev-parse", "HEAD^{tree}"], tree, check=False).stdout.decode().strip()
    status = git.run(["status", "--porcelain"], tree, check=False)
    if tree_id != marker["tree_id"] or status.returncode != 0 or status.stdout.strip():
        raise CheckFailed(
            f"{tree}: cached base was modified (tree {tree_id or '?'} != {marker['tree_id']} "
            "or working tree not clean); delete that cache entry to rebuild it"
        )
    return tree, marker


def _build_index_base(pin: Pin, entry: Path) -> None:
    sdist = download_sdist(pin.name, pin.version or "", pin.sha256 or "")
    extract_archive(sdist, entry / "tree")
    _record_base(entry, pin, sdist=sdist.name, sdist_sha256=(pin.sha256 or "").lower())


def _is_local(url: str) -> bool:
    return urlparse(url).scheme in ("", "file") and not re.match(r"[^/]+@[^/]+:", url)


def _git_repo(url: str, rev: str) -> Path:
    """A repository holding ``rev``: the local one itself, or a cached fetch of a remote one."""
    if _is_local(url):
        repo = Path(url2pathname(urlparse(url).path) if url.startswith("file:") else url)
        repo = repo.expanduser()
        if not repo.is_dir():
            raise UserError(f"git url {url}: no such directory")
    else:
        repo = cache.store_dir("git-mirror", hashlib.sha256(url.encode()).hexdigest()[:24])
        with cache.entry_lock("git-mirror", repo.name):
            if not repo.is_dir():
                repo.mkdir(parents=True)
                git.run(["init", "-q", "--bare"], repo)
            if git.run(["cat-file", "-e", f"{rev}^{{commit}}"], repo, check=False).returncode:
                fetched = git.run(["fetch", "-q", "--depth=1", url, rev], repo, check=False)
                if fetched.returncode:
                    git.run(["fetch", "-q", url], repo, check=False)
                # a ref keeps the fetched commit from being pruned by a later gc
                git.run(["update-ref", f"refs/patchkit/{rev}", rev], repo, check=False)
    if git.run(["cat-file", "-e", f"{rev}^{{commit}}"], repo, check=False).returncode:
        raise UserError(f"git url {url}: commit {rev} not found")
    return repo


def _build_git_base(pin: Pin, entry: Path) -> None:
    """``git archive`` the rev into the tree; if the repository lacks some blobs, archive only
    the GIT_FALLBACK_PATHS that exist (recorded in base.json as ``paths``)."""
    repo, rev, tar = _git_repo(pin.url or "", pin.rev or ""), pin.rev or "", entry / "src.tar"
    archive = ["archive", "--format=tar", "--prefix=src/", "-o", str(tar), rev]
    paths: list[str] = []
    if git.run(archive, repo, check=False).returncode:
        names = git.output(["ls-tree", "--name-only", rev], repo).split("\n")
        paths = [p for p in GIT_FALLBACK_PATHS if p in names]
        proc = git.run([*archive, "--", *paths], repo, check=False) if paths else None
        if proc is None or proc.returncode:
            detail = proc.stderr.decode(errors="replace").strip() if proc else "nothing to take"
            raise UserError(f"git url {pin.url}: cannot archive {rev}: {detail}")
    extract_archive(tar, entry / "tree")
    tar.unlink()
    _record_base(entry, pin, paths=paths or ["*"])


def _build_path_copy(pin: Pin, root: Path, entry: Path) -> None:
    shutil.copytree(root, entry / "tree", symlinks=True, ignore=shutil.ignore_patterns(*SKIP_DIRS))
    _record_base(entry, pin)


def _prepare_path(pin: Pin) -> tuple[Path, str]:
    """A path pin is used in place when it is a git work tree; otherwise a cached copy is."""
    root = Path(pin.path or "").expanduser().resolve()
    if not root.is_dir():
        raise UserError(f"pin path {pin.path}: no such directory")
    digest = tree_hash(root)
    if (root / ".git").exists():
        return root, digest
    key = f"path-{digest}"
    entry = cache.build_entry("base", key, lambda tmp: _build_path_copy(pin, root, tmp))
    return _verified_base(entry)[0], digest


def prepare_base(pin: Pin) -> Path:
    """The root of a prepared, verified source tree for ``pin`` (a git repository with a base
    commit), built into the cache on first use. Sets ``pin.tree_hash``."""
    validate_pin(pin)
    if pin.source == "path":
        tree, digest = _prepare_path(pin)
    else:
        key = f"index-{(pin.sha256 or '').lower()}" if pin.source == "index" else f"git-{pin.rev}"
        build = _build_index_base if pin.source == "index" else _build_git_base

        def logged_build(tmp: Path) -> None:
            print(f"patchkit: preparing the base {pin.name} {pin.version or pin.rev} (once; cached)",
                  file=sys.stderr, flush=True)  # fmt: skip
            build(pin, tmp)

        entry = cache.build_entry("base", key, logged_build)
        tree, marker = _verified_base(entry)
        digest = marker["tree_hash"]
    if pin.tree_hash and pin.tree_hash != digest:
        raise CheckFailed(f"{tree}: tree hash {digest} differs from the pinned {pin.tree_hash}")
    pin.tree_hash = digest
    return tree


def checkout(pin: Pin, dest: Path | None = None) -> Path:
    """Prepare the base; with ``dest``, copy it there (a git repository of its own, no hard
    links, so it can be edited) and return that path. ``dest`` must be absent or empty."""
    base = prepare_base(pin)
    if dest is None:
        return base
    dest = dest.expanduser().resolve()
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UserError(f"{dest}: already exists and is not an empty directory")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        shutil.copytree(base, tmp / "tree", symlinks=True)
        if dest.exists():
            dest.rmdir()
        os.rename(tmp / "tree", dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest
