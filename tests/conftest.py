"""Shared fixtures: the fixture paths, a fresh copy of the mini vLLM base, and plain git helpers."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
_GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def _git(args: list[str], cwd: Path, data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=cwd, input=data, capture_output=True, env=_GIT_ENV)


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def base_copy(tmp_path: Path) -> Callable[[str], Path]:
    """A fresh copy of tests/fixtures/base under tmp_path/<name>."""

    def make(name: str = "base") -> Path:
        dest = tmp_path / name
        shutil.copytree(FIXTURES / "base", dest)
        return dest

    return make


@pytest.fixture
def git_apply() -> Callable[..., None]:
    """``git apply [-R] PATCH`` in a directory (no repository needed); fails the test on refusal."""

    def apply(tree: Path, patch: bytes, reverse: bool = False) -> None:
        args = ["apply", "--whitespace=nowarn", *(["-R"] if reverse else []), "-"]
        proc = _git(args, tree, patch)
        assert proc.returncode == 0, proc.stderr.decode()

    return apply


@pytest.fixture
def tree_hash() -> Callable[[Path], str]:
    """``git write-tree`` of a directory's files (content and exec bit), via a throwaway index."""

    def hash_of(tree: Path) -> str:
        env = {**_GIT_ENV, "GIT_INDEX_FILE": str(tree.parent / f".{tree.name}.index")}
        git_dir = tree.parent / f".{tree.name}.git"
        if not git_dir.exists():
            subprocess.run(["git", "init", "-q", "--bare", str(git_dir)], check=True, env=env)
        env["GIT_DIR"], env["GIT_WORK_TREE"] = str(git_dir), str(tree)
        subprocess.run(["git", "add", "-A", "."], cwd=tree, check=True, env=env)
        return (
            subprocess.run(["git", "write-tree"], cwd=tree, check=True, env=env, capture_output=True)
            .stdout.decode()
            .strip()
        )

    return hash_of


@pytest.fixture(scope="session")
def pinned_base() -> Path:
    """The prepared tree of the pinned vLLM sdist (patchkit.toml's target): downloaded once, cached."""
    from patchkit.base.pin import prepare_base
    from patchkit.config import load_pin

    return prepare_base(load_pin(Path(__file__).resolve().parents[1] / "patchkit.toml"))
