"""``patchkit runtime``: a plugin's monkeypatches against a pin (and what a bump from ``--since``
changes), written as an audit record and its reports."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from patchkit.audit.verdict import exit_code
from patchkit.commands.audit import Outputs, write_reports
from patchkit.errors import UserError
from patchkit.project import Project, parse_pin
from patchkit.values import Pin


@dataclass
class Options:
    plugin_dir: Path
    since: str | None = None
    python: str | None = None
    json_out: Path | None = None
    html: Path | None = None
    md: Path | None = None
    junit: Path | None = None
    lang: str = "en"
    timeout: float = 600


def run(project: Project, given: Options) -> int:
    from patchkit.base.pin import prepare_base
    from patchkit.report.words import fill_words
    from patchkit.runtime.engine import RuntimeOptions, run_runtime

    started = time.perf_counter()
    plugin_dir = given.plugin_dir
    if not plugin_dir.is_dir():
        raise UserError("not a directory (the plugin's package, e.g. vllm_ascend/patch)", str(plugin_dir))
    pin = project.require_pin()
    old = _since(given.since) if given.since else None
    options = RuntimeOptions(
        pin,
        prepare_base(pin),
        old,
        prepare_base(old) if old else None,
        _interpreter(given.python) if given.python else None,
        given.timeout,
    )
    result = fill_words(run_runtime(plugin_dir, options))
    outputs = Outputs(given.json_out, given.html, given.md, given.junit).resolved(
        project.reports_dir, "runtime"
    )
    written = write_reports(result, outputs, given.lang)
    from patchkit.commands.outcome import shown
    from patchkit.ui.summary import print_audit

    print_audit(result, given.lang, [shown(p) for p in written], time.perf_counter() - started)
    return exit_code(result)


def _since(text: str) -> Pin:
    """--since: an older pin in any form (``project.parse_pin``)."""
    return parse_pin(text, "--since").pin()


def _interpreter(python: str) -> str:
    resolved = shutil.which(python) if "/" not in python else python
    if resolved is None or not Path(resolved).is_file():
        raise UserError(f"--python {python}: no such interpreter")
    return str(Path(resolved).absolute())  # the probe runs in a scratch directory
