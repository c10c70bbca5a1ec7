"""pip's settings as pip itself reads them: the one reader for every download patchkit makes (the
sdist and ruff through ``base/package_index``, the test venv through uv in ``testrun/testenv``).

pip's precedence, lowest first (``pip/_internal/configuration.py`` and ``cli/parser.py``):

- files: global (``$XDG_CONFIG_DIRS/pip/pip.conf``, ``/etc/pip.conf``) < user (``~/.pip/pip.conf``,
  ``$XDG_CONFIG_HOME/pip/pip.conf``; not read when ``PIP_CONFIG_FILE`` names an existing file) <
  site (``sys.prefix/pip.conf``) < ``PIP_CONFIG_FILE``; ``PIP_CONFIG_FILE=/dev/null`` reads none;
- sections: a command's own section (``[install]``, ``[download]``) overrides ``[global]`` whatever
  file each came from;
- the environment (``PIP_INDEX_URL``, ``PIP_FIND_LINKS``, …) overrides every file.

Keys are spelled as pip's options (``index-url``; ``index_url`` and ``--index-url`` are the same).
"""

from __future__ import annotations

import configparser
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

TRUE = ("1", "true", "yes", "on")


def config_files(environ: Mapping[str, str] | None = None, prefix: str | None = None) -> list[Path]:
    """pip's configuration files, lowest precedence first, as pip loads them."""
    env = os.environ if environ is None else environ
    env_file = env.get("PIP_CONFIG_FILE")
    if env_file == os.devnull:
        return []
    xdg_dirs = env.get("XDG_CONFIG_DIRS") or "/etc/xdg"
    files = [Path(d) / "pip" / "pip.conf" for d in xdg_dirs.split(os.pathsep) if d]
    files.append(Path("/etc/pip.conf"))
    if not (env_file and Path(env_file).exists()):
        home = Path(env.get("HOME") or Path.home())
        config_home = env.get("XDG_CONFIG_HOME") or home / ".config"
        files += [home / ".pip" / "pip.conf", Path(config_home) / "pip" / "pip.conf"]
    files.append(Path(prefix or sys.prefix) / "pip.conf")
    if env_file:
        files.append(Path(env_file))
    return files


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-").removeprefix("--")


def file_values(files: Iterable[Path]) -> dict[str, dict[str, str]]:
    """section -> key -> value over ``files`` (later files override earlier ones, per key)."""
    merged: dict[str, dict[str, str]] = {}
    for path in files:
        parser = configparser.RawConfigParser(strict=False, interpolation=None)
        try:
            if not path.is_file():
                continue
            parser.read(path, encoding="utf-8")
        except (configparser.Error, UnicodeDecodeError, OSError):
            continue  # pip would stop with an error; for finding an index the file is skipped
        for section in parser.sections():
            merged.setdefault(section, {}).update({_key(k): v for k, v in parser.items(section)})
    return merged


def settings(commands: Iterable[str] = ("install",), environ: Mapping[str, str] | None = None,
             prefix: str | None = None) -> dict[str, str]:  # fmt: skip
    """The effective settings for pip ``commands`` (each command's section overrides ``[global]``,
    a later command's an earlier one's), then ``PIP_*`` from the environment over all of them."""
    env = os.environ if environ is None else environ
    merged = file_values(config_files(env, prefix))
    values: dict[str, str] = {}
    for section in ("global", *commands):
        values.update(merged.get(section, {}))
    for name, value in env.items():
        if name.startswith("PIP_") and name != "PIP_CONFIG_FILE":
            values[_key(name[len("PIP_") :])] = value
    return values


def words(values: Mapping[str, str], key: str) -> list[str]:
    """A list setting (pip separates its items by white space)."""
    return values.get(key, "").split()


def is_on(values: Mapping[str, str], key: str) -> bool:
    return values.get(key, "").strip().lower() in TRUE
