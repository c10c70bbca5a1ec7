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
from patchkit.config import ProjectConfig
from patchkit.errors import UserError
from patchkit.project import Project
from patchkit.report import render_all
from patchkit.report.words import fill_words
from patchkit.split.rules import load_rules
from patchkit.ui.console import verbosity
from patchkit.ui.progress import AuditProgress
from patchkit.ui.summary import print_audit, print_stages

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
        AuditProgress(lang=given.lang) as tell,
        timing.stage("audit.gates", f"gates {','.join(chosen)}, jobs {options.jobs}"),
    ):
        options.progress = tell
        result = fill_words(run_audit(series_dir, tree, pin, load_rules(config.series.rules), options))
    timing.record("audit.total", time.perf_counter() - started, "all but writing the reports", started)
    result.stages = [s.to_dict() for s in timing.stages()]
    outputs = given.outputs.resolved(project.reports_dir)
    if given.since is not None:
        from patchkit.interdiff.since import changes_since

        result.since = changes_since(given.since, result)
    elif not result.shard:  # the last revision's record, beside the report or in the cache
        from patchkit.interdiff.previous import since_last_revision

        result.since = since_last_revision(result, outputs.json, use_cache=not no_cache) or {}
    written = write_reports(result, outputs, given.lang)
    print_audit(result, given.lang, [shown(p) for p in written], time.perf_counter() - started)
    if timing.was_cold(timing.stages()) or verbosity() > 0:
        print_stages(timing.stages(), given.lang)
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
