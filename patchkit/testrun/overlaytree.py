"""Test against a compiled vLLM: the interpreter's installed ``vllm`` with a patch laid over it.

When ``--python`` names an interpreter where vLLM is installed from a wheel (``vllm/_C*.so`` and
friends beside the Python files), the source tree's ``vllm/`` cannot run the tests: it has no
compiled extensions. The base side then imports the installed package as it is; a side with
patched files gets an overlay tree: every installed file linked (symlinks, so extensions resolve
to the wheel's own files) and the patched files copied in. Upstream ``tests/`` still come from
the base tree.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from patchkit.proc import TimeoutExpired, run_process

PACKAGE = "vllm"
Overlay = dict[str, bytes | None]  # path -> content after some patches (None = deleted)
# find_spec of a top-level package locates it without importing it (importing vllm is seconds)
_PROBE = (
    "import importlib.util, json, pathlib\n"
    "spec = importlib.util.find_spec('vllm')\n"
    "root = list(spec.submodule_search_locations or [])[0] if spec else None\n"
    "compiled = sorted(p.name for p in pathlib.Path(root).glob('_C*.so')) if root else []\n"
    "print(json.dumps({'root': root, 'compiled': compiled}))\n"
)


@dataclass(frozen=True)
class InstalledVllm:
    root: Path  # .../site-packages/vllm
    compiled: tuple[str, ...]  # the extension files that make it a compiled build


@functools.cache
def installed_vllm(python: str, cwd: Path | None = None) -> InstalledVllm | None:
    """The compiled vLLM ``python`` would import (outside any source tree), or None."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    try:
        proc = run_process([python, "-I", "-c", _PROBE], text=True, timeout=60, env=env, cwd=cwd or Path("/"))
        found = json.loads(proc.stdout) if proc.returncode == 0 else {}
    except (OSError, TimeoutExpired, ValueError):
        return None
    if not found.get("root") or not found.get("compiled"):
        return None
    return InstalledVllm(Path(found["root"]), tuple(found["compiled"]))


def lay_over(installed: InstalledVllm, overlay: Overlay, tree: Path) -> None:
    """Replace ``tree/vllm`` (the source tree's copy) by the installed package, patched by the
    overlay's ``vllm/`` files: none → removed, so the installed package is imported as it is."""
    target = tree / PACKAGE
    shutil.rmtree(target, ignore_errors=True)
    patched = {p: d for p, d in overlay.items() if p.startswith(PACKAGE + "/")}
    if not patched:
        return
    for directory, dirnames, filenames in os.walk(installed.root):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        here = Path(directory)
        out = target / here.relative_to(installed.root)
        out.mkdir(parents=True, exist_ok=True)
        for name in filenames:
            (out / name).symlink_to(here / name)
    write_over(tree, patched)


def write_over(tree: Path, files: dict[str, bytes | None]) -> None:
    """Each file of ``files`` as a new file under ``tree`` (a link or hard link there is replaced,
    never written through); None removes it."""
    for path, data in files.items():
        dest = tree / path
        if dest.is_symlink() or dest.exists():
            dest.unlink()
        if data is not None:
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
