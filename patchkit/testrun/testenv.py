"""A prepared test environment for a pin: a venv under the store with the base's Python deps.

What goes in (as worked out for vLLM on a CPU machine): the torch the base's own files name, as a
CPU build (``testrun/torchpin``: which file, which line; ``[audit] torch`` overrides it, said in the
record); ``-r requirements/common.txt`` of the base tree; pytest, tblib, pytest-timeout,
pytest-xdist and coverage at the versions the base's test lock file pins — and nothing else.
It is built with ``uv`` (``uv venv`` + one
``uv pip install``: one resolution, wheels reused from uv's cache between runs), with pip only when
uv cannot run (or ``PATCHKIT_INSTALLER=pip`` asks for it). uv is given pip's settings as pip reads
them for ``pip install`` (``patchkit.pipconf``, the reader the sdist download uses too) so it finds
the same wheels. The venv is built in place (venvs are not
relocatable) under the entry's lock and is only used once its ready marker is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

from patchkit import cache, pipconf, timing
from patchkit.errors import UserError
from patchkit.proc import CompletedProcess, TimeoutExpired, run_process
from patchkit.testrun import torchpin

TEST_TOOLS = torchpin.TEST_TOOLS
REQUIREMENTS = "requirements/common.txt"
READY = ".patchkit-ready.json"
INSTALL_TIMEOUT = 3600

# pip setting -> (uv variable, separator uv expects); pip separates its lists by white space
_PIP_TO_UV = {
    "index-url": ("UV_DEFAULT_INDEX", " "),
    "extra-index-url": ("UV_EXTRA_INDEX_URL", " "),
    "find-links": ("UV_FIND_LINKS", ","),
    "constraint": ("UV_CONSTRAINT", " "),
    "trusted-host": ("UV_INSECURE_HOST", " "),
    "default-timeout": ("UV_HTTP_TIMEOUT", " "),
    "cert": ("SSL_CERT_FILE", " "),
}
_UV_REPORT = re.compile(
    r"^(Resolved|Prepared|Installed|Uninstalled|Bytecode compiled) (\d+) (?:packages?|files?)"
    r" in ([\d.]+)(ms|s)\b"
)


class TestEnvError(Exception):
    """Preparing the environment failed; the tests gate turns this into could-not-run."""


def env_key(base_root: Path, python: str = sys.executable, torch: str | None = None) -> str:
    """The entry for this base: its common requirements, the torch it names (or the override), the
    test tools it pins, the Python version."""
    requirements = base_root / REQUIREMENTS
    text = requirements.read_bytes() if requirements.is_file() else b""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    named = torchpin.named_torch(base_root, torch)
    wanted = named.requirement if named else ""
    parts = [text, wanted.encode(), version.encode(), " ".join(torchpin.test_tools(base_root)).encode()]
    return "venv-" + hashlib.sha256(b"\0".join(parts)).hexdigest()[:24]


def requirements(base_root: Path, torch: str | None = None) -> list[str]:
    """The install arguments: torch (as resolved), the base's common requirements, the test tools."""
    reqs = [torch] if torch else []
    if (base_root / REQUIREMENTS).is_file():
        reqs += ["-r", str(base_root / REQUIREMENTS)]
    return [*reqs, *torchpin.test_tools(base_root)]


def steps(venv: Path, base_root: Path, torch: str | None = None) -> list[tuple[str, list[str]]]:
    """The pip fallback, step by step (torch first so pip takes the CPU wheel, not a CUDA one)."""
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check"]
    plan = [("torch (CPU)", [*pip, torch])] if torch else []
    if (base_root / REQUIREMENTS).is_file():
        plan.append((REQUIREMENTS, [*pip, "-r", str(base_root / REQUIREMENTS), *([torch] if torch else [])]))
    plan.append(("test tools", [*pip, *torchpin.test_tools(base_root)]))
    return plan


def resolve_torch(base_root: Path, torch: str | None = None) -> dict:
    """What torch goes in and why: {"requirement", "source", "named", "note"}; TestEnvError when the
    one the pin names has no CPU build on pip's find-links or indexes here."""
    from patchkit.base import package_index

    named = torchpin.named_torch(base_root, torch)
    if named is None:
        searched = ", ".join([*torchpin.SOURCES, "pyproject.toml"])
        return {
            "requirement": None,
            "source": None,
            "named": None,
            "note": f"the base names no torch ({searched})",
        }
    try:
        offered = list(package_index.candidates("torch"))
        requirement, note = torchpin.choose(named, offered, pip_settings(), package_index.wheel_rank)
    except torchpin.TorchUnavailable as exc:
        raise TestEnvError(f"torch: {exc}") from None
    except (UserError, OSError, ValueError) as exc:  # an index that cannot be reached: not built
        raise TestEnvError(f"torch: cannot ask the indexes for {named.requirement}: {exc}") from None
    return {"requirement": requirement, "source": named.source, "named": named.named, "note": note}


def torch_origin(python: str) -> str | None:
    """One line for the report: which torch the prepared venv of ``python`` got, from which file."""
    marker = Path(python).parent.parent / READY
    try:
        torch = json.loads(marker.read_text()).get("torch") or {}
    except (OSError, ValueError, AttributeError):
        return None
    if not torch.get("requirement"):
        return torch.get("note")
    said = f"{torch['requirement']} ({torch['note']})"
    return f"{said}, named by {torch['source']}" + (
        f" (the base names {torch['named']})" if torch["source"].startswith("patchkit.toml") else ""
    )


def uv_binary() -> str | None:
    """The ``uv`` executable (the PyPI package patchkit depends on, else one on PATH) if it runs."""
    found: str | None = None
    try:
        from uv import find_uv_bin

        found = find_uv_bin()
    except (ImportError, FileNotFoundError):
        found = shutil.which("uv")
    if found is None:
        return None
    try:
        ok = run_process([found, "--version"], timeout=30).returncode == 0
    except (OSError, TimeoutExpired):
        return None
    return found if ok else None


def pip_settings(python: str = sys.executable) -> dict[str, str]:
    """pip's effective settings for ``pip install`` (``patchkit.pipconf``: env over ``[install]`` over
    ``[global]``, site over user over global files)."""
    return pipconf.settings(("install",))


def uv_environment(pip: dict[str, str], environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for uv: pip's settings where the caller set no uv equivalent; every index
    weighed like pip does (best version across all of them), never a downloaded Python."""
    env = dict(os.environ if environ is None else environ)
    for key, (variable, sep) in _PIP_TO_UV.items():
        if key in pip and variable not in env:
            env[variable] = sep.join(pip[key].split())
    if pip.get("no-index", "").lower() in ("1", "true", "yes", "on") and "UV_NO_INDEX" not in env:
        env["UV_NO_INDEX"] = "1"
    env.setdefault("UV_INDEX_STRATEGY", "unsafe-best-match")
    env.setdefault("UV_PYTHON_DOWNLOADS", "never")
    env.setdefault("UV_NO_PROGRESS", "1")
    return env


def ready_python(base_root: Path, torch: str | None = None) -> str | None:
    """The interpreter of an already prepared environment for this base, else None."""
    venv = cache.store_dir("testenv", env_key(base_root, torch=torch))
    return str(venv / "bin" / "python") if (venv / READY).is_file() else None


def prepare(base_root: Path, python: str = sys.executable, torch: str | None = None) -> str:
    """The interpreter of the environment for ``base_root``, building it on first use (``torch``:
    the project's ``[audit] torch``, over what the base names)."""
    key = env_key(base_root, python, torch)
    venv = cache.store_dir("testenv", key)
    if (venv / READY).is_file():
        return str(venv / "bin" / "python")
    with cache.entry_lock("testenv", key):
        if (venv / READY).is_file():
            return str(venv / "bin" / "python")
        shutil.rmtree(venv, ignore_errors=True)  # a half-built one from an interrupted run
        chosen = resolve_torch(base_root, torch)
        where = f", named by {chosen['source']}" if chosen["source"] else ""
        said = f"torch {chosen['requirement'] or '(none)'}: {chosen['note']}{where}"
        print(f"patchkit: test environment: {said}", file=sys.stderr, flush=True)
        uv = uv_binary() if os.environ.get("PATCHKIT_INSTALLER", "uv") != "pip" else None
        if uv:
            marker = _build_with_uv(uv, venv, base_root, python, chosen["requirement"])
        else:
            marker = _build_with_pip(venv, base_root, python, chosen["requirement"])
        marker["torch"] = chosen
        (venv / READY).write_text(json.dumps(marker, indent=1))
    return str(venv / "bin" / "python")


def _build_with_uv(uv: str, venv: Path, base_root: Path, python: str, torch: str | None) -> dict:
    env = uv_environment(pip_settings(python))
    create = [uv, "venv", "--quiet", "--python", python, str(venv)]
    # no --compile-bytecode: compiling all ~17,000 files cost ~45 s; the first pytest run compiles
    # the few thousand the tests import (gates/tests.py lets it write them)
    install = [
        uv,
        "pip",
        "install",
        "--python",
        str(venv / "bin" / "python"),
        *requirements(base_root, torch),
    ]
    with timing.stage("testenv.venv", "uv venv"):
        _run("venv (uv)", create, env)
    started = time.perf_counter()
    with timing.stage(
        "testenv.install", f"uv pip install: {torch or 'no torch'}, " + REQUIREMENTS + ", test tools"
    ):
        proc = _run("install (uv)", install, env)
    for phase, count, seconds in uv_phases(proc.stderr):  # one after the other, as uv reports them
        unit = "files" if phase == "compile" else "packages"
        timing.record(f"testenv.install.{phase}", seconds, f"{count} {unit} (uv)", started)
        started += seconds
    settings = {k: env[k] for k in sorted(env) if k.startswith("UV_") or k == "SSL_CERT_FILE"}
    return {"installer": "uv", "steps": [create, install], "settings": settings}


def _build_with_pip(venv: Path, base_root: Path, python: str, torch: str | None) -> dict:
    with timing.stage("testenv.venv", "python -m venv (uv cannot run here)"):
        _run("venv", [python, "-m", "venv", str(venv)])
    plan = steps(venv, base_root, torch)
    for label, cmd in plan:
        with timing.stage("testenv.install", f"pip: {label}"):
            _run(label, cmd)
    return {"installer": "pip", "steps": [c for _, c in plan]}


def uv_phases(stderr: str) -> list[tuple[str, int, float]]:
    """uv's own account of an install: (resolve | download | install, packages, seconds)."""
    names = {
        "Resolved": "resolve",
        "Prepared": "download",
        "Installed": "link",
        "Uninstalled": "uninstall",
        "Bytecode compiled": "compile",
    }
    phases = []
    for line in stderr.splitlines():
        if match := _UV_REPORT.match(line.strip()):
            seconds = float(match.group(3)) / (1000 if match.group(4) == "ms" else 1)
            phases.append((names[match.group(1)], int(match.group(2)), seconds))
    return phases


def _run(label: str, cmd: list[str], env: dict[str, str] | None = None) -> CompletedProcess:
    print(f"patchkit: test environment: {label} ...", file=sys.stderr, flush=True)
    try:
        proc = run_process(cmd, text=True, timeout=INSTALL_TIMEOUT, env=env)
    except (OSError, TimeoutExpired) as exc:
        raise TestEnvError(f"{label}: {exc}") from exc
    if proc.returncode != 0:
        tail = " / ".join(proc.stderr.strip().splitlines()[-2:])
        raise TestEnvError(f"{label}: exit {proc.returncode}: {tail}")
    return proc
