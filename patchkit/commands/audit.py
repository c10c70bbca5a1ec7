"""``patchkit audit``: run the gates over a series and write the reports."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

from patchkit import timing
from patchkit.atomic import write_atomic
from patchkit.audit.engine import AuditOptions, parse_shard, run_audit
from patchkit.audit.gates.registry import GATES
from patchkit.audit.gates.tests import TestSettings
from patchkit.audit.model import AuditResult
from patchkit.base.tree import BaseTree
from patchkit.config import ProjectConfig, load_config, project_config
from patchkit.errors import EXIT_FAILED, EXIT_OK, UserError
from patchkit.report import render_all
from patchkit.report.words import fill_words
from patchkit.split.rules import load_rules
from patchkit.values import Pin

DEFAULT_REPORTS = Path("reports")


def run(series_dir: Path | None, pin_file: Path | None, base: Path | None, gates: str | None,
        jobs: int | None, python: str | None, json_out: Path | None, html: Path | None, md: Path | None,
        junit: Path | None, shard: str | None, lang: str, no_cache: bool,
        prepare_env: bool) -> int:  # fmt: skip
    started = time.perf_counter()
    timing.reset()
    config = load_config(pin_file) if pin_file else project_config()
    chosen = _gates(gates, config)
    shard_spec = parse_shard(shard)
    series_dir = series_dir or config.series.dir
    if not (series_dir / "series").is_file():
        raise UserError("not a series directory (no 'series' file)", str(series_dir))
    tree, pin = _base(base, pin_file, config, series_dir)
    options = AuditOptions(
        gates=chosen,
        jobs=jobs or config.audit.jobs,
        use_cache=not no_cache,
        shard=shard_spec,
        # the imports gate imports for real only in an environment the user named (--python)
        settings={"tests": _test_settings(python, config, tree, pin, not no_cache, prepare_env)}
        if "tests" in chosen or ("imports" in chosen and (python or config.audit.python))
        else {},
    )
    with _progress() as tick, timing.stage("audit.gates", f"gates {','.join(chosen)}, jobs {options.jobs}"):
        options.progress = tick
        result = fill_words(run_audit(series_dir, tree, pin, load_rules(config.series.rules), options))
    timing.record("audit.total", time.perf_counter() - started, "all but writing the reports", started)
    result.stages = [s.to_dict() for s in timing.stages()]
    written = write_reports(result, json_out, html, md, junit, lang)
    _print_summary(result, written, time.perf_counter() - started)
    if timing.was_cold(timing.stages()):
        _print_stages(timing.stages())
    return EXIT_OK if all(pa.verdict == "ready" for pa in result.patches) else EXIT_FAILED


def _gates(text: str | None, config: ProjectConfig) -> list[str]:
    names = [g.strip() for g in text.split(",") if g.strip()] if text else list(config.audit.gates)
    unknown = [g for g in names if g not in GATES]
    if unknown or not names:
        raise UserError(
            f"--gates: unknown gate {unknown[0] if unknown else '(none)'!r} (known: {', '.join(GATES)})"
        )
    return names


def _base(
    base: Path | None, pin_file: Path | None, config: ProjectConfig, series_dir: Path
) -> tuple[BaseTree, Pin]:
    """--base, else --pin, else the project's pin for its own series, else the series' split.json pin."""
    from patchkit.base.pin import prepare_base, tree_hash

    if base is not None and pin_file is not None:
        raise UserError("give --base or --pin, not both")
    if base is not None:
        tree = BaseTree(base)
        return tree, Pin(source="path", path=str(tree.root), tree_hash=tree_hash(tree.root))
    own_series = config.file is not None and series_dir.resolve() == config.series.dir.resolve()
    pin = config.target if own_series or pin_file else (_series_pin(series_dir) or config.target)
    if pin is None:
        raise UserError(
            "no base: pass --base DIR or --pin patchkit.toml (no patchkit.toml from here up, "
            "and the series' split.json names no usable base)"
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
                   prepare_env: bool) -> TestSettings:  # fmt: skip
    from patchkit.audit import testenv

    settings = TestSettings(python="", base_root=tree.root, base_hash=pin.tree_hash or "",
                            test_timeout=config.audit.test_timeout,
                            per_test_timeout=config.audit.per_test_timeout, use_cache=use_cache,
                            workers=config.audit.test_workers or test_workers(config.audit.jobs))  # fmt: skip
    chosen = python or config.audit.python
    if chosen is None and (prepare_env or config.audit.prepare_env):
        try:
            chosen = testenv.prepare(tree.root)
        except testenv.TestEnvError as exc:
            settings.env_error = str(exc)
    chosen = chosen or testenv.ready_python(tree.root) or sys.executable
    resolved = shutil.which(chosen) if "/" not in chosen else chosen
    if resolved is None or not Path(resolved).exists():
        raise UserError(f"--python {chosen}: no such interpreter")
    settings.python = resolved
    return settings


def test_workers(jobs: int) -> int:
    """pytest-xdist workers per run: the cores this process may use, shared by the parallel jobs."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, jobs))


def write_reports(result: AuditResult, json_out: Path | None, html: Path | None, md: Path | None,
                  junit: Path | None, lang: str) -> list[Path]:  # fmt: skip
    """JSON always; HTML/Markdown/JUnit as asked."""
    if not any((json_out, html, md, junit)):
        json_out, html, md = (
            DEFAULT_REPORTS / "audit.json",
            DEFAULT_REPORTS / "audit.html",
            DEFAULT_REPORTS / "audit.md",
        )
    json_out = json_out or DEFAULT_REPORTS / "audit.json"
    json_out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(json_out, json.dumps(result.to_dict(), indent=1, ensure_ascii=False) + "\n")
    written = [json_out]
    if html or md or junit:
        for path in (html, md, junit):
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
        render_all(result, html=html, md=md, junit=junit, lang=lang)
        written += [p for p in (html, md, junit) if p is not None]
    return written


class _progress:
    """A rich progress line on stderr when it is a terminal; plain log lines otherwise (CI)."""

    def __enter__(self):
        if not sys.stderr.isatty():
            self._bar = None
            return lambda name: print(f"patchkit: audited {name}", file=sys.stderr, flush=True)
        from rich.progress import Progress

        self._bar = Progress(transient=True, console=None)
        self._bar.start()
        self._task = self._bar.add_task("auditing patches", total=None)
        return lambda name: self._bar.update(self._task, advance=1, description=f"audited {name}")

    def __exit__(self, *exc) -> None:
        if getattr(self, "_bar", None) is not None:
            self._bar.stop()


def _print_summary(result: AuditResult, written: list[Path], seconds: float) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=True)
    gates = [g.gate for g in result.patches[0].gates] if result.patches else []
    table = Table(
        title=f"audit of {result.series_dir}" + (f" (shard {result.shard})" if result.shard else "")
    )
    for column in ("patch", "verdict", *gates):
        table.add_column(column)
    for pa in result.patches:
        cells = [f"{g.status}{' (cached)' if g.cached else ''}" for g in pa.gates]
        table.add_row(pa.patch, pa.verdict, *cells)
    console.print(table)
    for pa in result.patches:
        for g in pa.gates:
            console.print(f"{pa.patch} {g.gate}: {g.status}{' [cached]' if g.cached else ''} - {g.summary}",
                          markup=False)  # fmt: skip
    console.print(f"verdict: {result.verdict}; reports: {', '.join(map(str, written))}; {seconds:.1f} s",
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
