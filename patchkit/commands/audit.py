"""``patchkit audit``: run the gates over a series and write the reports."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from patchkit import timing
from patchkit.atomic import write_atomic
from patchkit.audit.engine import AuditOptions, parse_shard, run_audit
from patchkit.audit.gates.registry import GATES
from patchkit.audit.gates.tests import TestSettings
from patchkit.audit.model import AuditResult
from patchkit.audit.verdict import exit_code
from patchkit.commands.outcome import shown
from patchkit.commands.progress import AuditProgress
from patchkit.config import ProjectConfig
from patchkit.console import verbosity
from patchkit.errors import UserError
from patchkit.project import Project
from patchkit.report import render_all
from patchkit.report.words import fill_words
from patchkit.split.rules import load_rules

if TYPE_CHECKING:
    from patchkit.base.tree import BaseTree
    from patchkit.values import Pin


@dataclass
class Outputs:
    """The files the audit writes; none given means the defaults (reports/audit.json, .html, .md)."""

    json: Path | None = None
    html: Path | None = None
    md: Path | None = None
    junit: Path | None = None

    def resolved(self, reports: Path, stem: str = "audit") -> Outputs:
        """These, or the default reports ``reports/<stem>.json, .html, .md`` when none is named."""
        if any((self.json, self.html, self.md, self.junit)):
            return self
        return Outputs(reports / f"{stem}.json", reports / f"{stem}.html", reports / f"{stem}.md")


@dataclass
class Options:
    series_dir: Path | None = None
    gates: str | None = None
    optional_gates: str | None = None
    jobs: int | None = None
    python: str | None = None
    json_out: Path | None = None
    html: Path | None = None
    md: Path | None = None
    junit: Path | None = None
    shard: str | None = None
    lang: str = "en"
    no_cache: bool = False
    since: Path | None = None
    prepare_env: bool = False
    select: str | None = None

    @property
    def outputs(self) -> Outputs:
        return Outputs(self.json_out, self.html, self.md, self.junit)


def run(project: Project, given: Options) -> int:
    started = time.perf_counter()
    timing.reset()
    config = project.config
    chosen = _gates(given.gates, config)
    optional = _optional(given.optional_gates, config)
    shard_spec = parse_shard(given.shard)
    series_dir = project.series(given.series_dir)
    if not (series_dir / "series").is_file():
        raise UserError("not a series directory (no 'series' file)", str(series_dir))
    tree, pin = project.base(series_dir)
    python, no_cache, select = given.python, given.no_cache, given.select
    options = AuditOptions(
        gates=chosen,
        optional=optional,
        jobs=given.jobs or config.audit.jobs,
        use_cache=not no_cache,
        shard=shard_spec,
        # the imports gate imports for real only in an environment the user named (--python)
        settings={
            "tests": _test_settings(
                python, config, tree, pin, not no_cache, given.prepare_env, _select(select, config)
            )
        }
        if "tests" in chosen or ("imports" in chosen and (python or config.audit.python))
        else {},
    )
    with (
        AuditProgress() as tell,
        timing.stage("audit.gates", f"gates {','.join(chosen)}, jobs {options.jobs}"),
    ):
        options.progress = tell
        result = fill_words(run_audit(series_dir, tree, pin, load_rules(config.series.rules), options))
    timing.record("audit.total", time.perf_counter() - started, "all but writing the reports", started)
    result.stages = [s.to_dict() for s in timing.stages()]
    if given.since is not None:
        from patchkit.interdiff.since import changes_since

        result.since = changes_since(given.since, result)
    written = write_reports(result, given.outputs.resolved(project.reports_dir), given.lang)
    _print_summary(result, written, time.perf_counter() - started)
    if timing.was_cold(timing.stages()) or verbosity() > 0:
        _print_stages(timing.stages())
    return exit_code(result)


def _gates(text: str | None, config: ProjectConfig) -> list[str]:
    names = [g.strip() for g in text.split(",") if g.strip()] if text else list(config.audit.gates)
    unknown = [g for g in names if g not in GATES]
    if unknown or not names:
        raise UserError(
            f"--gates: unknown gate {unknown[0] if unknown else '(none)'!r} (known: {', '.join(GATES)})"
        )
    return names


def _optional(text: str | None, config: ProjectConfig) -> list[str]:
    """--optional-gates, else [audit] optional: gates whose could-not-run the project accepts."""
    names = (
        [g.strip() for g in text.split(",") if g.strip()] if text is not None else list(config.audit.optional)
    )
    if unknown := [g for g in names if g not in GATES]:
        raise UserError(f"--optional-gates: unknown gate {unknown[0]!r} (known: {', '.join(GATES)})")
    return names


def _select(text: str | None, config: ProjectConfig) -> str:
    """--select, else [audit] select: which tests the tests gate runs (audit/affectedrun)."""
    from patchkit.choices import SELECTIONS

    chosen = text if text is not None else config.audit.select
    if chosen not in SELECTIONS:
        raise UserError(f"--select: {chosen!r} is not one of {', '.join(SELECTIONS)}")
    return chosen


def _test_settings(python: str | None, config: ProjectConfig, tree: BaseTree, pin: Pin, use_cache: bool,
                   prepare_env: bool, select: str = "upstream") -> TestSettings:  # fmt: skip
    from patchkit.testrun import testenv

    settings = TestSettings(python="", base_root=tree.root, base_hash=pin.tree_hash or "",
                            test_timeout=config.audit.test_timeout,
                            per_test_timeout=config.audit.per_test_timeout, use_cache=use_cache,
                            workers=config.audit.test_workers or test_workers(config.audit.jobs),
                            select=select)  # fmt: skip
    chosen = python or config.audit.python
    if chosen is None and (prepare_env or config.audit.prepare_env):
        try:
            chosen = testenv.prepare(tree.root, torch=config.audit.torch)
        except testenv.TestEnvError as exc:
            settings.env_error = str(exc)
    chosen = chosen or testenv.ready_python(tree.root, config.audit.torch) or sys.executable
    resolved = shutil.which(chosen) if "/" not in chosen else chosen
    if resolved is None or not Path(resolved).exists():
        raise UserError(f"--python {chosen}: no such interpreter")
    settings.python = resolved
    return settings


def test_workers(jobs: int) -> int:
    """pytest-xdist workers per run: the cores this process may use, shared by the parallel jobs."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, jobs))


def write_reports(result: AuditResult, outputs: Outputs, lang: str) -> list[Path]:
    """Exactly the files asked for (``outputs.resolved()`` gives the defaults when none was)."""
    written = [p for p in (outputs.json, outputs.html, outputs.md, outputs.junit) if p is not None]
    for path in written:
        path.parent.mkdir(parents=True, exist_ok=True)
    if outputs.json is not None:
        text = json.dumps(result.to_dict(), indent=1, ensure_ascii=False) + "\n"
        write_atomic(outputs.json, text)
    if outputs.html or outputs.md or outputs.junit:
        render_all(result, html=outputs.html, md=outputs.md, junit=outputs.junit, lang=lang)
    return written


def _print_summary(result: AuditResult, written: list[Path], seconds: float) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from patchkit.report.terminal import STYLE, short_witness

    console = Console(highlight=False, soft_wrap=True)
    reports = ", ".join(map(shown, written))
    if verbosity() < 0:  # -q: the result only
        console.print(f"verdict: {result.verdict}; reports: {reports}", markup=False)
        return
    gates = [g.gate for g in result.patches[0].gates] if result.patches else []
    table = Table(
        title=f"audit of {result.series_dir}" + (f" (shard {result.shard})" if result.shard else "")
    )
    for column in ("patch", "verdict", *gates):
        table.add_column(column)
    for pa in result.patches:
        cells = [Text(g.status + (" (cached)" if g.cached else ""), style=STYLE[g.status]) for g in pa.gates]
        table.add_row(Text(pa.patch), Text(pa.verdict, style=STYLE[pa.verdict]), *cells)
    console.print(table)
    for pa in result.patches:
        for g in pa.gates:
            witness = short_witness(g, "en")
            console.print(f"{pa.patch} {g.gate}: {g.status}{' [cached]' if g.cached else ''} - {g.summary}"
                          f" [witness: {witness}]", markup=False)  # fmt: skip
    for pa in result.patches:
        if pa.verdict != "ready" or any(g.status == "could-not-run" for g in pa.gates):
            for reason in pa.reasons:
                console.print(f"{pa.patch}: {pa.verdict}: {reason}", markup=False)
    if result.since:  # audit --since: what changed since the last audited revision
        from patchkit.report.since import since_lead, since_patch

        console.print(since_lead(result, "en"), markup=False)
        for pa in result.patches:
            if since_patch(result, pa.patch, "en"):
                console.print(f"{pa.patch}: {since_patch(result, pa.patch, 'en')}", markup=False)
    console.print(f"verdict: {result.verdict}; reports: {reports}; {seconds:.1f} s",
                  markup=False)  # fmt: skip


def _print_stages(records: list[timing.Stage]) -> None:
    """Where a (partly) cold run spent its time; stages that ran in parallel overlap."""
    from rich.table import Table

    from patchkit.console import rich_console

    table = Table(title="where the time went (wall seconds; gates run in parallel, so stages overlap)")
    for column, justify in (("stage", "left"), ("detail", "left"), ("start", "right"), ("seconds", "right")):
        table.add_column(column, justify=justify)
    for s in records:
        if s.name != "tests.materialise":
            table.add_row(s.name, s.detail, f"{s.start:.1f}", f"{s.seconds:.1f}")
    for name, count, seconds in timing.totals(records):
        if count > 1:
            table.add_row(f"{name} (all)", f"{count} runs", "", f"{seconds:.1f}")
    rich_console(stderr=True).print(table)
