"""``patchkit audit``, ``report`` and ``runtime``: gates, verdicts and their reports."""

# No ``from __future__ import annotations``: typer reads these annotations.
from pathlib import Path
from typing import Annotated, Optional

import click
import typer

from patchkit.choices import GATE_NAMES, LANGS, SELECTIONS
from patchkit.cli.conventions import gate_list, optional_gate_list
from patchkit.cli.options import BASE, CONFIG, HTML, LANG, MD, SERIES, invoke
from patchkit.cli.root import app

JUNIT = typer.Option(help="write a JUnit XML of the gates here")


@app.command()
def audit(
    series_dir: Annotated[Optional[Path], SERIES] = None,
    config: Annotated[Optional[str], CONFIG] = None,
    base: Annotated[Optional[Path], BASE] = None,
    gates: Annotated[
        Optional[str], typer.Option(callback=gate_list, help=f"comma list of {','.join(GATE_NAMES)}")
    ] = None,
    optional_gates: Annotated[
        Optional[str],
        typer.Option(
            callback=optional_gate_list,
            help="comma list of gates whose could-not-run is accepted ('': none; default: [audit] optional)",
        ),
    ] = None,
    jobs: Annotated[Optional[int], typer.Option(min=1, help="patches audited in parallel")] = None,
    python: Annotated[
        Optional[str],
        typer.Option(help="interpreter the tests gate runs pytest with and the imports gate imports with"),
    ] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="write the audit JSON here")] = None,
    html: Annotated[Optional[Path], HTML] = None,
    md: Annotated[Optional[Path], MD] = None,
    junit: Annotated[Optional[Path], JUNIT] = None,
    shard: Annotated[
        Optional[str],
        typer.Option(
            help="I/N: this runner's share; with the tests gate, its tests of the whole audit "
            "(balanced by test-durations.json) and the other gates of every N-th patch, else every "
            "N-th patch; patchkit report merges the shards"
        ),  # fmt: skip
    ] = None,
    lang: Annotated[str, LANG] = "en",
    no_cache: Annotated[bool, typer.Option("--no-cache", help="ignore and do not fill the cache")] = False,
    since: Annotated[Optional[Path], typer.Option(help="the last audit's JSON: what changed")] = None,
    prepare_env: Annotated[
        bool, typer.Option("--prepare-env", help="build the cached test venv for the base if needed")
    ] = False,
    select: Annotated[
        Optional[str],
        typer.Option(
            click_type=click.Choice(SELECTIONS),
            help="tests: upstream (CI's selection, default) | affected (only tests the base's "
            "coverage map ties to the change; [audit] select)",
        ),  # fmt: skip
    ] = None,
) -> None:
    """Run the gates ([audit] gates, else apply, ruff, dco, tests; also lint, imports) over a series
    and write the reports (default: reports/ audit.json, .html, .md; any output flag replaces them).
    Exit 0 every patch ready, 1 a gate failed, 3 incomplete (a requested gate could not run)."""
    invoke("audit", locals())


@app.command()
def report(
    results: Annotated[list[Path], typer.Argument(help="audit result JSON files (shards are merged)")],
    html: Annotated[Optional[Path], HTML] = None,
    md: Annotated[Optional[Path], typer.Option(help="write the Markdown PR comment here")] = None,
    junit: Annotated[Optional[Path], typer.Option(help="write JUnit XML here")] = None,
    lang: Annotated[
        Optional[str],
        typer.Option(click_type=click.Choice(LANGS), help="report language (default: from the locale)"),
    ] = None,
) -> None:
    """Re-render (and merge) audit results as HTML, Markdown and JUnit."""
    invoke("report", locals())


@app.command()
def runtime(
    plugin_dir: Annotated[Path, typer.Argument(help="the plugin's patch package (e.g. vllm_ascend/patch)")],
    config: Annotated[Optional[str], CONFIG] = None,
    since: Annotated[
        Optional[str], typer.Option(help="an older pin: a pin file, vllm==X.Y.Z, git+URL@REV, a directory")
    ] = None,
    python: Annotated[Optional[str], typer.Option(help="a python with the pinned vLLM (real import)")] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="write the runtime JSON here")] = None,
    html: Annotated[Optional[Path], HTML] = None,
    md: Annotated[Optional[Path], MD] = None,
    junit: Annotated[Optional[Path], typer.Option(help="write a JUnit XML of the checks here")] = None,
    lang: Annotated[str, LANG] = "en",
    timeout: Annotated[float, typer.Option(help="seconds the real import may take")] = 600,
) -> None:
    """A plugin's monkeypatches checked against the pinned vLLM: each target there, its signature, its
    change since --since (with the upstream diff). Default reports: reports/runtime.json, .html, .md.
    Exit 0 all ready, 1 a check failed, 3 incomplete."""
    invoke("runtime", locals())
