"""``patchkit runtime``: a plugin's monkeypatches against a pin (and what a bump from ``--since``
changes), written as an audit record and its reports."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

from patchkit.audit.verdict import exit_code
from patchkit.commands.audit import Outputs, write_reports
from patchkit.errors import UserError
from patchkit.values import Pin

DEFAULT_REPORTS = Path("reports")
SPEC = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([0-9A-Za-z.+!_-]+)\s*")


def run(
    plugin_dir: Path,
    pin_file: Path | None,
    since: str | None,
    python: str | None,
    outputs: Outputs,
    lang: str,
    timeout: float,
) -> int:
    from patchkit.base.pin import prepare_base
    from patchkit.report.words import fill_words
    from patchkit.runtime.engine import RuntimeOptions, run_runtime

    started = time.perf_counter()
    if not plugin_dir.is_dir():
        raise UserError("not a directory (the plugin's package, e.g. vllm_ascend/patch)", str(plugin_dir))
    pin = _pin(pin_file)
    old = _since(since) if since else None
    options = RuntimeOptions(
        pin,
        prepare_base(pin),
        old,
        prepare_base(old) if old else None,
        _interpreter(python) if python else None,
        timeout,
    )
    result = fill_words(run_runtime(plugin_dir, options))
    if not any((outputs.json, outputs.html, outputs.md, outputs.junit)):
        outputs = Outputs(
            DEFAULT_REPORTS / "runtime.json", DEFAULT_REPORTS / "runtime.html", DEFAULT_REPORTS / "runtime.md"
        )
    written = write_reports(result, outputs, lang)
    from patchkit.commands.conventions import shown
    from patchkit.ui.summary import print_audit

    print_audit(result, lang, [shown(p) for p in written], time.perf_counter() - started)
    return exit_code(result)


def _pin(pin_file: Path | None) -> Pin:
    from patchkit.config import find_project_config, load_pin

    config = pin_file or find_project_config()
    if config is None:
        raise UserError("no pin: pass --config FILE (no patchkit.toml found from here up)")
    return load_pin(config)


def _since(text: str) -> Pin:
    """--since: a pin file, or NAME==VERSION whose sdist hash the package index lists."""
    path = Path(text)
    if path.is_file():
        from patchkit.config import load_pin

        return load_pin(path)
    match = SPEC.fullmatch(text)
    if not match:
        raise UserError(f"--since {text!r}: neither a pin file nor NAME==VERSION (e.g. vllm==0.23.0)")
    from patchkit.base.package_index import sdist_sha256

    name, version = match.groups()
    _, sha256 = sdist_sha256(name, version)
    return Pin(name=name, source="index", version=version, sha256=sha256)


def _interpreter(python: str) -> str:
    resolved = shutil.which(python) if "/" not in python else python
    if resolved is None or not Path(resolved).is_file():
        raise UserError(f"--python {python}: no such interpreter")
    return str(Path(resolved).absolute())  # the probe runs in a scratch directory
