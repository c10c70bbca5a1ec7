"""``patchkit pin``: write or update ``[target]`` in patchkit.toml, the hash taken from the index.

Like ``uv add`` / ``pip hash``: ``patchkit pin vllm==0.33.0`` asks the package index (PEP 691) for
the sdist's sha256; ``--git URL REV`` resolves REV to a full commit id; ``--path DIR`` pins a tree.
The file is edited as text: comments and every other table stay as they were.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from patchkit import output
from patchkit.errors import EXIT_OK, UserError

CONFIG_NAME = "patchkit.toml"


def run(spec: str | None, git: list[str] | None, path: Path | None, config: Path | None) -> int:
    target = _target(spec, git, path)
    file = config or _project_file()
    old = file.read_text("utf-8") if file.is_file() else ""
    file.write_text(with_target(old, target), encoding="utf-8")
    from patchkit.config import load_config

    try:
        load_config(file)
    except UserError:
        file.write_text(old, encoding="utf-8") if old else file.unlink()
        raise
    described = ", ".join(f"{k} {v}" for k, v in target.items() if k != "source")
    output.info(f"pinned {described} ({target['source']}) in {file}")
    return EXIT_OK


def _project_file() -> Path:
    from patchkit.config import find_project_config

    return find_project_config() or Path.cwd() / CONFIG_NAME


def _target(spec: str | None, git: list[str] | None, path: Path | None) -> dict[str, str]:
    given = [x for x in (spec, git, path) if x]
    if len(given) != 1:
        raise UserError("give one of NAME==VERSION, --git URL REV or --path DIR")
    if path is not None:
        if not path.is_dir():
            raise UserError(f"--path {path}: not a directory")
        return {"name": "vllm", "source": "path", "path": str(path.resolve())}
    if git is not None:
        url, rev = git
        return {"name": "vllm", "source": "git", "url": url, "rev": _full_rev(url, rev)}
    match = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([0-9A-Za-z.+!_-]+)\s*", spec or "")
    if not match:
        raise UserError(f"{spec!r}: expected NAME==VERSION, e.g. vllm==0.33.0")
    from patchkit.base.package_index import sdist_sha256

    name, version = match.groups()
    _, sha256 = sdist_sha256(name, version)
    return {"name": name, "source": "index", "version": version, "sha256": sha256}


def _full_rev(url: str, rev: str) -> str:
    if re.fullmatch(r"[0-9a-fA-F]{40}", rev):
        return rev.lower()
    from patchkit import git

    found = git.ls_remote(url, rev)
    if found is None:
        raise UserError(f"--git {url} {rev}: no such branch or tag (give a 40-hex commit id)")
    return found


def with_target(text: str, target: dict[str, str]) -> str:
    """``text`` with its ``[target]`` table's keys replaced by ``target`` (comments kept); the table
    is added at the top when there is none."""
    body = [f"{key} = {json.dumps(value)}\n" for key, value in target.items()]
    lines = text.splitlines(keepends=True)
    start = next(
        (i for i, line in enumerate(lines) if re.fullmatch(r"\s*\[\s*target\s*\]\s*(#.*)?\s*", line)), None
    )
    if start is None:
        return "".join(["[target]\n", *body, "\n" if text.strip() else "", *lines])
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"\s*\[", lines[i])), len(lines))
    kept = [line for line in lines[start + 1 : end] if not re.match(r"\s*[A-Za-z0-9_\"'-]+\s*=", line)]
    trailing = []
    while kept and not kept[-1].strip():
        trailing.insert(0, kept.pop())
    return "".join([*lines[: start + 1], *kept, *body, *trailing, *lines[end:]])
