"""A prepared test environment for a pin: a venv under the store with the base's Python deps.

Steps (as worked out for vLLM on a CPU machine): a venv; ``torch==2.13.0`` (pip takes the local
CPU wheel where one exists); ``-r requirements/common.txt`` of the base tree; pytest, tblib and
pytest-timeout. The venv is built in place (venvs are not relocatable) under the entry's lock and
is only used once its ready marker is written.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

from patchkit import cache

TORCH = "torch==2.13.0"
TEST_TOOLS = ("pytest", "tblib", "pytest-timeout")
REQUIREMENTS = "requirements/common.txt"
READY = ".patchkit-ready.json"
PIP_TIMEOUT = 3600


class TestEnvError(Exception):
    """Preparing the environment failed; the tests gate turns this into could-not-run."""


def env_key(base_root: Path, python: str = sys.executable) -> str:
    requirements = base_root / REQUIREMENTS
    text = requirements.read_bytes() if requirements.is_file() else b""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    return "venv-" + hashlib.sha256(b"\0".join([text, TORCH.encode(), version.encode(),
                                               " ".join(TEST_TOOLS).encode()])).hexdigest()[:24]  # fmt: skip


def steps(venv: Path, base_root: Path) -> list[tuple[str, list[str]]]:
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check"]
    plan = [("torch (CPU)", [*pip, TORCH])]
    if (base_root / REQUIREMENTS).is_file():
        plan.append((REQUIREMENTS, [*pip, "-r", str(base_root / REQUIREMENTS), TORCH]))
    plan.append(("test tools", [*pip, *TEST_TOOLS]))
    return plan


def ready_python(base_root: Path) -> str | None:
    """The interpreter of an already prepared environment for this base, else None."""
    venv = cache.store_dir("testenv", env_key(base_root))
    return str(venv / "bin" / "python") if (venv / READY).is_file() else None


def prepare(base_root: Path, python: str = sys.executable) -> str:
    """The interpreter of the environment for ``base_root``, building it on first use."""
    key = env_key(base_root, python)
    venv = cache.store_dir("testenv", key)
    if (venv / READY).is_file():
        return str(venv / "bin" / "python")
    with cache.entry_lock("testenv", key):
        if (venv / READY).is_file():
            return str(venv / "bin" / "python")
        shutil.rmtree(venv, ignore_errors=True)  # a half-built one from an interrupted run
        _run("venv", [python, "-m", "venv", str(venv)])
        for label, cmd in steps(venv, base_root):
            _run(label, cmd)
        (venv / READY).write_text(json.dumps({"steps": [c for _, c in steps(venv, base_root)]}, indent=1))
    return str(venv / "bin" / "python")


def _run(label: str, cmd: list[str]) -> None:
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:  # CI logs: say what the minutes are spent on
        print(f"patchkit: test environment: {label} ...", file=sys.stderr, flush=True)
    with console.status(f"test environment: {label}", spinner="dots"):
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise TestEnvError(f"{label}: {exc}") from exc
    if proc.returncode != 0:
        tail = " / ".join(proc.stderr.strip().splitlines()[-2:])
        raise TestEnvError(f"{label}: exit {proc.returncode}: {tail}")
