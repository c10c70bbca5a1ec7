"""``patchkit pin``: write or update ``[target]`` in patchkit.toml, the hash taken from the index.

Like ``uv add`` / ``pip hash``: ``patchkit pin vllm==0.33.0`` asks the package index (PEP 691) for
the sdist's sha256; ``git+URL@REV`` (or ``--git URL REV``) resolves REV to a full commit id; a
directory (or ``--path DIR``) pins a tree — any form ``project.parse_pin`` reads. The file is edited
as text: comments and every other table stay as they were.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from patchkit import output
from patchkit.errors import EXIT_OK, UserError
from patchkit.project import CONFIG_NAME, PinSpec, Project, parse_pin


@dataclass
class Options:
    spec: str | None = None
    git: tuple[str, str] | None = None  # the older spelling of git+URL@REV
    path: Path | None = None  # the older spelling of a directory as SPEC
    file: Path | None = None  # --config: the toml to edit


def run(project: Project, options: Options) -> int:
    target = _target(options.spec, options.git, options.path)
    file = options.file or project.config_file or project.cwd / CONFIG_NAME
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


def _target(spec: str | None, git: tuple[str, str] | None, path: Path | None) -> dict[str, str]:
    given = [x for x in (spec, git, path) if x]
    if len(given) != 1:
        raise UserError("give one of NAME==VERSION, git+URL@REV, a directory, --git URL REV or --path DIR")
    if path is not None:
        if not path.is_dir():
            raise UserError(f"--path {path}: not a directory")
        named = PinSpec("path", str(path), path=path)
    elif git is not None:
        named = PinSpec("git", " ".join(git), url=git[0], rev=git[1])
    else:
        named = parse_pin(spec or "", "SPEC")
    pin = named.pin()
    return {k: v for k, v in pin.to_dict().items() if v is not None and k != "tree_hash"}


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
