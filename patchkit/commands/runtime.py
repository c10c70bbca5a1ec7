"""``patchkit runtime``: a plugin's monkeypatches against a pin (and what a bump from ``--since``
changes), written as an audit record and its reports."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from patchkit.audit.model import AuditResult
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
    _print_summary(result, written, time.perf_counter() - started)
    return exit_code(result)


def _since(text: str) -> Pin:
    """--since: an older pin in any form (``project.parse_pin``)."""
    return parse_pin(text, "--since").pin()


def _interpreter(python: str) -> str:
    resolved = shutil.which(python) if "/" not in python else python
    if resolved is None or not Path(resolved).is_file():
        raise UserError(f"--python {python}: no such interpreter")
    return str(Path(resolved).absolute())  # the probe runs in a scratch directory


def _print_summary(result: AuditResult, written: list[Path], seconds: float) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from patchkit.report.terminal import STYLE

    console = Console(highlight=False, soft_wrap=True)
    gates = list(dict.fromkeys(g.gate for p in result.patches for g in p.gates))
    pin = result.base.version or result.base.rev or result.base.path or "?"
    table = Table(title=f"runtime patches of {result.series_dir} against vLLM {pin}")
    for column in ("module", "targets", "verdict", *gates):
        table.add_column(column)
    for pa in result.patches:
        cells = [Text(g.status, style=STYLE[g.status]) for g in pa.gates]
        table.add_row(Text(pa.patch), str(len(pa.targets)), Text(pa.verdict, style=STYLE[pa.verdict]), *cells)
    console.print(table)
    for pa in result.patches:
        for target in pa.targets:
            where = f" ({target.defined_in})" if target.defined_in else ""
            line = target.lines[0] if target.lines else 0
            console.print(f"{pa.patch}:{line}: {target.status}: {target.target}{where}", markup=False)
    counts = ", ".join(f"{k} {v}" for k, v in result.environment.get("counts", {}).items())
    console.print(f"targets: {counts}", markup=False)
    console.print(
        f"verdict: {result.verdict}; reports: {', '.join(map(str, written))}; {seconds:.1f} s", markup=False
    )
