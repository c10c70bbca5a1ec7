"""``patchkit audit``: run the gates over a series and write the reports."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from patchkit import timing
from patchkit.atomic import write_atomic
from patchkit.audit.engine import AuditOptions, parse_shard, run_audit
from patchkit.audit.gates.registry import GATES
from patchkit.audit.gates.tests import TestSettings
from patchkit.audit.model import AuditResult
from patchkit.audit.verdict import exit_code
from patchkit.base.tree import BaseTree
from patchkit.commands.conventions import shown
from patchkit.config import ProjectConfig, load_config, owns_series, project_config
from patchkit.errors import UserError
from patchkit.report import render_all
from patchkit.report.words import fill_words
from patchkit.split.rules import load_rules
from patchkit.ui.console import verbosity
from patchkit.ui.progress import AuditProgress
from patchkit.ui.summary import print_audit, print_stages
from patchkit.values import Pin

DEFAULT_REPORTS = Path("reports")


@dataclass
class Outputs:
    """The files the audit writes; none given means the defaults (reports/audit.json, .html, .md)."""

    json: Path | None = None
    html: Path | None = None
    md: Path | None = None
    junit: Path | None = None

    def resolved(self) -> Outputs:
        if any((self.json, self.html, self.md, self.junit)):
            return self
        return Outputs(
            DEFAULT_REPORTS / "audit.json", DEFAULT_REPORTS / "audit.html", DEFAULT_REPORTS / "audit.md"
        )


def run(series_dir: Path | None, pin_file: Path | None, base: Path | None, gates: str | None,
        optional_gates: str | None, jobs: int | None, python: str | None, outputs: Outputs,
        shard: str | None, lang: str, no_cache: bool, prepare_env: bool,
        since: Path | None = None, select: str | None = None) -> int:  # fmt: skip
    started = time.perf_counter()
    timing.reset()
    config = load_config(pin_file) if pin_file else project_config()
    chosen = _gates(gates, config)
    optional = _optional(optional_gates, config)
    shard_spec = parse_shard(shard)
    series_dir = series_dir or config.series.dir
    if not (series_dir / "series").is_file():
        raise UserError("not a series directory (no 'series' file)", str(series_dir))
    tree, pin = _base(base, pin_file, config, series_dir)
    options = AuditOptions(
        gates=chosen,
        optional=optional,
        jobs=jobs or config.audit.jobs,
        use_cache=not no_cache,
        shard=shard_spec,
        # the imports gate imports for real only in an environment the user named (--python)
        settings={
            "tests": _test_settings(
                python, config, tree, pin, not no_cache, prepare_env, _select(select, config)
            )
        }
        if "tests" in chosen or ("imports" in chosen and (python or config.audit.python))
        else {},
    )
    with (
        AuditProgress(lang=lang) as tell,
        timing.stage("audit.gates", f"gates {','.join(chosen)}, jobs {options.jobs}"),
    ):
        options.progress = tell
        result = fill_words(run_audit(series_dir, tree, pin, load_rules(config.series.rules), options))
    timing.record("audit.total", time.perf_counter() - started, "all but writing the reports", started)
    result.stages = [s.to_dict() for s in timing.stages()]
    outputs = outputs.resolved()
    if since is not None:
        from patchkit.interdiff.since import changes_since

        result.since = changes_since(since, result)
    elif not result.shard:  # the last revision's record, beside the report or in the cache
        from patchkit.interdiff.previous import since_last_revision

        result.since = since_last_revision(result, outputs.json, use_cache=not no_cache) or {}
    written = write_reports(result, outputs, lang)
    print_audit(result, lang, [shown(p) for p in written], time.perf_counter() - started)
    if timing.was_cold(timing.stages()) or verbosity() > 0:
        print_stages(timing.stages(), lang)
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


def _base(
    base: Path | None, pin_file: Path | None, config: ProjectConfig, series_dir: Path
) -> tuple[BaseTree, Pin]:
    """--base, else --config, else the project's pin for its own series, else the series' split.json pin."""
    from patchkit.base.pin import prepare_base, tree_hash

    if base is not None and pin_file is not None:
        raise UserError("give --base or --config, not both")
    if base is not None:
        tree = BaseTree(base)
        return tree, Pin(source="path", path=str(tree.root), tree_hash=tree_hash(tree.root))
    own_series = owns_series(config, series_dir)
    pin = config.target if own_series or pin_file else _series_pin(series_dir)
    if pin is None:
        raise UserError(
            "no base: pass --base DIR or --config patchkit.toml (the series is not this project's own "
            "[series].dir, and its split.json names no usable base)"
        )
    return BaseTree(prepare_base(pin)), pin


def _series_pin(series_dir: Path) -> Pin | None:
    """The base the series was split or rebased against (split.json), when it can be prepared."""
    from patchkit.series.files import load_split_json

    series = load_split_json(series_dir)
    if series is None:
        return None
    pin = series.base
    if pin.source == "path" and not (pin.path and Path(pin.path).is_dir()):
        return None
    return pin


def _test_settings(python: str | None, config: ProjectConfig, tree: BaseTree, pin: Pin, use_cache: bool,
                   prepare_env: bool, select: str = "upstream") -> TestSettings:  # fmt: skip
    from patchkit.audit import testenv

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
