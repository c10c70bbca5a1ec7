"""``patchkit checkout``, ``pin``, ``wheel`` and ``cache``: the pinned base, its wheel, the cache."""

# No ``from __future__ import annotations``: typer reads these annotations.
from pathlib import Path
from typing import Annotated, Optional

import typer

from patchkit.cli.options import CONFIG, STRICT_INDEX, invoke
from patchkit.cli.root import app


@app.command()
def checkout(
    config: Annotated[Optional[str], CONFIG] = None,
    dest: Annotated[Optional[Path], typer.Option(help="copy the prepared base here")] = None,
) -> None:
    """Prepare the pinned base tree and print its path."""
    invoke("checkout", locals())


@app.command()
def pin(
    spec: Annotated[
        Optional[str],
        typer.Argument(help="vllm==0.33.0 (sha256 from the package index), git+URL@REV, or a source tree"),
    ] = None,
    git: Annotated[
        Optional[tuple[str, str]], typer.Option(help="URL REV: a git repository and commit (or tag)")
    ] = None,
    path: Annotated[Optional[Path], typer.Option(help="a source tree to pin")] = None,
    file: Annotated[
        Optional[Path],
        typer.Option("--config", help="the toml to edit (default: the project's patchkit.toml)"),
    ] = None,
) -> None:
    """Write or update [target] in patchkit.toml, with the sha256 the package index lists."""
    invoke("pin", locals())


@app.command()
def wheel(
    series_dir: Annotated[
        Optional[Path], typer.Argument(help="series dir (default: [series].dir; --verify: to check with)")
    ] = None,
    config: Annotated[Optional[str], CONFIG] = None,
    out: Annotated[Optional[Path], typer.Option(help="directory for the new wheel")] = None,
    name: Annotated[Optional[str], typer.Option(help="distribution name of the new wheel (renamed)")] = None,
    version: Annotated[
        Optional[str], typer.Option("--version", help="its version (default: the pinned one + pk.<hash>)")
    ] = None,
    audit: Annotated[
        Optional[Path],
        typer.Option(help="audit JSON: verdicts into the provenance (with --verify: checked against it)"),
    ] = None,
    verify: Annotated[Optional[Path], typer.Option(help="check this wheel instead of building one")] = None,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="write the result as JSON")] = None,
    strict_index: Annotated[bool, STRICT_INDEX] = False,
) -> None:
    """Build the pinned vLLM wheel with the series applied (new version, RECORD, provenance), or --verify
    one. Exit 1 when a patch does not apply or a check fails."""
    invoke("wheel", locals())


@app.command("cache")
def cache_(
    prune: Annotated[
        bool,
        typer.Option("--prune", help="remove what is of no use to this patchkit (other versions' results)"),
    ] = False,
    older_than: Annotated[
        Optional[str], typer.Option(help="prune entries last written longer ago than this (30d, 12h, 2w)")
    ] = None,
    everything: Annotated[bool, typer.Option("--all", help="prune every entry")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="say what pruning would remove, remove nothing")
    ] = False,
    json_out: Annotated[Optional[Path], typer.Option("--json", help="write the listing as JSON")] = None,
) -> None:
    """Show what the cache holds (entries, sizes, which patchkit they belong to) and prune it."""
    invoke("cache", locals())
