"""``patchkit apply`` and ``patchkit status``: a series on a checkout or an installed vllm."""

# No ``from __future__ import annotations``: typer reads these annotations.
from pathlib import Path
from typing import Annotated, Optional

import typer

from patchkit.cli.options import INSPECT, LOCK_TIMEOUT, SERIES, SITE_PACKAGES, STRICT_INDEX, TARGET, invoke
from patchkit.cli.root import app


@app.command("apply")
def apply_(
    series_dir: Annotated[Optional[Path], SERIES] = None,
    target: Annotated[str, TARGET] = "checkout",
    path: Annotated[Optional[Path], typer.Option(help="checkout to patch (--target checkout)")] = None,
    python: Annotated[Optional[str], typer.Option(help="interpreter whose vllm to patch")] = None,
    site_packages: Annotated[Optional[Path], SITE_PACKAGES] = None,
    check: Annotated[bool, typer.Option("--check", help="say what would happen, write nothing")] = False,
    reverse: Annotated[bool, typer.Option("--reverse", help="restore the base bytes")] = False,
    recover: Annotated[
        bool, typer.Option("--recover", help="roll back an interrupted apply, then stop")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="apply over a version mismatch / reverse over drift")
    ] = False,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="write the result as JSON")] = None,
    lock_timeout: Annotated[float, LOCK_TIMEOUT] = 30,
    strict_index: Annotated[bool, STRICT_INDEX] = False,
) -> None:
    """Apply a series (and overlays) to a checkout or an installed vllm, all or nothing."""
    invoke("apply", locals())


@app.command()
def status(
    series_dir: Annotated[Optional[Path], typer.Argument(help="also compare with this series")] = None,
    target: Annotated[str, INSPECT] = "checkout",
    path: Annotated[Optional[Path], typer.Option(help="checkout (--target checkout)")] = None,
    python: Annotated[Optional[str], typer.Option(help="interpreter whose vllm to inspect")] = None,
    site_packages: Annotated[Optional[Path], SITE_PACKAGES] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="write the result as JSON")] = None,
    lock_timeout: Annotated[float, LOCK_TIMEOUT] = 30,
) -> None:
    """What is applied where, verified by hash; exit 1 on drift."""
    invoke("status", locals())
