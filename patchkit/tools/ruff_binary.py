"""Which ruff the ruff gate runs, and why — the way pre-commit picks it.

1. The base pins one: the ``astral-sh/ruff-pre-commit`` repo's ``rev`` in its
   ``.pre-commit-config.yaml``. That version's wheel is fetched once from the package index (the
   sha256 the index lists is required and checked), its ``ruff`` executable kept in patchkit's cache.
2. Else (no pin, or it cannot be installed here): the ruff that ships as patchkit's own dependency.
3. Else a ``ruff`` on PATH. Else none: the gate could not run, and says why.

Every choice is recorded (``RuffTool.to_dict``) so the report says which ruff ran and why.
"""

from __future__ import annotations

import re
import shutil
import stat
import zipfile
from dataclasses import dataclass
from functools import cache as memoised
from pathlib import Path

from patchkit import cache
from patchkit.analysis.undefined import dependency_ruff
from patchkit.base import package_index
from patchkit.errors import UserError
from patchkit.proc import TimeoutExpired, run_process
from patchkit.tools import precommit
from patchkit.values import Message

PRE_COMMIT_CONFIG = ".pre-commit-config.yaml"
RUFF_HOOK_REPO = "astral-sh/ruff-pre-commit"


@dataclass(frozen=True)
class RuffTool:
    command: tuple[str, ...] | None  # None: no ruff could be found or installed
    version: str  # "0.14.0", or "" when absent
    source: str  # pinned | dependency | path | none
    why: Message  # why this one (or why none)

    def to_dict(self) -> dict:
        return {"version": self.version, "source": self.source, "why": self.why.to_dict()}


def pinned_version(config_text: str | None) -> str | None:
    """The ruff version a ``.pre-commit-config.yaml`` pins (its ruff-pre-commit ``rev``), if any;
    the file is read as YAML (``tools/precommit``), so flow style, anchors and quoting hold."""
    if not config_text:
        return None
    try:
        hooks = precommit.parse(config_text).hooks
    except UserError:
        return None
    for hook in hooks:
        if hook.repo.rstrip("/").removesuffix(".git").endswith(RUFF_HOOK_REPO) and hook.tool is not None:
            return hook.tool.version
    return None


def version_of(command: list[str] | tuple[str, ...]) -> str:
    """``ruff --version`` as a bare version ("0.14.0"); "" when it does not run."""
    try:
        out = run_process([*command, "--version"], text=True, timeout=60).stdout
    except (OSError, TimeoutExpired):
        return ""
    match = re.search(r"(\d+\.\d+\.\d+\S*)", out)
    return match.group(1) if match else ""


def _wheel_rank(filename: str) -> int | None:
    """The wheel's place in this interpreter's tag order (lower is better); None if it cannot run here."""
    from packaging.tags import sys_tags
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        _, _, _, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        return None
    for rank, tag in enumerate(sys_tags()):
        if tag in tags:
            return rank
    return None


def install_pinned(version: str) -> Path:
    """The ``ruff`` executable of ``version``, from the cache or installed into it from the index.

    Installed once: a cached one (checked when it was installed) is used without asking the index.
    Raises UserError (index unreachable, no wheel for this platform, no listed hash, mismatch)."""
    key = f"ruff-{version}"
    if (cached := cache.store_dir("tools", key) / "ruff").is_file():
        return cached
    candidates = []
    for filename, url, listed in package_index.project_files("ruff", version):
        if filename.endswith(".whl") and (rank := _wheel_rank(filename)) is not None:
            candidates.append((rank, filename, url, listed))
    if not candidates:
        indexes = ", ".join(package_index.index_urls())
        raise UserError(f"no ruff {version} wheel for this platform on {indexes}")
    _, filename, url, listed = min(candidates)
    if not listed:
        raise UserError(f"{filename}: the index lists no sha256, so it cannot be checked")

    def build(tmp: Path) -> None:
        wheel = tmp / filename
        package_index.download(url, wheel, listed.lower())
        with zipfile.ZipFile(wheel) as archive:
            member = f"ruff-{version}.data/scripts/ruff"
            if member not in archive.namelist():
                raise UserError(f"{filename}: no {member} in the wheel")
            (tmp / "ruff").write_bytes(archive.read(member))
        (tmp / "ruff").chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        wheel.unlink()

    return cache.build_entry("tools", key, build) / "ruff"


@memoised
def choose(pre_commit_config: str | None) -> RuffTool:
    """The ruff to run for a base whose ``.pre-commit-config.yaml`` is ``pre_commit_config``."""
    pinned = pinned_version(pre_commit_config)
    fallback_why: Message
    if pinned:
        try:
            exe = install_pinned(pinned)
        except UserError as exc:
            fallback_why = Message("ruff.why.pin-failed", {"version": pinned, "error": str(exc)})
        else:
            found = version_of([str(exe)])
            if found == pinned:
                why = Message("ruff.why.pinned", {"version": pinned, "config": PRE_COMMIT_CONFIG})
                return RuffTool((str(exe),), found, "pinned", why)
            error = f"the installed ruff reports {found!r}"
            fallback_why = Message("ruff.why.pin-failed", {"version": pinned, "error": error})
    else:
        fallback_why = Message("ruff.why.no-pin", {"config": PRE_COMMIT_CONFIG})
    for source, exe in (("dependency", dependency_ruff()), ("path", shutil.which("ruff"))):
        if exe and (found := version_of([exe])):
            return RuffTool(
                (exe,), found, source, Message(f"ruff.why.{source}", {"reason": fallback_why.to_dict()})
            )
    return RuffTool(None, "", "none", Message("ruff.why.none", {"reason": fallback_why.to_dict()}))
