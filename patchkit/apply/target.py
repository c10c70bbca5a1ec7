"""The target of an apply: a checkout or an installed distribution, and reading its files safely."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from patchkit.apply import paths
from patchkit.errors import UserError

if TYPE_CHECKING:  # loaded by the site-packages target only (csv, base64, RECORD rules)
    from patchkit.apply.sitepackages import Distribution


@dataclass
class Target:
    kind: str  # "checkout" | "site-packages"
    root: Path  # resolved; series paths are relative to it
    state_dir: Path
    dist: Distribution | None = None

    def describe(self) -> str:
        if self.dist is None:
            return f"checkout {self.root}"
        return f"site-packages {self.root} ({self.dist.name} {self.dist.version})"

    def to_dict(self) -> dict:
        out = {"kind": self.kind, "root": str(self.root), "state_dir": str(self.state_dir)}
        if self.dist is not None:
            out["dist"] = {"name": self.dist.name, "version": self.dist.version,
                           "dist_info": str(self.dist.dist_info)}  # fmt: skip
        return out


def checkout_target(path: Path) -> Target:
    root = path.expanduser().resolve()
    if not root.is_dir():
        raise UserError(f"{path}: no such directory")
    dotgit = root / ".git"
    if dotgit.is_dir():
        state_dir = dotgit / "patchkit"
    elif dotgit.is_file():  # a linked worktree: its git dir lives elsewhere
        from patchkit import git  # a linked worktree only

        state_dir = Path(git.output(["rev-parse", "--absolute-git-dir"], root).strip()) / "patchkit"
    else:
        state_dir = root / ".patchkit"
    return Target("checkout", root, state_dir)


def site_packages_target(python: str | None, site_packages: Path | None) -> Target:
    from patchkit.apply import sitepackages

    dist = sitepackages.locate(python, site_packages)
    return Target("site-packages", dist.location, dist.location / ".patchkit", dist)


# --------------------------------------------------------------------------- paths


def safe_path(target: Target, rel: str) -> Path:
    return paths.safe_path(target.root, rel, (target.state_dir, target.root / ".git"))


def read_file(path: Path) -> tuple[bytes | None, int | None]:
    """(bytes, permission bits) of a regular file, (None, None) when absent — also when it vanishes
    while being read (an editor saving by rename): the caller sees drift, never a crash."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, None
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{path}: not a regular file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None, None
    except PermissionError:
        raise UserError(f"{path}: not readable") from None
    except OSError as exc:
        raise UserError(f"{path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise UserError(f"{path}: not a regular file")
        return handle.read(), stat.S_IMODE(st.st_mode)
